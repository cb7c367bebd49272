"""Give a speech model saved before per-language decoding its languages, without training it again:

    python -m tasks.speech.add_languages OLD_MODEL NEW_MODEL

reads the model's own training split (as its config names it), fits each language's alphabet and character
LM on that language's transcripts (tasks/speech/languages.py, the LM order of the model's ``task.lm_order``)
and writes NEW_MODEL: the same weights and config, the inference state with the languages added. OLD_MODEL is
only read (a file a user saved is never rewritten); NEW_MODEL must not exist. A model whose training data
names no languages (the synthesised or a user's manifest without ``language``) is refused in one line.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from tasks.engine.inference.loader import InferenceInputError, load_trained
from tasks.engine.inference.options import one_line_errors
from tasks.engine.inference.predict_cmd import export
from tasks.speech.languages import LanguageDecoders


def add_languages(old: Path, new: Path) -> LanguageDecoders:
    if new.exists():
        raise InferenceInputError(f"{new}: the file exists and is never overwritten; pick another name")
    trained = load_trained(old, splits=("train",), device="cpu", expect_tasks=("speech",))
    task = trained.task
    if not trained.data_loaded:
        task.setup()  # the training split: its transcripts and languages
    train = task.data["train"]
    languages = LanguageDecoders.fit(train["target"], train["language"], task.task_cfg.lm_order, len(task.vocab))
    if languages is None:
        raise InferenceInputError(f"{old}: its training data names no language per utterance; a model of one "
                                  f"language decodes as it is (language=auto)")
    task.languages = languages
    export(trained, new)
    return languages


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tasks.speech.add_languages", description=__doc__.split("\n")[0])
    parser.add_argument("old", type=Path, help="a speech model.pt (or run directory)")
    parser.add_argument("new", type=Path, help="the model file to write (must not exist)")
    args = parser.parse_args(argv)
    with one_line_errors("add_languages"):
        languages = add_languages(args.old, args.new)
        print(f"[add_languages] {args.new}: languages {', '.join(languages.names)}", flush=True)


if __name__ == "__main__":
    main()
