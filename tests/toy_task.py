"""A task written only against the documented contract (tasks/engine/base.py, docs/adding_a_task.md):
variable-length sequences, tag every token with (token + 1) mod V, loss summed over tokens with
``sample_size`` = tokens, per-example records written by ``end_eval`` as ``predictions_<split>.json``.

Used by tests/test_contract.py in one process and, through tests/contract_worker.py, under torchrun.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from tasks.common.batching import bucket_batches, pad_collate, shard_batches
from tasks.common.encoders import build_encoder
from tasks.engine.base import Task
from tasks.engine.config.command_options import CommandOptions, option

VOCAB = 11


@dataclass(kw_only=True)
class ToyPredictOptions(CommandOptions):
    """predict.py's options of the toy task, declared once: type, range, default, help, the mode they apply in."""
    mode: Literal["tags", "count"] = option("tags", help="each token's tag, or how many tokens")
    shift: int = option(0, low=0, high=VOCAB - 1, when=("mode", "tags"), help="added to every tag (mod VOCAB)")


EMBED = 8


class ToyTagger(nn.Module):
    def __init__(self, encoder_cfg):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, EMBED)
        self.encoder = build_encoder(encoder_cfg, EMBED)
        self.out = nn.Linear(self.encoder.output_size, VOCAB)

    def forward(self, tokens, mask_pad):
        h, _ = self.encoder(self.embed(tokens), None, mask_pad=mask_pad)
        return self.out(h)


class ToyTask(Task):
    name, monitor, monitor_mode, throughput_key = "toy", "accuracy", "max", "ntokens"

    def __init__(self, cfg, batch_size=2, n_train=48, n_eval=13):
        super().__init__(cfg)
        self.batch_size = batch_size
        g = torch.Generator().manual_seed(0)
        self.data = {}
        for split, n in (("train", n_train), ("valid", n_eval), ("test", n_eval)):
            lengths = torch.randint(1, 9, (n,), generator=g).tolist()
            self.data[split] = [torch.randint(1, VOCAB, (k,), generator=g) for k in lengths]

    def setup(self):
        pass

    def _plan(self, split, epoch, seed):
        lengths = [len(s) for s in self.data[split]]
        train = split == "train"
        size = self.batch_size if train else 4
        plan = bucket_batches(lengths, max_examples=size, shuffle=train, seed=seed, epoch=epoch, sort=False)
        return shard_batches(plan, train=train)

    def num_batches(self, split, epoch=0, seed=0):
        return len(self._plan(split, epoch, seed))

    def batches(self, split, epoch=0, seed=0, start=0):
        for index in self._plan(split, epoch, seed)[start:]:
            tokens, mask_pad, _ = pad_collate([self.data[split][i] for i in index])
            yield {"ids": torch.tensor(index), "tokens": tokens, "mask_pad": mask_pad}

    def encoder_input_size(self):
        return EMBED

    def build_model(self):
        torch.manual_seed(0)
        return ToyTagger(self.cfg["model"])

    def compute_loss(self, model, batch, split):
        logits = model(batch["tokens"], batch["mask_pad"]).float()
        real = ~batch["mask_pad"]
        target = (batch["tokens"] + 1) % VOCAB
        loss_sum = F.cross_entropy(logits[real], target[real], reduction="sum")
        correct = (logits.argmax(-1)[real] == target[real]).sum().item()
        ntokens = int(real.sum())
        return loss_sum, {"loss_sum": loss_sum.item(), "correct": correct, "ntokens": ntokens,
                          "sample_size": ntokens}

    def eval_step(self, model, batch, split):
        _, out = self.compute_loss(model, batch, split)
        pred = model(batch["tokens"], batch["mask_pad"]).argmax(-1)
        lengths = (~batch["mask_pad"]).sum(0)
        records = [{"id": int(i), "pred": pred[: int(n), j].tolist()}
                   for j, (i, n) in enumerate(zip(batch["ids"], lengths))]
        return out, records

    def reduce_metrics(self, s):
        return {"loss": s["loss_sum"] / max(s["ntokens"], 1), "accuracy": 100.0 * s["correct"] / max(s["ntokens"], 1)}

    def end_eval(self, split, records, metrics, run_dir):
        if run_dir is not None:
            (run_dir / f"predictions_{split}.json").write_text(json.dumps({r["id"]: r["pred"] for r in records}))
            (run_dir / f"records_{split}.json").write_text(json.dumps([r["id"] for r in records]))
        return {"n_records": float(len(records))}

    # ---- predict.py: its options (ToyPredictOptions) and one result per input; formatting by the defaults
    predict_schema = ToyPredictOptions

    def parse_input(self, line):
        try:
            ids = [int(t) for t in line.split()]
        except ValueError:
            raise ValueError("expected token ids (integers) separated by spaces") from None
        if not ids or not all(0 < i < VOCAB for i in ids):
            raise ValueError(f"expected one or more ids from 1 to {VOCAB - 1}")
        return ids

    def predict(self, model, inputs, options, progress):
        progress(len(inputs))
        if options.mode == "count":
            return [{"tokens": len(ids)} for ids in inputs]
        tokens, mask_pad, _ = pad_collate([torch.tensor(ids) for ids in inputs])
        tags = (model(tokens, mask_pad).argmax(-1) + options.shift) % VOCAB
        return [" ".join(str(t) for t in tags[:len(ids), j].tolist()) for j, ids in enumerate(inputs)]
