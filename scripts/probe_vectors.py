"""Rank word vectors on MR / TREC by a bag-of-vectors logistic regression: ``python scripts/probe_vectors.py
...`` (tasks/paper/vector_probe.py)."""
from tasks.paper.vector_probe import main

if __name__ == "__main__":
    main()
