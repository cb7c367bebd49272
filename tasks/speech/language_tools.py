"""Language tools for a trained speech model (tasks/speech/languages.py):

    python -m tasks.speech.language_tools add OLD_MODEL NEW_MODEL
    python -m tasks.speech.language_tools identify MODEL [MANIFEST]   # MANIFEST: a .jsonl with "language"; else test

``add`` gives a model saved before per-language decoding its languages, without training it again: it reads
the model's own training split (as its config names it), fits each language's alphabet and character LM on
that language's transcripts (the LM order of the model's ``task.lm_order``) and writes NEW_MODEL: the same
weights and config, the inference state with the languages added. OLD_MODEL is only read (a file a user
saved is never rewritten); NEW_MODEL must not exist. A model whose training data names no languages is
refused in one line.

``identify`` compares ways of telling the languages apart on one split or manifest (what chose ``auto``'s
rule). The model's log-probabilities are computed once; each rule then picks a language per utterance and
the share it gets right is printed:
    beam          the decoder's ranking: beam 8, log P_ctc + lm_weight x log P_lm + bonus (auto's rule)
    beam-no-bonus the same without the per-character bonus
    beam-w1       the same with LM weight 1.0 for the choice
    greedy-lm     the unconstrained greedy transcript scored by each language's LM alone
    greedy-masked the best path within each alphabet + lm_weight x log P_lm (auto's rule with task.decoder=greedy)
"""
from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

import torch

from tasks.engine.inference.loader import InferenceInputError, build_trained, load_trained, read_trained
from tasks.engine.inference.options import one_line_errors
from tasks.engine.inference.predict_cmd import export
from tasks.engine.run.context import open_run
from tasks.speech.decoding import gated_bonus, greedy_decode
from tasks.speech.languages import DecodeSettings, LanguageDecoders


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


def utterances(model_path: Path, manifest):
    """(log-probs (T, V), language) of every utterance of the test split or ``manifest``; and the task."""
    run = read_trained(model_path, "best", [], scored_file=(str(manifest), "test") if manifest else None)
    with open_run(run.cfg, None, lock=False):
        trained = build_trained(run, splits=("test",), device="cpu")
        task = trained.task
        task.setup()
        if task.languages is None:
            raise ValueError(f"{model_path}: no languages in it (python -m tasks.speech.add_languages gives them)")
        out, d = [], task.data["test"]
        with torch.no_grad():
            for batch in task.batches("test"):
                lp = trained.model(batch["x"], batch["mask_pad"]).float().log_softmax(-1)
                out += [(lp[:n, b].clone(), d["language"][i])
                        for b, (i, n) in enumerate(zip(batch["index"], batch["lengths"].tolist()))]
    return task, out


def identify(model: Path, manifest) -> None:
    """Print the share of utterances each rule gives the right language."""
    task, items = utterances(model, manifest)
    langs, t, rate = task.languages, task.task_cfg, task.chars_per_step()
    right: Counter = Counter()
    for lp, lang in items:
        greedy = greedy_decode(lp.unsqueeze(1), torch.tensor([lp.size(0)]))[0]
        bonus = gated_bonus(greedy, lp.size(0), t.lm_bonus, rate)
        lm_alone = {name: d.lm.sequence_log_prob(greedy) for name, d in langs.by_language.items()}
        right["greedy-lm"] += max(lm_alone, key=lm_alone.get) == lang
        for rule, settings in (("beam", DecodeSettings(8, t.lm_weight, bonus)),
                               ("beam-no-bonus", DecodeSettings(8, t.lm_weight, 0.0)),
                               ("beam-w1", DecodeSettings(8, 1.0, bonus)),
                               ("greedy-masked", DecodeSettings(None, t.lm_weight, 0.0))):
            right[rule] += langs.decode(lp, "auto", settings)[1] == lang
    print(f"{len(items)} utterances; language right: " + ", ".join(f"{rule} {100 * n / len(items):.1f}%"
                                                               for rule, n in right.items()), flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tasks.speech.language_tools", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    add = commands.add_parser("add", help="a new model file with the languages of an older one")
    add.add_argument("old", type=Path, help="a speech model.pt (or run directory)")
    add.add_argument("new", type=Path, help="the model file to write (must not exist)")
    grid = commands.add_parser("identify", help="each identification rule's share of languages right")
    grid.add_argument("model", type=Path)
    grid.add_argument("manifest", type=Path, nargs="?")
    args = parser.parse_args(argv)
    with one_line_errors("language_tools"):
        if args.command == "add":
            languages = add_languages(args.old, args.new)
            print(f"[language_tools] {args.new}: languages {', '.join(languages.names)}", flush=True)
        else:
            identify(args.model, args.manifest)


if __name__ == "__main__":
    main()
