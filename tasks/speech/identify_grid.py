"""Compare ways of telling a speech model's languages apart on one split or manifest (what chose ``auto``'s
rule, tasks/speech/languages.py):

    python -m tasks.speech.identify_grid MODEL [MANIFEST]     # MANIFEST: a .jsonl with "language"; else test

The model's log-probabilities are computed once; each rule then picks a language per utterance and the
share it gets right is printed:
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

from tasks.engine.inference.loader import build_trained, read_trained
from tasks.engine.inference.options import one_line_errors
from tasks.engine.run.context import open_run
from tasks.speech.decoding import gated_bonus, greedy_decode
from tasks.speech.languages import DecodeSettings


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


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tasks.speech.identify_grid", description=__doc__.split("\n")[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("manifest", type=Path, nargs="?")
    args = parser.parse_args(argv)
    with one_line_errors("identify_grid"):
        task, items = utterances(args.model, args.manifest)
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


if __name__ == "__main__":
    main()
