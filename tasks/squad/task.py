"""SQuAD v1.1 extractive QA (paper Table 2): the DrQA document reader over SRU or LSTM encoders.

Metrics: official EM / F1 (``metrics.py``) from summed counts; ``monitor`` = F1. Every evaluation writes
``predictions_<split>.json`` ({question id: answer text}, the official format) into the run directory and
prints its path beside the split's SQuAD file, so ``python evaluate-v1.1.py <data> <predictions>`` rescoring
gives the printed numbers. Two trivial baselines on the same split (first span of the asked type, a
random span) are reported with each evaluation (``baseline_*`` metrics).
"""
from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tasks.common.batching import bucket_batches, shard_batches, split_batch
from tasks.common.encoders import check_encoder_config
from tasks.common.text import PAD, UNK, Vocabulary
from tasks.common.vectors import embedding_matrix, load_vectors
from tasks.corpora.wordnet import load_wordnet
from tasks.engine.run import distributed
from tasks.engine.base import LoggingOutput, Record, Task, run_seed, unk_fraction
from tasks.squad.schema import SquadConfig, SquadPredictOptions

from .data import SPLITS, SquadExample, human_check_path, load_squad_file, parse_squad, split_files
from .features import EncodedExample, collate, encode_split, num_features, synonym_questions
from .metrics import baseline_sums, decode_spans, reduce_squad, score
from .model import DocumentReader, ReaderEnsemble, combine_scores
from .span_edges import entity_edges, without_asked_noun, without_relation_head, without_run_on
from .tagger import check_tagger, default_cache


class SquadTask(Task):
    name = "squad"
    scored_file = ("files", "task.data.files.{split}")  # evaluate.py file=<path>
    monitor = "f1"
    monitor_mode = "max"
    throughput_key = "nsentences"
    models = ("sru", "lstm")  # the reader stacks recurrent encoders (DrQA)
    schema = SquadConfig

    def __init__(self, cfg: Mapping[str, Any]):
        super().__init__(cfg)
        self.vocab: Optional[Vocabulary] = None
        self.files: Dict[str, Path] = {}
        self.encoded: Dict[str, List[EncodedExample]] = {}
        self.baselines: Dict[str, Dict[str, float]] = {}
        self.vectors = None
        self.fixed_rows_from: Optional[int] = None
        self.model: Optional[nn.Module] = None  # a DocumentReader, or a ReaderEnsemble of task.readers of them
        self.tagger: Optional[str] = self.task_cfg.tagger  # a loaded model keeps its own (inference state)
        self.type_match: bool = bool(self.task_cfg.answer_type_match)  # likewise
        self.synonyms: bool = bool(self.task_cfg.synonyms)  # likewise
        self.readers: int = int(self.task_cfg.readers)  # likewise
        self.eval_seconds = 0.0  # evaluation wall time, subtracted from the training epoch it interrupted
        self._pass: Optional[Dict[str, Any]] = None  # the training pass being timed
        self.last_epoch: Dict[str, float] = {}

    def check_config(self) -> None:
        super().check_config()  # model name, task.* types and ranges
        overlay = {k: v for k, v in (self.task_cfg.encoder or {}).items() if v is not None}  # null: none
        check_encoder_config({**self.cfg["model"], **overlay}, causal=self.causal)
        check_tagger(self.task_cfg.tagger)

    # ---- data ---------------------------------------------------------------------------------
    def setup(self) -> None:
        t0 = time.time()
        t, data = self.task_cfg, self.task_cfg.data
        self.files = split_files(data, self.splits)
        examples = {s: load_squad_file(self.files[s]) for s in self.splits}
        if data.max_train_examples and "train" in examples:  # null: all
            examples["train"] = examples["train"][:data.max_train_examples]
        wordnet = load_wordnet() if self.synonyms else None
        prepared = {s: encode_split(examples[s], t.lowercase, data.max_context_tokens, self.tagger, default_cache(),
                                   self.type_match, wordnet)
                    for s in self.splits}
        if wordnet is not None and t.synonym_questions > 0 and "train" in prepared:  # copies with a synonym
            prepared["train"] += synonym_questions(prepared["train"], wordnet, t.synonym_questions, data.seed,
                                                   t.lowercase)
        if not self.restored:  # a loaded model (evaluate.py) keeps its own vocabulary
            self.vocab = self._build_vocab(prepared)
        for s in self.splits:
            self.encoded[s] = [ex.with_ids(self.vocab) for ex in prepared[s]]
        dropped = 0
        if "train" in self.encoded:  # no token span: DrQA skips
            dropped = sum(1 for ex in self.encoded["train"] if ex.start < 0)
            self.encoded["train"] = [ex for ex in self.encoded["train"] if ex.start >= 0]
        for s in ("valid", "test"):
            if s not in self.splits:
                continue
            self.baselines[s] = baseline_sums([ex.example for ex in self.encoded[s]],
                                              [ex.spans for ex in self.encoded[s]])
        sizes = ", ".join(f"{s} {len(self.encoded[s]):,}" for s in self.splits)
        print(f"[squad] {data.source}: vocab {len(self.vocab):,}; questions {sizes} "
              f"({dropped} train answers without a token span dropped; {time.time() - t0:.1f}s)", flush=True)
        for s in self.baselines:
            b = self.baseline_metrics(s)
            print(f"[squad] {s} baselines: first span of the asked type EM {b['baseline_type_em']:.1f} "
                  f"F1 {b['baseline_type_f1']:.1f}; random span EM {b['baseline_random_em']:.1f} "
                  f"F1 {b['baseline_random_f1']:.1f}  ({self.files[s]})", flush=True)

    def baseline_metrics(self, split: str) -> Dict[str, float]:
        b = self.baselines[split]
        out = reduce_squad({"n": b["n"], "em": b["type_em"], "f1": b["type_f1"]}, "baseline_type_")
        out.update(reduce_squad({"n": b["n"], "em": b["random_em"], "f1": b["random_f1"]}, "baseline_random_"))
        return out

    def _build_vocab(self, prepared) -> Vocabulary:
        t, emb = self.task_cfg, self.task_cfg.embedding
        train = prepared["train"]
        counts = Counter(w for ex in train for w in ex.context_words + ex.question_words)
        vocab = Vocabulary.from_counts(counts, (PAD, UNK), t.min_freq, t.max_vocab)
        if not emb.path:  # null: random vectors, trained
            return vocab
        wanted = {w for s in SPLITS for ex in prepared[s] for w in ex.context_words + ex.question_words}
        self.vectors = load_vectors(emb.path, wanted, emb.format)
        # DrQA: the N most frequent question words come first and are fine-tuned, the rest stay fixed
        tune = emb.tune_partial
        q_counts = Counter(w for ex in train for w in ex.question_words)
        top = [w for w, _ in sorted(q_counts.items(), key=lambda kv: (-kv[1], kv[0]))[:tune]]
        rest = [w for w in vocab.itos[2:] if w not in set(top)]
        extra = sorted(w for w in self.vectors if w in wanted and w not in vocab.stoi)  # a fixed lookup, no training
        self.fixed_rows_from = 2 + len(top) if tune > 0 else None
        return Vocabulary(top + rest + extra, (PAD, UNK))

    def _plan(self, split: str, epoch: int, seed: int) -> List[List[int]]:
        lengths = [len(ex.context_ids) for ex in self.encoded[split]]
        if split == "train":  # length-bucketed global batches of batch_size questions, each split over the ranks
            world = distributed.get_world_size()
            plan = bucket_batches(lengths, max_examples=self.task_cfg.batch_size, shuffle=True,
                                  seed=seed, epoch=epoch)
            return [split_batch(b) for b in plan if len(b) >= world]
        plan = bucket_batches(lengths, max_examples=self.task_cfg.eval_batch_size)
        return shard_batches(plan, train=False)

    def unknown_share(self, split: str) -> Optional[float]:
        return unk_fraction((ids for ex in self.encoded[split] for ids in (ex.context_ids, ex.question_ids)),
                            self.vocab.unk_id)

    def num_batches(self, split: str, epoch: int = 0, seed: int = 0) -> int:
        return len(self._plan(split, epoch, seed))

    def batches(self, split: str, epoch: int = 0, seed: int = 0, start: int = 0) -> Iterator[Dict[str, Any]]:
        data = self.encoded[split]
        t0 = time.perf_counter()
        for index in self._plan(split, epoch, seed)[start:]:
            yield collate([data[i] for i in index], index, self.vocab.pad_id, self.task_cfg.answer_kinds)
        if split != "train":
            self.eval_seconds += time.perf_counter() - t0

    def begin_epoch(self, epoch: int) -> None:
        self._pass = {"epoch": epoch, "t0": time.perf_counter(), "eval0": self.eval_seconds,
                      "n": len(self.encoded["train"]), "enc0": self.model.encoder_seconds if self.model else 0.0}

    def end_epoch(self, epoch: int) -> None:
        """Print and keep the epoch's training wall time minus the evaluations run inside it, and the
        encoders' forward + backward time in it (the model's timer counts training mode only): the paper's
        time per epoch and its RNN share."""
        p, self._pass = self._pass, None
        if p is None or self.model is None:  # a resume started inside the epoch: not a whole epoch
            return
        seconds = time.perf_counter() - p["t0"] - (self.eval_seconds - p["eval0"])
        enc = self.model.encoder_seconds - p["enc0"]
        self.last_epoch = {"epoch_seconds": seconds, "encoder_seconds": enc}
        print(f"[squad] epoch {p['epoch']}: {seconds:.1f} s training ({p['n'] / seconds:.1f} questions/s), "
              f"encoders (forward + backward) {enc:.1f} s = {100 * enc / seconds:.0f}%", flush=True)

    # ---- model --------------------------------------------------------------------------------
    def build_model(self) -> nn.Module:
        emb = self.task_cfg.embedding
        members = []
        for k in range(self.readers):  # each reader its own random embedding (seed + k) and weights
            weight, hits = embedding_matrix(self.vocab.itos, emb.dim, self.vectors, seed=run_seed(self.cfg) + k)
            columns = num_features(self.tagger, self.type_match, self.synonyms)
            members.append(DocumentReader(weight, columns, self.encoder_config(),
                                          emb_dropout=float(self.task_cfg.emb_dropout),
                                          fixed_rows_from=self.fixed_rows_from, padding_idx=self.vocab.pad_id))
        if self.vectors is not None:
            tuned = "all" if self.fixed_rows_from is None else f"the top {self.fixed_rows_from - 2:,} question words"
            print(f"[squad] pretrained vectors for {hits:,}/{len(self.vocab):,} words; fine-tuning {tuned}")
        # one reader keeps the plain DocumentReader (its state-dict keys, and models saved before ensembles)
        self.model = members[0] if len(members) == 1 else ReaderEnsemble(members)
        return self.model

    def encoder_input_size(self) -> int:
        """The paragraph encoder's input: word + aligned question embedding + token features."""
        return 2 * self.task_cfg.embedding.dim + num_features(self.tagger, self.type_match, self.synonyms)

    def encoder_config(self) -> Any:
        """cfg.model with the non-null ``task.encoder`` keys written over it, typed (the model groups are sized
        for the LM; the reader's default is DrQA's width at 2 layers so a CPU epoch takes minutes)."""
        model = check_encoder_config(self.cfg["model"])
        changed = {k: v for k, v in (self.task_cfg.encoder or {}).items()  # task.encoder null: no overlay
                   if v is not None and getattr(model, k, None) != v}
        if changed and not self.restored:  # a training-time notice: a trained model's loader stays quiet
            was = ", ".join(f"model.{k}={getattr(model, k, None)}" for k in changed)
            print(f"[squad] task.encoder sets {', '.join(f'{k}={v}' for k, v in changed.items())} (over {was}); "
                  f"set task.encoder.<key>=null to use the model group's value", flush=True)
        return check_encoder_config({**self.cfg["model"], **changed})  # the overlaid keys checked too

    # ---- loss, decoding, metrics --------------------------------------------------------------
    def _scores(self, model: nn.Module, batch: Mapping[str, Tensor]) -> Tuple[Tensor, Tensor]:
        return model(batch["context"], batch["context_mask_pad"], batch["features"], batch["question"],
                     batch["question_mask_pad"])

    def _loss(self, start: Tensor, end: Tensor, batch: Mapping[str, Tensor]) -> Tuple[Tensor, int]:
        """Summed start + end cross-entropy; an ensemble's (readers, B, Lp) scores: the members' mean loss, each
        member trained on its own prediction."""
        members = start.shape[0] if start.dim() == 3 else 1
        gold_start, gold_end = batch["start"].repeat(members), batch["end"].repeat(members)
        loss = (F.cross_entropy(start.reshape(-1, start.shape[-1]), gold_start, ignore_index=-1, reduction="sum")
                + F.cross_entropy(end.reshape(-1, end.shape[-1]), gold_end, ignore_index=-1, reduction="sum"))
        return loss / members, int((batch["start"] >= 0).sum())

    def compute_loss(self, model: nn.Module, batch: Dict[str, Tensor], split: str) -> Tuple[Tensor, LoggingOutput]:
        if split == "train" and self.task_cfg.word_dropout > 0:
            batch = {**batch, "context": self._unknown_words(batch["context"]),
                     "question": self._unknown_words(batch["question"])}
        start, end = self._scores(model, batch)
        loss, n = self._loss(start, end, batch)
        return loss, {"loss_sum": loss.item(), "nsentences": batch["start"].numel(), "sample_size": n,
                      "ntokens": int((~batch["context_mask_pad"]).sum())}

    def _unknown_words(self, ids: Tensor) -> Tensor:
        """Training only: each word read as <unk> with probability task.word_dropout (padding kept), so that the
        reader learns to answer from the word features and tags where people's text has words it never saw."""
        drop = (torch.rand(ids.shape, device=ids.device) < self.task_cfg.word_dropout) & (ids != self.vocab.pad_id)
        return ids.masked_fill(drop, self.vocab.unk_id)

    def eval_step(self, model: nn.Module, batch: Dict[str, Tensor], split: str) -> Tuple[LoggingOutput, List[Record]]:
        start, end = map(combine_scores, self._scores(model, batch))  # an ensemble answers together
        loss, n = self._loss(start, end, batch)
        best_start, best_end = self._decode(start, end, batch)
        out = {"loss_sum": loss.item(), "sample_size": n, "nsentences": len(batch["index"]), "n": 0.0,
               "em": 0.0, "f1": 0.0}
        records = []
        for k, i in enumerate(batch["index"].tolist()):
            ex = self.encoded[split][i]
            bs, be = self._edges(ex, batch, k, int(best_start[k]), int(best_end[k]))
            s, e = ex.spans[bs][0], ex.spans[be][1]
            answer = ex.example.context[s:e]  # an exact substring of the context
            em, f = score(answer, ex.example.answers)
            out["em"] += em
            out["f1"] += f
            out["n"] += 1
            records.append({"id": ex.example.qid, "answer": answer})
        return out, records

    def _decode(self, start: Tensor, end: Tensor, batch: Mapping[str, Tensor]) -> Tuple[Tensor, Tensor]:
        """Best spans: the answer-type prior, a "where" / "when" question's own with task.answer_kinds."""
        t = self.task_cfg
        prior = torch.where(batch["place_or_time"].to(start.device), t.where_when_prior, t.answer_type_prior)
        return decode_spans(start, end, batch["context_mask_pad"].t(), t.max_answer_len, batch["sentence_end"],
                            batch["type_match"], prior)

    def _edges(self, ex: EncodedExample, batch: Mapping[str, Tensor], k: int, start: int, end: int) -> Tuple[int, int]:
        """The decoded span with ``task.span_edges``: widened to the names it cuts, without the asked noun, a measure's
        relation head or a clause run on past the noun phrase (span_edges.py)."""
        if not self.task_cfg.span_edges:
            return start, end
        start, end = entity_edges(ex.tags, start, end, batch["sentence_end"][k].tolist(), self.task_cfg.max_answer_len)
        start, end = without_asked_noun(ex.question_words, ex.context_words, start, end)
        start, end = without_relation_head(ex.question_words, ex.context_words, start, end)
        return without_run_on(ex.context_words, ex.tags, start, end)

    def reduce_metrics(self, summed: LoggingOutput) -> Dict[str, float]:
        metrics = {"loss": summed.get("loss_sum", 0.0) / max(summed.get("sample_size", 0.0), 1.0)}
        if "n" in summed:
            metrics.update(reduce_squad(summed))
        return metrics

    def end_eval(self, split: str, records: List[Record], metrics: Dict[str, float],
                 run_dir: Optional[Path]) -> Dict[str, float]:
        extra: Dict[str, float] = {}
        if split in self.baselines:
            extra.update(self.baseline_metrics(split))
        if self.last_epoch and split == "valid":
            extra.update(self.last_epoch)
        if split == "test" and self.task_cfg.human_check and self.model is not None:
            extra.update(self.score_human_check(run_dir))
        if run_dir is not None:
            path = Path(run_dir) / f"predictions_{split}.json"
            predictions = {r["id"]: r["answer"] for r in records}
            path.write_text(json.dumps(predictions, ensure_ascii=False, indent=0), encoding="utf-8")
            print(f"[squad] {split}: EM {metrics.get('em', float('nan')):.2f} F1 {metrics.get('f1', float('nan')):.2f} "
                  f"on {len(predictions):,} questions (baselines: type EM {extra.get('baseline_type_em', 0):.1f}, "
                  f"random EM {extra.get('baseline_random_em', 0):.1f}); predictions {path} ; data {self.files[split]}",
                  flush=True)
        return extra

    def score_human_check(self, run_dir: Optional[Path]) -> Dict[str, float]:
        """EM / F1 of the current model on the hand-written check set (``task.human_check``), as predict.py
        answers it; its predictions go to ``predictions_human.json``."""
        path = human_check_path(self.task_cfg.human_check)
        examples = load_squad_file(path)
        was_training = self.model.training
        self.model.eval()
        with torch.no_grad():
            results = self.predict(self.model, examples, SquadPredictOptions(), lambda n: None)
        self.model.train(was_training)
        em = f1 = 0.0
        for ex, r in zip(examples, results):
            e, f = score(r["answer"], ex.answers)
            em, f1 = em + e, f1 + f
        out = reduce_squad({"n": float(len(examples)), "em": em, "f1": f1}, "human_")
        if run_dir is not None:
            (Path(run_dir) / "predictions_human.json").write_text(
                json.dumps({r["id"]: r["answer"] for r in results}, ensure_ascii=False, indent=0), encoding="utf-8")
        print(f"[squad] human check set: EM {out['human_em']:.2f} F1 {out['human_f1']:.2f} on {len(examples)} "
              f"hand-written questions ({path})", flush=True)
        return out

    def state_dict(self) -> Dict[str, Any]:
        return self.inference_state() if self.vocab is not None else {"vocab": {}}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if self.vocab is not None:
            self.vocab.check_same(state.get("vocab", {}))

    # ---- predict.py: questions about paragraphs in, answers out -------------------------------
    def inference_state(self) -> Dict[str, Any]:
        return {"vocab": self.vocab.state_dict(), "fixed_rows_from": self.fixed_rows_from, "tagger": self.tagger,
                "answer_type_column": self.type_match, "ensemble_size": self.readers,
                "synonym_column": self.synonyms}

    def restore_inference_state(self, state: Mapping[str, Any]) -> None:
        self.vocab, self.fixed_rows_from = Vocabulary.from_state_dict(state["vocab"]), state["fixed_rows_from"]
        self.tagger = state.get("tagger")  # models saved before the tagger features have none
        self.type_match = bool(state.get("answer_type_column"))  # nor the answer-type column before it existed
        self.readers = int(state.get("ensemble_size") or 1)  # and one reader before ensembles
        self.synonyms = bool(state.get("synonym_column"))  # nor the synonym column

    def parse_input(self, line: str) -> SquadExample:
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"not a JSON line ({err.msg}); expected {{\"id\", \"context\", \"question\"}}") from None
        missing = [k for k in ("context", "question") if not isinstance(row, dict) or not isinstance(row.get(k), str)]
        if missing:
            raise ValueError(f"no {missing[0]!r} string; a line is {{\"id\": ..., \"context\": ..., \"question\": ...}}")
        empty = [k for k in ("context", "question") if not row[k].strip()]
        if empty:
            raise ValueError(f"empty {empty[0]!r}: there is nothing to answer from; give both as text")
        if row.get("id") in (None, "") or isinstance(row.get("id"), (dict, list, bool)):
            raise ValueError("no 'id': each question needs one (a string or a number), so its answer can be "
                             "matched to it")
        return SquadExample(str(row["id"]), "", row["context"], row["question"], [""], [0])

    def read_document(self, text: str) -> Optional[List[SquadExample]]:
        """A SQuAD v1.1 JSON file (not JSON lines): all its questions, answered as the evaluation does."""
        try:
            obj = json.loads(text)
        except json.JSONDecodeError:
            return None
        return parse_squad(obj, "input", need_answers=False) if isinstance(obj, dict) and "data" in obj else None

    def format_output(self, lines: List[str], results: List[Any], document: Optional[List[Any]] = None) -> str:
        """A SQuAD v1.1 file in: the official ``{id: answer}`` JSON out; JSON lines in: one answer per line."""
        if document is None:
            return super().format_output(lines, results, document)
        return json.dumps({r["id"]: r["answer"] for r in results}, ensure_ascii=False, indent=0) + "\n"

    predict_schema = SquadPredictOptions

    def predict(self, model: nn.Module, inputs: List[SquadExample], options: SquadPredictOptions,
                progress) -> List[Any]:
        """Each question's answer (an exact substring of its context), with its character span and score."""
        t = self.task_cfg
        wordnet = load_wordnet() if self.synonyms else None
        encoded = [ex.with_ids(self.vocab) for ex in encode_split(inputs, t.lowercase, t.data.max_context_tokens,
                                                                  self.tagger, None, self.type_match, wordnet)]
        plan = bucket_batches([len(ex.context_ids) for ex in encoded],  # predict.py's batch_size, else the eval one
                              max_examples=options.batch_size or t.eval_batch_size)
        device = next(model.parameters()).device
        results: List[Any] = [None] * len(inputs)
        for index in plan:
            batch = self.move_to_device(collate([encoded[i] for i in index], index, self.vocab.pad_id,
                                                 t.answer_kinds), device)
            start, end = map(combine_scores, self._scores(model, batch))
            mask = batch["context_mask_pad"].t()
            best_start, best_end = self._decode(start, end, batch)
            s_lp = start.float().masked_fill(mask, -1e30).log_softmax(-1)
            e_lp = end.float().masked_fill(mask, -1e30).log_softmax(-1)
            for k, i in enumerate(index):
                ex = encoded[i]
                bs, be = self._edges(ex, batch, k, int(best_start[k]), int(best_end[k]))
                a, b = ex.spans[bs][0], ex.spans[be][1]
                results[i] = {"id": ex.example.qid, "answer": ex.example.context[a:b], "start": a, "end": b,
                              "score": round(float((s_lp[k, bs] + e_lp[k, be]).exp()), 6)}
            progress(len(index))
        return results
