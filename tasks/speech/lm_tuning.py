"""Pick the character LM's order, weight and bonus for a trained speech run on its validation split
(``python -m tasks.speech.lm_tuning``, a thin command over ``main`` here).

    python -m tasks.speech.lm_tuning RUN_DIR [--orders 4 6 8] [--weights 0.3 0.5 0.8] [--bonuses 0 1 2]
        [--beam 8] [--split valid]

The run's best checkpoint computes the split's CTC log-probabilities once; each (order, weight, bonus) is
then a prefix beam search over them (tasks/speech/decoding.py) with the LM fitted on the training
transcripts, scored by WER/CER from summed edit counts as in training. Greedy and the beam without an LM
are printed first. Tune on valid; pass --split test only to report the chosen setting.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from tasks.engine.inference.options import one_line_errors
from tasks.engine.inference.loader import load_trained
from tasks.speech.char_lm import CharNgramLM
from tasks.speech.decoding import greedy_decode, prefix_beam_search
from tasks.speech.report import error_counts, rates


@torch.no_grad()
def split_log_probs(task, model, split: str):
    """(log-probs (T, V), reference) of every utterance of ``split``, in the task's batch order."""
    out = []
    for batch in task.batches(split):
        log_probs = model(batch["x"], batch["mask_pad"]).float().log_softmax(-1)
        for b, (i, n) in enumerate(zip(batch["index"], batch["lengths"].tolist())):
            out.append((log_probs[:n, b].clone(), task.data[split]["ref"][i]))
    return out


def score(task, pairs, decode) -> dict:
    hyps = [task.transcript(decode(lp)) for lp, _ in pairs]
    return rates(error_counts(zip([ref for _, ref in pairs], hyps)))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m tasks.speech.lm_tuning", description=__doc__.split("\n")[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--split", default="valid", choices=["valid", "test"])
    ap.add_argument("--orders", type=int, nargs="+", default=[4, 6, 8])
    ap.add_argument("--weights", type=float, nargs="+", default=[0.3, 0.5, 0.8])
    ap.add_argument("--bonuses", type=float, nargs="+", default=[0.0, 1.0, 2.0])
    ap.add_argument("--beam", type=int, default=8)
    args = ap.parse_args(argv)
    with one_line_errors("tune_speech_lm"):  # the one loader (threads and denormal flushing as trained)
        trained = load_trained(args.run_dir, splits=("train", args.split), device="cpu", expect_tasks=("speech",))
        task, model = trained.task, trained.model
        if not trained.data_loaded:
            task.setup()  # the training transcripts fit each candidate LM
    pairs = split_log_probs(task, model, args.split)
    greedy = score(task, pairs, lambda lp: greedy_decode(lp.unsqueeze(1), torch.tensor([lp.size(0)]))[0])
    print(f"{args.split}: {len(pairs)} utterances; greedy WER {greedy['wer']:.2f} CER {greedy['cer']:.2f}", flush=True)
    plain = score(task, pairs, lambda lp: prefix_beam_search(lp, beam=args.beam))
    print(f"beam {args.beam}, no LM: WER {plain['wer']:.2f} CER {plain['cer']:.2f}", flush=True)
    print("| order | weight | bonus | WER | CER | seconds |\n|---|---|---|---|---|---|", flush=True)
    for order in args.orders:
        lm = CharNgramLM.fit(task.data["train"]["target"], order, len(task.vocab))
        for weight in args.weights:
            for bonus in args.bonuses:
                t0 = time.time()
                r = score(task, pairs, lambda lp: prefix_beam_search(lp, beam=args.beam, lm=lm, lm_weight=weight,
                                                                     bonus=bonus))
                print(f"| {order} | {weight:g} | {bonus:g} | {r['wer']:.2f} | {r['cer']:.2f} | "
                      f"{time.time() - t0:.0f} |", flush=True)


if __name__ == "__main__":
    main()
