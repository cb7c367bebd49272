"""Sample text from a trained language model run (task=lm or lm_char; model=srupp, sru or lstm).

    PYTHONPATH=. python scripts/sample_lm.py RUN_DIR [--checkpoint best|last] [--prompt TEXT] [--tokens 200]
                                            [--temperature 1.0] [--top-k 0] [--seed 0]

Prompt and sample run one ``encoder.step`` per token (SRU / LSTM: the recurrent state; SRU++:
the key/value cache of ``sru.SRUpp.decode``), so generating N tokens costs N single-position
steps, not N forwards over a growing prefix, and the logits equal those of one causal forward
over prompt + sample (tests/test_srupp_lm.py). Prints the prompt and the sample.
"""
import argparse
from pathlib import Path
from typing import List, Optional

import torch
from omegaconf import OmegaConf

from tasks.common.text import Vocabulary
from tasks.engine.checkpoint import load_checkpoint
from tasks.engine.registry import build_task
from tasks.lm.data import tokenize


def load_model(run_dir: Path, checkpoint: str = "best"):
    """(model in eval mode, vocabulary, level) of a finished LM run."""
    ckpt = load_checkpoint(Path(run_dir) / "checkpoints" / f"{checkpoint}.pt")
    cfg = OmegaConf.create(ckpt["config"])
    if cfg.task.name != "lm":
        raise ValueError(f"{run_dir}: a task={cfg.task.name} run; sample_lm.py needs a language model "
                         f"run (task=lm or task=lm_char)")
    task = build_task(cfg)
    task.vocab = Vocabulary.from_state_dict(ckpt["task"]["vocab"])
    model = task.build_model()
    model.load_state_dict(ckpt["model"])
    return model.eval(), task.vocab, cfg.task.data.level


def _head(model, h: torch.Tensor) -> torch.Tensor:
    """Logits from encoder outputs (the LanguageModel's output layers, eval mode)."""
    if model.proj is not None:
        h = model.proj(h)
    return model.decoder(h)


@torch.no_grad()
def generate(model, prompt_ids: List[int], n_tokens: int, temperature: float = 1.0, top_k: int = 0,
             generator: Optional[torch.Generator] = None, greedy: bool = False):
    """(generated ids, the logits each was drawn from (n_tokens, V)) after ``prompt_ids``."""
    if not prompt_ids:
        raise ValueError("generate: the prompt must hold at least one token")
    state = None
    for token in prompt_ids:  # one step each: for SRU++ this is exactly the causal forward's context
        h_t, state = model.encoder.step(model.embed(torch.tensor([token])), state)
    logits = _head(model, h_t)                               # (1, V)
    out, all_logits = [], []
    for _ in range(n_tokens):
        all_logits.append(logits[0])
        scores = logits[0] / max(temperature, 1e-6)
        if top_k > 0:
            kth = scores.topk(min(top_k, scores.numel())).values[-1]
            scores = scores.masked_fill(scores < kth, float("-inf"))
        if greedy:
            next_id = int(scores.argmax())
        else:
            next_id = int(torch.multinomial(scores.softmax(-1), 1, generator=generator))
        out.append(next_id)
        h_t, state = model.encoder.step(model.embed(torch.tensor([next_id])), state)
        logits = _head(model, h_t)
    return out, torch.stack(all_logits) if all_logits else torch.empty(0)


def main(argv: Optional[List[str]] = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--checkpoint", default="best", choices=["best", "last"])
    parser.add_argument("--prompt", default="The ")
    parser.add_argument("--tokens", type=int, default=200)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--top-k", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
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
