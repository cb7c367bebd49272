"""Machine translation task: label-smoothed token-level loss, beam search, sacreBLEU / chrF.

Batches (time-major, from ``tasks.common.batching``): ``src`` (S, B) = subwords + ``</s>``; ``prev`` (T, B) =
``<s>`` + target subwords (teacher forcing input); ``target`` (T, B) = target subwords + ``</s>``; the
pad masks of both; ``ids`` = example indices, so records map back to references.

Loss: label-smoothed cross entropy SUMMED over real target tokens with ``sample_size`` = target tokens,
so the trainer's update is the per-token mean over the global batch whatever the micro-batching / DDP.
Evaluation decodes every batch (greedy or beam, ``task.decoding``) and returns the BLEU/chrF
sufficient statistics as logging outputs: summed over batches and ranks they give the exact corpus
scores. ``end_eval`` writes ``hyp_<split>.txt`` / ``ref_<split>.txt`` (detokenised, in corpus order),
``sacrebleu_<split>.json`` (scores + signatures) and ``spm.model`` into the run directory. Data with
several sources (``task.data.source=real``) also gets BLEU/chrF per source from per-source summed
statistics; the test evaluation prints ``task.show_samples`` random sentences.
"""
from __future__ import annotations

import json
import math
import random
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

import torch
from torch import Tensor, nn

from tasks.common.batching import PlanCache, bucket_batches, pad_collate, shard_batches
from tasks.engine.run import distributed
from tasks.engine.base import BadInput, LoggingOutput, Record, Task, unk_fraction
from tasks.engine.errors import ConfigError
from tasks.translation.data import load_pairs, load_scored_files
from tasks.translation.metrics import (bleu_from_statistics, chrf_from_statistics, domain_metrics, signatures,
                                       statistics_by_domain, translation_statistics)
from tasks.translation.model import Seq2SeqTransformer, check_model_config
from tasks.translation.numbers import PLACEHOLDERS, Number, mask_source, mask_target, restore
from tasks.translation.schema import TranslationConfig, TranslationPredictOptions
from tasks.translation.search import beam_search, greedy_search
from tasks.translation.subwords import Subwords, train_subwords


def print_domain_scores(split: str, metrics: Mapping[str, float], examples: List[Dict[str, Any]]) -> None:
    """One line per source: BLEU / chrF from the same summed statistics as the overall score."""
    counts: Dict[str, int] = {}
    for e in examples:
        if e.get("domain"):
            counts[e["domain"]] = counts.get(e["domain"], 0) + 1
    for domain in sorted(counts):
        if f"bleu_{domain}" in metrics:
            print(f"[translation] {split} {domain}: BLEU {metrics[f'bleu_{domain}']:.2f} chrF "
                  f"{metrics[f'chrf_{domain}']:.2f} on {counts[domain]} sentences", flush=True)


def print_samples(records: List[Record], examples: List[Dict[str, Any]], n: int, seed: int = 0) -> None:
    """``n`` test sentences drawn at random (fixed seed: the same ones every run): source, reference, output."""
    if n <= 0 or not records:
        return
    chosen = sorted(random.Random(seed).sample(range(len(records)), min(n, len(records))))
    print(f"[translation] {len(chosen)} random test sentences (source / reference / hypothesis):", flush=True)
    for k in chosen:
        r = records[k]
        e = examples[r["id"]] if r["id"] < len(examples) else {}
        tag = f" [{e['domain']}]" if e.get("domain") else ""
        print(f"  SRC{tag}: {e.get('source', '')}\n  REF: {r['ref']}\n  HYP: {r['hyp']}", flush=True)


class TranslationTask(Task):
    name = "translation"
    scored_file = ("files", "task.data.files.{split}")  # evaluate.py file=<path>
    monitor = "bleu"
    monitor_mode = "max"
    throughput_key = "ntokens"   # target tokens
    causal = False               # the encoder sees the whole source; the decoder is causal by construction
    models = ("transformer", "transformer_sru")
    schema = TranslationConfig

    def __init__(self, cfg: Mapping[str, Any]):
        super().__init__(cfg)
        # the model section: typed by check_config (Seq2SeqTransformer types a composed one itself)
        self.model_cfg = cfg["model"] if "model" in cfg else None
        self.src, self.tgt = self.task_cfg.src_lang, self.task_cfg.tgt_lang
        self.subwords: Optional[Subwords] = None
        self.examples: Dict[str, List[Dict[str, Any]]] = {}
        self._plans = PlanCache(self._make_plan)
        self.domains: Dict[str, List[str]] = {}

    # ---- configuration ------------------------------------------------------------------------
    def check_config(self) -> None:
        """Task keys and the model=transformer / transformer_sru keys (not shared encoders, so the
        default encoder check does not apply)."""
        super().check_config()  # model name, task.* types and ranges
        t = self.task_cfg
        if self.src == self.tgt:
            raise ConfigError(f"task.src_lang and task.tgt_lang must differ, received {self.src!r} for both")
        model = self.model_cfg = check_model_config(self.model_cfg)
        if t.max_subwords + 2 > model.max_positions:
            raise ValueError(f"task.max_subwords={t.max_subwords} needs model.max_positions >= "
                             f"{t.max_subwords + 2}, received {model.max_positions}")

    # ---- data ---------------------------------------------------------------------------------
    def setup(self) -> None:
        t0 = time.time()
        t = self.task_cfg
        data = t.data
        scored = load_scored_files(data, (self.src, self.tgt), self.splits) if self.restored else None
        pairs = scored if scored is not None else load_pairs(data, (self.src, self.tgt))
        if self.subwords is None:
            mask = bool(t.number_placeholders)
            masked_train = [self._masked_pair(p, mask) for p in pairs["train"]]
            sentences = [text for texts in masked_train for text in texts[:2]]
            self.subwords = train_subwords(sentences, t.subwords, Path(str(data.cache_dir)).expanduser(),
                                           symbols=PLACEHOLDERS if mask else ())
        mask = self.subwords.has_placeholders  # a checkpoint's subwords from before the placeholders: text as is
        limit, eos = t.max_subwords, self.subwords.vocabulary.eos_id
        for split in pairs:
            examples = []
            for p in pairs[split]:
                src_text, tgt_text, numbers = self._masked_pair(p, mask)
                src, tgt = self.subwords.encode(src_text), self.subwords.encode(tgt_text)
                if split == "train" and (len(src) > limit or len(tgt) > limit or not src or not tgt):
                    continue  # overlong training pairs cost memory and teach little; evaluation keeps all
                examples.append({"src": src[:limit] + [eos], "tgt": tgt[:limit], "ref": p[self.tgt],
                                 "source": p[self.src], "domain": p.get("domain"), "numbers": numbers})
            self.examples[split] = examples
            # the sources (packages) of a split, for per-source scores; none for single-source data
            self.domains[split] = sorted({e["domain"] for e in examples if e["domain"]})
        sizes = ", ".join(f"{s} {len(self.examples[s]):,}" for s in pairs)
        ntok = sum(len(e["tgt"]) + 1 for e in self.examples["train"]) if "train" in pairs else 0
        print(f"[translation] {data.source} {self.src}->{self.tgt}: pairs {sizes}; joint {t.subwords.model_type} "
              f"vocabulary {len(self.subwords):,}; {ntok:,} training target tokens ({time.time() - t0:.1f}s)", flush=True)

    def _masked_pair(self, pair: Mapping[str, str], mask: bool) -> Tuple[str, str, List[Number]]:
        """Source and target text with their numbers as placeholders (``numbers.py``), and the source's numbers."""
        if not mask:
            return pair[self.src], pair[self.tgt], []
        source, numbers = mask_source(pair[self.src], self.src)
        return source, mask_target(pair[self.tgt], self.tgt, numbers), numbers

    def _make_plan(self, split: str, epoch: int, seed: int) -> List[List[int]]:
        train = split == "train"
        if not train:  # by source length alone: predict.py, given the same sources, cuts the same batches
            return shard_batches(self.decode_plan([e["src"] for e in self.examples[split]]), train=False)
        lengths = [max(len(e["src"]), len(e["tgt"]) + 1) for e in self.examples[split]]
        t = self.task_cfg
        plan = bucket_batches(lengths, max_tokens=t.max_tokens, max_examples=t.max_sentences,
                              shuffle=True, seed=seed, epoch=epoch)
        return shard_batches(plan, train=True)

    def decode_plan(self, sources: List[List[int]], max_sentences: Optional[int] = None) -> List[List[int]]:
        """Evaluation and predict.py batches: bucketed by source length within the eval token budget."""
        t = self.task_cfg
        return bucket_batches([len(s) for s in sources], max_tokens=t.eval_max_tokens,
                              max_examples=max_sentences or t.eval_max_sentences)  # predict.py's batch_size, else ours

    def unknown_share(self, split: str) -> Optional[float]:
        unk = self.subwords.vocabulary.unk_id  # byte fallback keeps it near 0; counted all the same
        return unk_fraction((e[side] for e in self.examples[split] for side in ("src", "tgt")), unk)

    def num_batches(self, split: str, epoch: int = 0, seed: int = 0) -> int:
        return len(self._plans.get(split, epoch, seed))

    def batches(self, split: str, epoch: int = 0, seed: int = 0, start: int = 0) -> Iterator[Dict[str, Any]]:
        plan = self._plans.get(split, epoch, seed)
        for index in plan[start:]:
            yield self.collate(split, index)

    def collate(self, split: str, index: List[int]) -> Dict[str, Any]:
        v = self.subwords.vocabulary
        ex = [self.examples[split][i] for i in index]
        src, src_pad, _ = pad_collate([e["src"] for e in ex], v.pad_id)
        prev, _, _ = pad_collate([[v.bos_id] + e["tgt"] for e in ex], v.pad_id)
        target, target_pad, _ = pad_collate([e["tgt"] + [v.eos_id] for e in ex], v.pad_id)
        return {"src": src, "src_pad": src_pad, "prev": prev, "target": target, "target_pad": target_pad,
                "ids": torch.tensor(index, dtype=torch.long)}

    # ---- model --------------------------------------------------------------------------------
    def build_model(self) -> nn.Module:
        return Seq2SeqTransformer(len(self.subwords), self.subwords.vocabulary.pad_id, self.model_cfg)

    # ---- loss, decoding, metrics --------------------------------------------------------------
    def compute_loss(self, model: nn.Module, batch: Dict[str, Any], split: str) -> Tuple[Tensor, LoggingOutput]:
        logits = model(batch["src"], batch["src_pad"], batch["prev"])
        lprobs = torch.log_softmax(logits.float(), dim=-1)
        real = ~batch["target_pad"]
        nll = -lprobs.gather(-1, batch["target"].unsqueeze(-1)).squeeze(-1)[real].sum()
        eps = float(self.task_cfg.label_smoothing)
        # label smoothing (Szegedy et al.): (1 - eps) * NLL + eps * mean over the vocabulary of -log p
        smooth = -lprobs[real].mean(-1).sum()
        loss = (1.0 - eps) * nll + eps * smooth
        ntokens = int(real.sum())
        return loss, {"loss_sum": float(loss.detach()), "nll_sum": float(nll.detach()), "ntokens": ntokens,
                      "nsentences": int(batch["src"].size(1)), "sample_size": ntokens}

    def translate(self, model: nn.Module, src: Tensor, src_pad: Tensor, beam_size: int,
                  nbest: Optional[int] = None, length_penalty: Optional[float] = None,
                  numbers: Optional[List[List[Number]]] = None) -> List[Any]:
        """Detokenised translations of a batch; with ``nbest``, each sentence's list of (score, text).
        ``length_penalty``: predict.py's choice; None: task.decoding.length_penalty. ``numbers``: each
        source's numbers, put back in place of the placeholders (None: none were masked)."""
        v, dec = self.subwords.vocabulary, self.task_cfg.decoding
        if length_penalty is None:
            length_penalty = dec.length_penalty
        common = dict(bos=v.bos_id, eos=v.eos_id, pad=v.pad_id, max_len_a=float(dec.max_len_a),
                      max_len_b=int(dec.max_len_b))
        model = distributed.unwrap_model(model)
        if beam_size == 1 and nbest is None:
            ids = greedy_search(model, src, src_pad, **common)
        else:
            found = beam_search(model, src, src_pad, beam_size=beam_size,
                                length_penalty=float(length_penalty), nbest=nbest, **common)
            if nbest is not None:
                return [[(score, self._text(seq, numbers, i)) for score, seq in f] for i, f in enumerate(found)]
            ids = found
        return [self._text(seq, numbers, i) for i, seq in enumerate(ids)]

    def _text(self, ids: List[int], numbers: Optional[List[List[Number]]], i: int) -> str:
        text = self.subwords.decode(ids)
        return text if numbers is None else restore(text, numbers[i], self.tgt)

    def eval_step(self, model: nn.Module, batch: Dict[str, Any], split: str) -> Tuple[LoggingOutput, List[Record]]:
        _, logging_output = self.compute_loss(model, batch, split)
        dec = self.task_cfg.decoding
        beam = dec.valid_beam_size if split == "valid" else dec.beam_size
        ids = batch["ids"].tolist()
        numbers = [self.examples[split][i]["numbers"] for i in ids]
        hyps = self.translate(model, batch["src"], batch["src_pad"], int(beam), numbers=numbers)
        refs = [self.examples[split][i]["ref"] for i in ids]
        logging_output.update(translation_statistics(hyps, refs))
        if self.domains.get(split):
            logging_output.update(statistics_by_domain(hyps, refs, [self.examples[split][i]["domain"] for i in ids],
                                                       self.domains[split]))
        return logging_output, [{"id": i, "hyp": h, "ref": r} for i, h, r in zip(ids, hyps, refs)]

    def reduce_metrics(self, summed: LoggingOutput) -> Dict[str, float]:
        n = max(summed.get("ntokens", 0), 1)
        loss, nll = summed.get("loss_sum", 0.0) / n, summed.get("nll_sum", 0.0) / n
        metrics = {"loss": loss, "nll_loss": nll, "ppl": math.exp(min(nll, 50.0))}
        if "bleu_sys_len" in summed:
            bleu = bleu_from_statistics(summed)
            metrics.update(bleu=float(bleu.score), bleu_bp=float(bleu.bp), chrf=chrf_from_statistics(summed),
                           hyp_ref_ratio=float(summed["bleu_sys_len"]) / max(summed["bleu_ref_len"], 1))
            metrics.update(domain_metrics(summed))   # bleu_<source> / chrf_<source>, same summed statistics
        return metrics

    def end_eval(self, split: str, records: List[Record], metrics: Dict[str, float],
                 run_dir: Optional[Path]) -> Dict[str, float]:
        records = sorted(records, key=lambda r: r["id"])  # corpus order, whatever the batching / ranks
        sig = signatures()
        print(f"[translation] {split}: BLEU {metrics.get('bleu', float('nan')):.2f} chrF "
              f"{metrics.get('chrf', float('nan')):.2f} on {len(records)} sentences ({sig['bleu']})", flush=True)
        print_domain_scores(split, metrics, self.examples.get(split, []))
        if split == "test":
            print_samples(records, self.examples.get(split, []), self.task_cfg.show_samples)
        if run_dir is None:
            return {}
        run_dir = Path(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        clean = lambda s: " ".join(s.split())  # one sentence a line, whatever the data held
        (run_dir / f"hyp_{split}.txt").write_text("".join(clean(r["hyp"]) + "\n" for r in records), encoding="utf-8")
        (run_dir / f"ref_{split}.txt").write_text("".join(clean(r["ref"]) + "\n" for r in records), encoding="utf-8")
        sources = self.examples.get(split, [])
        if sources:  # predict.py given src_<split>.txt writes hyp_<split>.txt again, byte for byte
            (run_dir / f"src_{split}.txt").write_text("".join(clean(sources[r["id"]]["source"]) + "\n" for r in records),
                                                      encoding="utf-8")
        (run_dir / f"sacrebleu_{split}.json").write_text(json.dumps(
            {"bleu": metrics.get("bleu"), "chrf": metrics.get("chrf"), "signature": sig,
             "sentences": len(records), "hyp": f"hyp_{split}.txt", "ref": f"ref_{split}.txt"}, indent=2))
        if not (run_dir / "spm.model").exists():
            self.subwords.save(run_dir / "spm.model")
        print(f"[translation] wrote {run_dir / f'hyp_{split}.txt'} and {run_dir / f'ref_{split}.txt'} "
              f"(check: sacrebleu {run_dir / f'ref_{split}.txt'} -i {run_dir / f'hyp_{split}.txt'} -m bleu chrf)",
              flush=True)
        return {}

    # ---- predict.py: one detokenised translation per source line -------------------------------
    predict_schema = TranslationPredictOptions
    # every layer int8 under precision=int8 (the output layer too, since activations are quantised per token:
    # test BLEU -0.01 against fp32; with one scale per call it had cost -0.11 to -0.32; docs/inference.md)

    def predict(self, model: nn.Module, inputs: List[str], options: TranslationPredictOptions, progress) -> List[Any]:
        """Sources encoded as in evaluation (``max_subwords`` + ``</s>``; longer ones are cut, said on stderr),
        batched as evaluation batches them, decoded with the test settings unless ``beam`` /
        ``length_penalty`` say otherwise."""
        dec = self.task_cfg.decoding
        penalty = options.length_penalty  # None: the test's task.decoding.length_penalty
        beam, nbest = options.beam or dec.beam_size, options.nbest  # nbest <= beam: checked with the options
        limit, v = self.task_cfg.max_subwords, self.subwords.vocabulary
        sources, numbers = [], []
        for n, text in enumerate(inputs, 1):
            if self.subwords.has_placeholders:
                text, found = mask_source(text, self.src)
                numbers.append(found)
            ids = self.subwords.encode(text)
            if len(ids) > limit:
                print(f"[predict] input {n}: {len(ids)} subwords, cut to task.max_subwords={limit}", file=sys.stderr)
            sources.append(ids[:limit] + [v.eos_id])
        device = next(model.parameters()).device
        results: List[Any] = [None] * len(inputs)
        for index in self.decode_plan(sources, options.batch_size):
            src, src_pad, _ = pad_collate([sources[i] for i in index], v.pad_id)
            out = self.translate(model, src.to(device), src_pad.to(device), beam, nbest if nbest > 1 else None,
                                 None if penalty is None else float(penalty),
                                 [numbers[i] for i in index] if numbers else None)
            for i, result in zip(index, out):
                results[i] = (" ".join(result.split()) if isinstance(result, str) else
                              {"translations": [" ".join(t.split()) for _, t in result],
                               "scores": [round(s, 4) for s, _ in result]})
            progress(len(index))
        return results

    def format_prediction(self, result: Any) -> str:
        """A translation per line (an n-best list as one JSON object); a line that could not be read: empty."""
        return "" if isinstance(result, BadInput) else super().format_prediction(result)

    # ---- saved with the run -------------------------------------------------------------------
    def state_dict(self) -> Dict[str, Any]:
        return {"subwords": self.subwords.model_proto if self.subwords else None,
                "vocab": self.subwords.vocabulary.state_dict() if self.subwords else {}}

    def inference_state(self) -> Dict[str, Any]:
        return {"subwords": self.subwords.model_proto}

    def restore_inference_state(self, state: Mapping[str, Any]) -> None:
        if state.get("subwords") is None:
            raise KeyError("subwords")
        self.subwords = Subwords(bytes(state["subwords"]))

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        proto = state.get("subwords")
        if proto is not None and self.subwords is not None and bytes(proto) != self.subwords.model_proto:
            raise ValueError("the subword model rebuilt from the data differs from the one in the checkpoint: "
                             "the training data or task.subwords changed since the run started; resume with the "
                             "original settings or start a new run")
