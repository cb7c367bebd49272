"""Generate the offline SQuAD v1.1-format set from gensim's Wikipedia sample (or another MediaWiki dump).

    python -m tasks.squad.prepare                       # into ~/.cache/sru-experiments/squad/
    python -m tasks.squad.prepare --out data/squad --wiki enwiki-pages-articles.xml.bz2

`python train.py task=squad` runs the same generator on first use (tasks/squad/generator/offline_corpus.py); this command
is for looking at the questions or writing them elsewhere. Prints the three files and a few examples.
"""
from __future__ import annotations

import argparse
import json
import random
from collections import Counter

from tasks.squad.data import cache_root, load_squad_file
from tasks.squad.generator.offline_corpus import prepare_offline


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=None, help="cache folder (default: $SRU_CACHE/squad or ~/.cache/sru-experiments/squad)")
    ap.add_argument("--wiki", default=None, help="MediaWiki XML dump (.xml/.bz2/.gz); default: gensim's sample")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--max-context-words", type=int, default=120)
    ap.add_argument("--questions-per-context", type=int, default=4)
    ap.add_argument("--prose", nargs="+", default=["wiki", "bbc"], help="offline prose: wiki and/or bbc")
    ap.add_argument("--show", type=int, default=5, help="print this many random training questions")
    args = ap.parse_args()
    wiki = args.wiki
    if wiki is None:
        from tasks.common.corpora import gensim_wiki_path
        wiki = gensim_wiki_path()
    # the same parameters (and so the same cache key) as conf/task/squad.yaml's defaults
    params = {"seed": args.seed, "max_context_words": args.max_context_words,
              "questions_per_context": args.questions_per_context, "fractions": [0.8, 0.1, 0.1],
              "prose": args.prose}
    paths = prepare_offline(cache_root(args.out), wiki, params)
    for split, path in paths.items():
        examples = load_squad_file(path)  # validates what was written
        types = Counter(ex.extra.get("type") for ex in examples)
        print(f"{split}: {len(examples):,} questions, {len({ex.title for ex in examples})} articles, "
              f"types {dict(types)} -> {path}")
    train = load_squad_file(paths["train"])
    for ex in random.Random(0).sample(train, min(args.show, len(train))):
        print(json.dumps({"question": ex.question, "answer": ex.answers[0]}, ensure_ascii=False))


if __name__ == "__main__":
    main()
