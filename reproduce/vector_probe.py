"""A cheap linear probe of word-vector sets on a classification data set: each sentence is the mean of its
words' L2-normalised vectors, a logistic regression reads it (C picked on validation); prints coverage and
valid/test accuracy per set. Minutes, not the hours of training Table 1's cells on each set.

    python -m reproduce.vector_probe --data mr --vectors offline_word2vec spacy_en_md /tmp/glove.6B.50d.txt

``--vectors`` takes what ``task.embedding.path`` takes (a named set or a word2vec / GloVe file).
"""
from __future__ import annotations

import argparse

import numpy as np
from sklearn.linear_model import LogisticRegression

from tasks.classification.data import load_classification_data, tokenize_rows
from tasks.common.vectors import load_vectors
from tasks.engine.base import build_task
from tasks.engine.config.tree import compose


def sentence_features(sentences, vectors, dim):
    out = []
    for words in sentences:
        rows = [vectors[w] for w in words if w in vectors]
        out.append(np.mean(rows, 0) if rows else np.zeros(dim, dtype=np.float32))
    return np.stack(out)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m reproduce.vector_probe", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", default="mr", help="task.data.name preset (default mr; fold 0)")
    p.add_argument("--vectors", nargs="+", required=True)
    args = p.parse_args(argv)
    overrides = ["task=classification", f"task.data.name={args.data}", "task.data.fold=0"]
    data = load_classification_data(build_task(compose(overrides)).task_cfg.data)  # the task's typed section
    tokens = {split: tokenize_rows(rows) for split, rows in data.splits.items()}
    labels = {split: [r.label for r in rows] for split, rows in data.splits.items()}
    words = {w for sentences in tokens.values() for s in sentences for w in s}
    train_words = {w for s in tokens["train"] for w in s}
    for path in args.vectors:
        vectors = load_vectors(path, words)
        vectors = {w: v / max(float(np.linalg.norm(v)), 1e-8) for w, v in vectors.items()}
        dim = len(next(iter(vectors.values())))
        x = {split: sentence_features(tokens[split], vectors, dim) for split in tokens}
        valid, c = max((LogisticRegression(C=c, max_iter=2000).fit(x["train"], labels["train"])
                        .score(x["valid"], labels["valid"]), c) for c in (0.1, 1, 10, 100))
        test = LogisticRegression(C=c, max_iter=2000).fit(x["train"], labels["train"]).score(x["test"], labels["test"])
        coverage = 100 * len(train_words & set(vectors)) / len(train_words)
        print(f"{args.data} {path}: {dim}-d, training vocabulary covered {coverage:.1f}%, valid {100 * valid:.1f} "
              f"(C={c:g}), test {100 * test:.1f}", flush=True)


if __name__ == "__main__":
    main()
