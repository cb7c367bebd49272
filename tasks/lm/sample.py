"""Sample text from a trained language model run (task=lm or lm_char; model=srupp, sru or lstm):
``python -m tasks.lm.sample``, a thin command over ``main`` here.

    python -m tasks.lm.sample RUN_DIR|MODEL_FILE [--checkpoint best|last] [--prompt TEXT] [--tokens 200]
                                [--temperature 1.0] [--top-k 0] [--seed 0]

The same loader and decoder as ``python predict.py run=<run> mode=generate`` (``tasks.engine.inference.loader``,
``tasks.lm.generate``). Prints the prompt and the sample.
"""
import argparse
from pathlib import Path
from typing import List, Optional

import torch

from tasks.engine.inference.options import one_line_errors
from tasks.engine.inference.loader import load_trained
from tasks.lm.data import tokenize
from tasks.lm.generate import generate


def load_model(run: Path, checkpoint: str = "best"):
    """(model in eval mode, vocabulary, level) of a trained LM run or model file."""
    trained = load_trained(run, checkpoint, expect_tasks=("lm",), device="cpu")
    return trained.model, trained.task.vocab, trained.task.level


def main(argv: Optional[List[str]] = None) -> str:
    parser = argparse.ArgumentParser(prog="python -m tasks.lm.sample", description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--checkpoint", default="best", choices=["best", "last"])
    parser.add_argument("--prompt", default="The ")
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--top-k", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    with one_line_errors("sample_lm"):
        model, vocab, level = load_model(args.run_dir, args.checkpoint)
    prompt = tokenize(args.prompt, level)
    if level == "word" and prompt and prompt[-1] == "<eos>":
        prompt = prompt[:-1]  # a one-line prompt continues its line
    ids, _ = generate(model, vocab.encode(prompt), args.tokens, args.temperature, args.top_k,
                      torch.Generator().manual_seed(args.seed))
    joiner = "" if level == "char" else " "
    text = joiner.join(prompt) + joiner + joiner.join(vocab.decode(ids, skip_specials=False))
    print(text)
    return text


if __name__ == "__main__":
    main()
