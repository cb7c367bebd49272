"""Sentence classification (paper Table 1: MR, SUBJ, CR, MPQA, TREC, SST) with SRU / LSTM / CNN encoders.

One run trains on one split (for cross-validated sets: one fold, ``task.data.fold``); ``python -m tasks.classification.cross_validation``
runs every fold and reports mean ± std. Metrics: accuracy and macro-F1 (percent) from summed counts.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

import torch.nn.functional as F
from torch import Tensor, nn

from tasks.classification.presets import PRESETS, apply_preset
from tasks.classification.schema import ClassificationConfig, ClassificationPredictOptions
from tasks.common.batching import global_batches, pad_collate, shard_batches, split_batch
from tasks.common.encoders import build_encoder, check_encoder_config
from tasks.common.text import PAD, UNK, Vocabulary
from tasks.common.vectors import embedding_matrix, load_vectors
from tasks.engine.base import LoggingOutput, Record, Task, run_seed, unk_fraction
from tasks.engine.errors import ConfigError
from tasks.engine.config.schema import check_choice

from .data import EncodedSplit, collate, encode, load_classification_data, load_scored_splits, tokenize_rows
from .sources import Row
from .metrics import count_logging_output, reduce_classification
from .model import SentenceClassifier

SPLITS = ("train", "valid", "test")


class ClassificationTask(Task):
    name = "classification"
    scored_file = ("files", "task.data.files.{split}")  # evaluate.py file=<path>
    monitor = "accuracy"
    monitor_mode = "max"
    throughput_key = "nsentences"
    models = ("sru", "lstm", "cnn")
    schema = ClassificationConfig

    def __init__(self, cfg: Mapping[str, Any]):
        super().__init__(cfg)
        self.data = None
        self.vocab: Vocabulary | None = None
        self.label_names: List[str] = []
        self.encoded: Dict[str, EncodedSplit] = {}
        self.vectors = None
        self.epoch_seconds: Dict[int, float] = {}
        self._epoch_start: Optional[float] = None

    def check_config(self) -> None:
        super().check_config()  # model name, task.* types and ranges
        check_encoder_config(self.cfg["model"], causal=self.causal)
        data = self.task_cfg.data
        check_choice("task.data.name", data.name, [*sorted(PRESETS), None])
        if data.fold >= data.cv_folds:
            raise ConfigError(f"task.data.fold: expected 0 <= fold < task.data.cv_folds={data.cv_folds}, "
                              f"received {data.fold}")

    def max_length(self) -> Optional[int]:
        """Sentences are cut to this many tokens: task.data.max_length, or its data set preset's (imdb: 400)."""
        return apply_preset(self.task_cfg.data).max_length

    # ---- data ---------------------------------------------------------------------------------
    def setup(self) -> None:
        t0 = time.time()
        t = self.task_cfg
        lowercase, max_len = t.data.lowercase, self.max_length()
        if self.restored:  # a loaded model (evaluate.py): its own vocabulary and labels, no vectors needed
            self.data = load_scored_splits(t.data, self.splits, self.label_names)
            self.encoded = {s: encode(tokenize_rows(rows, lowercase, max_len), rows, self.vocab, self.label_names)
                            for s, rows in self.data.splits.items()}
            return
        self.data = load_classification_data(t.data)
        tokens = {s: tokenize_rows(self.data.splits[s], lowercase, max_len) for s in SPLITS}
        self.label_names = list(self.data.label_names)
        emb = t.embedding
        extra: List[str] = []
        if emb.path:
            # keep vectors for every word of every split: test words with a pretrained vector get it
            # (a fixed lookup, not training on test), the rest of unseen words map to <unk>
            wanted = {w for s in SPLITS for sent in tokens[s] for w in sent}
            self.vectors = load_vectors(emb.path, wanted, emb.format)
            extra = sorted(w for w in self.vectors if w in wanted)
        train_vocab = Vocabulary.build(tokens["train"], specials=(PAD, UNK), min_freq=t.data.min_freq)
        self.vocab = Vocabulary(train_vocab.itos[2:] + [w for w in extra if w not in train_vocab.stoi], (PAD, UNK))
        self.encoded = {s: encode(tokens[s], self.data.splits[s], self.vocab, self.data.label_names)
                        for s in SPLITS}
        sizes = ", ".join(f"{s} {len(self.encoded[s]):,}" for s in SPLITS)
        fold = f", test = fold {self.data.fold} of {self.data.n_folds}" if self.data.cross_validated else ""
        name = t.data.name or t.data.source  # the preset's name, else the source (for this line only)
        print(f"[classification] {name}: {len(self.data.label_names)} classes, vocab {len(self.vocab):,}; "
              f"{sizes}{fold} ({time.time() - t0:.1f}s)")

    def unknown_share(self, split: str) -> Optional[float]:
        return unk_fraction(self.encoded[split].token_ids, self.vocab.unk_id)

    def _plan(self, split: str, epoch: int, seed: int) -> List[List[int]]:
        """This rank's batches. Training: fixed-size global batches (``task.batch_size``) in (seed, epoch)
        order, each split over the ranks; evaluation: whole batches dealt round-robin to the ranks."""
        n = len(self.encoded[split])
        if split == "train":
            plan = global_batches(n, self.task_cfg.batch_size, shuffle=True, seed=seed, epoch=epoch)
            return [split_batch(b) for b in plan]
        plan = global_batches(n, self.task_cfg.eval_batch_size, shuffle=False, world_size=1)
        return shard_batches(plan, train=False)

    def num_batches(self, split: str, epoch: int = 0, seed: int = 0) -> int:
        return len(self._plan(split, epoch, seed))

    def batches(self, split: str, epoch: int = 0, seed: int = 0, start: int = 0) -> Iterator[Dict[str, Tensor]]:
        data = self.encoded[split]
        for index in self._plan(split, epoch, seed)[start:]:
            yield {**collate(data, index, self.vocab.pad_id), "index": list(index)}

    def begin_epoch(self, epoch: int) -> None:
        self._epoch_start = time.perf_counter()

    def end_epoch(self, epoch: int) -> None:
        # wall time of the whole pass (forward/backward/step included): the paper's Table 1 reports
        # training time per epoch. None after a resume inside the epoch: not a whole epoch.
        start, self._epoch_start = self._epoch_start, None
        if start is None:
            return
        seconds = time.perf_counter() - start
        self.epoch_seconds[int(epoch)] = seconds
        print(f"[classification] epoch {epoch}: {seconds:.1f} s training "
              f"({len(self.encoded['train']) / seconds:.0f} examples/s)", flush=True)

    # ---- model --------------------------------------------------------------------------------
    def encoder_input_size(self) -> int:
        return self.task_cfg.embedding.dim  # the word vectors

    def build_model(self) -> nn.Module:
        t, model_cfg = self.task_cfg, self.cfg["model"]
        emb = t.embedding
        weight, hits = embedding_matrix(self.vocab.itos, emb.dim, self.vectors, normalize=emb.normalize,
                                        seed=run_seed(self.cfg))
        # null: fixed when pretrained vectors are given (the paper), trained otherwise (conf/task/classification.yaml)
        fixed = bool(emb.path) if emb.fixed is None else emb.fixed
        if self.vectors is not None:
            print(f"[classification] pretrained vectors for {hits:,}/{len(self.vocab):,} words "
                  f"({'fixed' if fixed else 'fine-tuned'})")
        encoder = build_encoder(model_cfg, self.encoder_input_size())
        return SentenceClassifier(weight, encoder, len(self.label_names), dropout=float(t.dropout),
                                  pooling=t.pooling,
                                  bidirectional=encoder.bidirectional,
                                  fix_embedding=fixed)

    # ---- loss and metrics ---------------------------------------------------------------------
    def compute_loss(self, model: nn.Module, batch: Dict[str, Tensor], split: str) -> Tuple[Tensor, LoggingOutput]:
        logits = model(batch["tokens"], batch["mask_pad"], batch["lengths"])
        batch["logits"] = logits.detach()  # eval_step's predictions
        labels = batch["labels"]
        loss_sum = F.cross_entropy(logits.float(), labels, reduction="sum")
        out = count_logging_output(logits.detach(), labels, loss_sum.detach().item(), len(self.label_names))
        out["sample_size"] = labels.numel()  # the trainer divides by the global number of sentences
        return loss_sum, out

    def reduce_metrics(self, summed: LoggingOutput) -> Dict[str, float]:
        return reduce_classification(summed, len(self.label_names))

    # ---- predictions: evaluation's file and predict.py ----------------------------------------
    def eval_step(self, model: nn.Module, batch: Dict[str, Tensor], split: str) -> Tuple[LoggingOutput, List[Record]]:
        _, out = self.compute_loss(model, batch, split)
        records = [{"id": i, **r} for i, r in zip(batch["index"], self._labelled(batch["logits"]))]
        return out, records

    def _labelled(self, logits: Tensor) -> List[Record]:
        probs = logits.float().softmax(-1).tolist()
        return [{"label": self.label_names[max(range(len(p)), key=p.__getitem__)],
                 "probabilities": {name: round(x, 6) for name, x in zip(self.label_names, p)}} for p in probs]

    def end_eval(self, split: str, records: List[Record], metrics: Dict[str, float],
                 run_dir: Optional[Path]) -> Dict[str, float]:
        """``predictions_<split>.jsonl``: each sentence of the split, in order, with its predicted label."""
        if run_dir is not None and records:
            rows = self.data.splits[split]
            lines = [json.dumps({"text": " ".join(str(rows[r["id"]].text).split()), "label": r["label"],
                                 "probabilities": r["probabilities"]}, ensure_ascii=False)
                     for r in sorted(records, key=lambda r: r["id"])]
            (Path(run_dir) / f"predictions_{split}.jsonl").write_text("".join(x + "\n" for x in lines), encoding="utf-8")
        return {}

    def inference_state(self) -> Dict[str, Any]:
        return {"vocab": self.vocab.state_dict(), "label_names": list(self.label_names)}

    def restore_inference_state(self, state: Mapping[str, Any]) -> None:
        self.vocab, self.label_names = Vocabulary.from_state_dict(state["vocab"]), list(state["label_names"])

    def state_dict(self) -> Dict[str, Any]:
        return self.inference_state() if self.vocab is not None else {}

    predict_schema = ClassificationPredictOptions

    def predict(self, model: nn.Module, inputs: List[str], options: ClassificationPredictOptions,
                progress) -> List[Any]:
        """Each sentence's label (the data set's names) and class probabilities, batched as evaluation."""
        tokens = tokenize_rows([Row(text, None, "") for text in inputs], self.task_cfg.data.lowercase,
                               self.max_length())
        ids = [self.vocab.encode(t) or [self.vocab.unk_id] for t in tokens]
        size = options.batch_size or self.task_cfg.eval_batch_size  # predict.py option, else eval
        device = next(model.parameters()).device
        results: List[Any] = []
        for start in range(0, len(ids), size):
            batch = pad_collate(ids[start:start + size], self.vocab.pad_id)
            tokens_t, mask_pad, lengths = (x.to(device) for x in batch)
            results += self._labelled(model(tokens_t, mask_pad, lengths))
            progress(len(batch[2]))
        return results
