"""Speech recognition task: CTC over characters, WER/CER from summed edit counts, transcripts per eval.

Pipeline: manifest -> soundfile -> log-mel (torch.stft, 80 mels) -> CMVN -> stack/skip frames -> padded
batches bucketed by frames (mask_pad marks padding) -> encoder -> CTC. The training loss is the SUM of
per-utterance CTC losses with ``sample_size`` = utterances, so the trainer's update is the mean over all
utterances of the step, however they were cut into micro-batches or ranks.
"""
from __future__ import annotations

import dataclasses
import json
import time
from collections import Counter
from pathlib import Path
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from tasks.common.batching import PlanCache, bucket_batches, pad_collate, shard_batches
from tasks.common.encoders import check_encoder_config
from tasks.engine.base import LoggingOutput, Record, Task, run_seed
from tasks.engine.errors import ConfigError
from tasks.speech.data import Utterance, load_split_utterances, split_log_mels
from tasks.speech.char_lm import CharNgramLM
from tasks.speech.inference import char_lm_from_state, char_lm_state, read_input, transcribe
from tasks.common.text import Vocabulary
from tasks.speech.decoding import gated_bonus, greedy_decode, prefix_beam_search
from tasks.speech.languages import AUTO, DecodeSettings, LanguageDecoders
from tasks.speech.features import LogMel, cmvn, spec_augment, stack_frames
from tasks.speech.model import CTCModel
from tasks.speech.report import error_counts, group_rates, rates, test_report
from tasks.speech.schema import SpeechConfig, SpeechPredictOptions
from tasks.corpora.transcripts import normalize_transcript
from tasks.speech.text import ALPHABETS, char_vocabulary

COUNT_KEYS = ("word_errors", "words", "char_errors", "chars")


class SpeechRecognitionTask(Task):
    name = "speech"
    scored_file = ("manifest", "task.data.manifests.{split}")  # evaluate.py file=<path>
    monitor = "wer"
    monitor_mode = "min"
    throughput_key = "nframes"  # 10 ms feature frames per second
    models = ("sru", "lstm")
    schema = SpeechConfig

    def __init__(self, cfg: Mapping[str, Any]):
        super().__init__(cfg)
        # which validation rate picks the best checkpoint: CER moves while WER still sits near 100%
        self.monitor = self.task_cfg.monitor
        # null: the voice packs' Czech and Dutch letters (one shared set) for fillets, else English a-z
        # (the rule beside task.data.alphabet in conf/task/speech.yaml)
        data = self.task_cfg.data
        self.alphabet = data.alphabet if data.alphabet is not None else ("cs+nl" if data.source == "fillets" else "en")
        self.vocab = char_vocabulary(self.alphabet)
        self.data: Dict[str, Dict[str, list]] = {}
        self.global_stats: Optional[Tuple[Tensor, Tensor]] = None
        self.char_lm: Optional[CharNgramLM] = None  # fitted in setup() when task.decoder=beam and task.lm_order > 0
        # per-language alphabets and LMs (tasks/speech/languages.py), for a corpus whose utterances name their
        # language; the test split and predict.py decode in ``language`` (auto: identified per utterance)
        self.languages: Optional[LanguageDecoders] = None
        self.language = AUTO
        self.frequent_word = ""  # the most frequent training word (a trivial baseline)
        self.train_chars_per_step: Optional[float] = None
        self._plans = PlanCache(self._make_plan)

    # ---- configuration ------------------------------------------------------------------------
    def check_config(self) -> None:
        super().check_config()  # model name, task.* types and ranges
        check_encoder_config(self.cfg["model"], causal=self.causal)
        bad = [s for s in self.task_cfg.speed_perturb if not 0.5 <= float(s) <= 2.0]
        if bad:
            raise ConfigError(f"task.speed_perturb: factors must lie in [0.5, 2] (how many times as fast the audio "
                             f"plays), received {bad}; e.g. task.speed_perturb=[0.9,1.0,1.1], or [] for none")

    # ---- data ---------------------------------------------------------------------------------
    def setup(self) -> None:
        t0 = time.time()
        t, f = self.task_cfg, self.task_cfg.features
        # speed perturbation: every training utterance at each speed; an epoch draws one version of each
        # (1.0 first: the unperturbed version is the one counted in the split's minutes of audio)
        self.speeds = sorted({float(s) for s in t.speed_perturb} | {1.0}, key=lambda s: (s != 1.0, s))
        mels = {}
        for split in self.splits:
            utts = load_split_utterances(t.data, split)
            speeds = self.speeds if split == "train" else [1.0]
            mels[split] = (utts, [split_log_mels(split, utts, t.data, f, speed) for speed in speeds])
        if f.cmvn == "global" and not self.restored:
            allframes = torch.cat([m for version in mels["train"][1] for m in version])
            self.global_stats = (allframes.mean(0), allframes.std(0, unbiased=False))
        for split in self.splits:
            self.data[split] = self._build_split(split, *mels[split])
        recorded = self.recorded_training()
        if "train" in self.data:  # the trivial baseline's word: kept in model.pt for evaluations without train
            self.frequent_word = Counter(w for ref in recorded["ref"] for w in ref.split()).most_common(1)[0][0]
        if t.lm_order and t.decoder == "beam" and not self.restored:  # fitted in seconds from the training transcripts
            self.char_lm = CharNgramLM.fit(recorded["target"], t.lm_order, len(self.vocab))
            print(f"[speech] character {t.lm_order}-gram LM of the training transcripts: validation "
                  f"perplexity {self.char_lm.perplexity(self.data['valid']['target']):.2f} per character "
                  f"(weight {t.lm_weight:g}, bonus {t.lm_bonus:g})", flush=True)
        if "train" in self.data and not self.restored:
            self.languages = LanguageDecoders.fit(recorded["target"], recorded["language"], t.lm_order, len(self.vocab))
        print(f"[speech] features ready in {time.time() - t0:.1f}s (input {self.encoder_input_size()} = "
              f"{f.stack} x {f.n_mels} mels, 1 step per {f.skip * f.hop_ms} ms)", flush=True)

    def recorded_training(self) -> Dict[str, list]:
        """The training split without its synthetic copies (task.data.fillets.synthetic_share): the LMs and the
        baseline count each transcript once, as the corpus has it."""
        train = self.data.get("train")
        if train is None:
            return {}
        keep = [i for i, kind in enumerate(train["kind"]) if kind != "synthetic"]
        return {key: [train[key][i] for i in keep] for key in ("ref", "target", "language")}

    def _build_split(self, split: str, utts: List[Utterance], versions: List[List[Tensor]]) -> Dict[str, list]:
        """Normalised, stacked inputs and character targets of one split (``versions``: its log-mels at
        each speed, the recorded one first); training drops what CTC cannot learn from."""
        t, f = self.task_cfg, self.task_cfg.features
        hop_s = f.hop_ms / 1000.0
        d: Dict[str, list] = {k: [] for k in ("id", "ref", "x", "target", "frames", "voice", "kind", "language",
                                              "versions", "audio")}
        skipped = 0
        for i, utt in enumerate(utts):
            ref = normalize_transcript(utt.text, self.alphabet)
            target = self.vocab.encode(list(ref))
            xs, frames = [], []
            for version in versions:
                m = version[i]
                if f.cmvn == "utterance":
                    m = cmvn(m)
                elif f.cmvn == "global":
                    m = cmvn(m, *self.global_stats)
                xs.append(stack_frames(m, f.stack, f.skip))
                frames.append(m.size(0))
            # CTC needs at least one frame per label (plus one between repeats); training skips the rest
            # (the recorded length decides "too long": speed perturbation keeps the same utterances)
            limit = t.data.max_train_seconds  # null: no limit
            too_long = split == "train" and limit is not None and frames[0] * hop_s > limit
            too_short = min(x.size(0) for x in xs) < len(target) + 1
            if split == "train" and (too_long or too_short or not target):
                skipped += 1
                continue
            for key, value in (("id", utt.id), ("ref", ref), ("x", xs[0]), ("target", target),
                               ("frames", frames[0]), ("voice", utt.voice or utt.speaker), ("kind", utt.kind),
                               ("language", utt.language), ("versions", list(zip(xs, frames))),
                               ("audio", str(utt.audio) if isinstance(utt.audio, Path) else None)):
                d[key].append(value)
        if not d["id"]:
            raise ValueError(f"task.data ({t.data.source}): the {split} split has no usable utterances")
        hours = sum(d["frames"]) * hop_s / 3600
        note = f", {skipped} skipped (too long, or fewer frames than characters)" if skipped else ""
        if len(versions) > 1:
            note += f"; each also at speeds {', '.join(f'{s:g}' for s in self.speeds[1:])} (one drawn per epoch)"
        print(f"[speech] {split}: {len(d['id'])} utterances, {hours * 60:.1f} min of audio, "
              f"{len({v for v in d['voice'] if v})} voices/speakers{note}", flush=True)
        return d

    def encoder_input_size(self) -> int:
        """Stacked log-mel frames: ``stack`` frames of ``n_mels`` each."""
        return self.task_cfg.features.stack * self.task_cfg.features.n_mels

    def _epoch_inputs(self, split: str, epoch: int, seed: int) -> Tuple[List[Tensor], List[int]]:
        """Each utterance's input and frame count this epoch: one speed version per training utterance,
        drawn from (seed, epoch) so that the batch plan and a resumed run see the same ones."""
        d = self.data[split]
        if split != "train" or len(self.speeds) == 1:
            return d["x"], d["frames"]
        g = torch.Generator().manual_seed((int(seed) * 1_000_003 + epoch) * 100_003 + 7)
        picks = torch.randint(0, len(self.speeds), (len(d["versions"]),), generator=g).tolist()
        chosen = [versions[k] for versions, k in zip(d["versions"], picks)]
        return [x for x, _ in chosen], [frames for _, frames in chosen]

    def _make_plan(self, split: str, epoch: int, seed: int) -> List[List[int]]:
        train = split == "train"
        lengths = [x.size(0) for x in self._epoch_inputs(split, epoch, seed)[0]]
        t = self.task_cfg
        plan = bucket_batches(lengths, max_tokens=t.max_frames if train else t.eval_max_frames,
                              max_examples=t.batch_size if train else None, shuffle=train, seed=seed, epoch=epoch)
        return shard_batches(plan, train=train)

    def num_batches(self, split: str, epoch: int = 0, seed: int = 0) -> int:
        return len(self._plans.get(split, epoch, seed))

    def batches(self, split: str, epoch: int = 0, seed: int = 0, start: int = 0) -> Iterator[Dict[str, Any]]:
        d, sa = self.data[split], self.task_cfg.spec_augment
        augment = split == "train" and (sa.freq_masks > 0 or sa.time_masks > 0)
        inputs, frames = self._epoch_inputs(split, epoch, seed)
        for b, index in enumerate(self._plans.get(split, epoch, seed)):
            if b < start:
                continue
            xs = [inputs[i] for i in index]
            if augment:  # masks drawn from (seed, epoch, batch): a resumed run sees the same ones
                g = torch.Generator().manual_seed((int(seed) * 1_000_003 + epoch) * 100_003 + b)
                xs = [spec_augment(x, self.task_cfg.features.n_mels, g, sa.freq_masks, sa.freq_width, sa.time_masks,
                                   sa.time_width) for x in xs]
            x, mask_pad, lengths = pad_collate(xs, 0.0)
            targets = [torch.tensor(d["target"][i], dtype=torch.long) for i in index]
            yield {"x": x, "mask_pad": mask_pad, "lengths": lengths,
                   "targets": torch.cat(targets), "target_lengths": torch.tensor([len(tg) for tg in targets]),
                   "frames": sum(frames[i] for i in index), "index": index}

    # ---- model --------------------------------------------------------------------------------
    def build_model(self) -> nn.Module:
        # task.frontend null: none
        return CTCModel(self.encoder_input_size(), len(self.vocab), self.cfg["model"], dropout=self.task_cfg.dropout,
                        frontend=self.task_cfg.frontend)

    # ---- loss, decoding, metrics --------------------------------------------------------------
    def _forward(self, model: nn.Module, batch: Dict[str, Any]) -> Tuple[Tensor, Tensor, LoggingOutput]:
        logits = model(batch["x"], batch["mask_pad"])
        log_probs = logits.float().log_softmax(-1)
        # zero_infinity: an utterance with fewer frames than its labels needs contributes no inf/NaN gradient
        loss = F.ctc_loss(log_probs, batch["targets"], batch["lengths"], batch["target_lengths"], blank=0,
                          reduction="sum", zero_infinity=True)
        nutts = int(batch["lengths"].numel())
        return loss, log_probs, {"loss_sum": loss.item(), "nutts": nutts, "nframes": batch["frames"],
                                 "nlabels": int(batch["target_lengths"].sum()), "sample_size": nutts}

    def compute_loss(self, model: nn.Module, batch: Dict[str, Any], split: str) -> Tuple[Tensor, LoggingOutput]:
        loss, _, logging_output = self._forward(model, batch)
        return loss, logging_output

    def decode(self, log_probs: Tensor, lengths: Tensor, split: str = "test",
               greedy: Optional[List[List[int]]] = None) -> List[str]:
        return [text for text, _ in self.decode_languages(log_probs, lengths, split, greedy)]

    def decode_languages(self, log_probs: Tensor, lengths: Tensor, split: str = "test",
                         greedy: Optional[List[List[int]]] = None) -> List[Tuple[str, Optional[str]]]:
        """Transcripts of a batch and the language each was decoded in (None: a model without languages);
        the beam decoder (task.decoder=beam) and the languages only for test: validation runs every epoch and
        only picks the checkpoint, so it takes the fast greedy path. ``greedy``: the batch's greedy label ids
        when already computed; the LM's length bonus is withheld where they are nearly empty
        (tasks/speech/decoding.py, gated_bonus)."""
        t = self.task_cfg
        greedy = greedy_decode(log_probs, lengths) if greedy is None else greedy
        if self.languages is not None and split == "test":
            beam = t.beam_size if t.decoder == "beam" else None
            bonus, rate = (t.lm_bonus if beam else 0.0), self.chars_per_step()
            decoded = [self.languages.decode(log_probs[: int(n), b], self.language,
                                             DecodeSettings(beam, t.lm_weight, gated_bonus(greedy[b], int(n), bonus, rate)))
                       for b, n in enumerate(lengths.tolist())]
            return [(self.transcript(ids), lang) for ids, lang in decoded]
        if t.decoder == "beam" and split == "test":
            weight, bonus = (t.lm_weight, t.lm_bonus) if self.char_lm is not None else (0.0, 0.0)
            rate = self.chars_per_step()
            ids = [prefix_beam_search(log_probs[: int(n), b], beam=t.beam_size, lm=self.char_lm,
                                      lm_weight=weight, bonus=gated_bonus(greedy[b], int(n), bonus, rate))
                   for b, n in enumerate(lengths.tolist())]
        else:
            ids = greedy
        return [(self.transcript(seq), None) for seq in ids]

    def chars_per_step(self) -> float:
        """Reference characters per model input step in the training data (what a trained model emits);
        kept in model.pt, so decoding needs no training data."""
        if self.train_chars_per_step is None:
            d = self.data["train"]
            self.train_chars_per_step = sum(len(tg) for tg in d["target"]) / max(sum(x.size(0) for x in d["x"]), 1)
        return self.train_chars_per_step

    def transcript(self, label_ids: List[int]) -> str:
        """Decoded label ids as text, normalised like the references (python -m tasks.speech.lm_tuning too)."""
        return normalize_transcript("".join(self.vocab.decode(label_ids)), self.alphabet)

    def eval_step(self, model: nn.Module, batch: Dict[str, Any], split: str) -> Tuple[LoggingOutput, List[Record]]:
        _, log_probs, logging_output = self._forward(model, batch)
        d = self.data[split]
        greedy = greedy_decode(log_probs, batch["lengths"].cpu())
        hyps, chosen = zip(*self.decode_languages(log_probs, batch["lengths"].cpu(), split, greedy))
        refs = [d["ref"][i] for i in batch["index"]]
        logging_output.update(error_counts(zip(refs, hyps)))
        if self.task_cfg.decoder == "beam" and split == "test":
            # the greedy (no LM) rates beside the fused ones: LM insertions must not pass WER 100 unnoticed
            greedy_counts = error_counts(zip(refs, (self.transcript(g) for g in greedy)))
            logging_output.update({f"greedy_{k}": v for k, v in greedy_counts.items()})
        records = [{"id": d["id"][i], "reference": ref, "hypothesis": hyp, "voice": d["voice"][i], "kind": d["kind"][i],
                    "language": d["language"][i], "audio": d["audio"][i], "decoded_language": lang}
                   for i, ref, hyp, lang in zip(batch["index"], refs, hyps, chosen)]
        return logging_output, records

    def reduce_metrics(self, summed: LoggingOutput) -> Dict[str, float]:
        metrics = {"loss": summed.get("loss_sum", 0.0) / max(summed.get("nutts", 0.0), 1.0)}  # CTC per utterance
        if "words" in summed:
            metrics.update(rates(summed))
        if "greedy_words" in summed:
            greedy = rates({k: summed[f"greedy_{k}"] for k in ("word_errors", "words", "char_errors", "chars")})
            metrics.update({f"greedy_{k}": v for k, v in greedy.items()})
        return metrics

    def end_eval(self, split: str, records: List[Record], metrics: Dict[str, float],
                 run_dir: Optional[Path]) -> Dict[str, float]:
        """Write transcripts_<split>.jsonl; add WER/CER per group (tasks/speech/report.py) and trivial
        baselines; the test evaluation prints them and ten random utterances."""
        extra = group_rates(records)
        # trivial baselines: no output (100% WER), and the most frequent training word once per utterance
        word = self.frequent_word
        extra["baseline_empty_wer"] = rates(error_counts((r["reference"], "") for r in records))["wer"]
        frequent = rates(error_counts((r["reference"], word) for r in records))
        extra["baseline_frequent_word_wer"], extra["baseline_frequent_word_cer"] = frequent["wer"], frequent["cer"]
        if run_dir is not None:
            path = Path(run_dir) / f"transcripts_{split}.jsonl"
            with open(path, "w", encoding="utf-8") as out:
                for r in records:
                    keys = ("id", "reference", "hypothesis") + (("audio",) if r.get("audio") else ()) + \
                        (("language", "decoded_language") if r.get("decoded_language") else ())
                    out.write(json.dumps({k: r[k] for k in keys}, ensure_ascii=False) + "\n")
            if split != "test":
                print(f"[speech] {split}: WER {metrics['wer']:.2f}% CER {metrics['cer']:.2f}%", flush=True)
            else:
                print(test_report(records, metrics, extra, word, seed=run_seed(self.cfg)), flush=True)
                print(f"[speech] transcripts: {path}", flush=True)
        return extra

    # ---- saved with the run -------------------------------------------------------------------
    def state_dict(self) -> Dict[str, Any]:
        state: Dict[str, Any] = {"vocab": self.vocab.state_dict()}
        if self.global_stats is not None:
            state["cmvn_mean"], state["cmvn_std"] = self.global_stats
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.vocab.check_same(state.get("vocab", {}))

    # ---- predict.py: audio files in, transcripts out ------------------------------------------
    predict_schema = SpeechPredictOptions

    def inference_state(self) -> Dict[str, Any]:
        state = {**self.state_dict(), "frequent_word": self.frequent_word, "chars_per_step": self.chars_per_step()}
        if self.char_lm is not None:
            state["char_lm"] = char_lm_state(self.char_lm)
        if self.languages is not None:
            state["languages"] = self.languages.state()
        return state

    def restore_inference_state(self, state: Mapping[str, Any]) -> None:
        t = self.task_cfg
        self.vocab = Vocabulary.from_state_dict(state["vocab"])
        # the alphabet the weights were trained for: a null alphabet follows the source, which evaluate.py's
        # file= (a manifest) may change from the voice packs' cs+nl
        self.alphabet = next((a for a in ALPHABETS if char_vocabulary(a).itos == self.vocab.itos), self.alphabet)
        self.frequent_word, self.train_chars_per_step = state["frequent_word"], float(state["chars_per_step"])
        if t.features.cmvn == "global":
            self.global_stats = (state["cmvn_mean"], state["cmvn_std"])
        if t.lm_order and t.decoder == "beam":
            self.char_lm = char_lm_from_state(state["char_lm"])
        # a model saved before per-language decoding has none: it decodes all languages as one
        self.languages = LanguageDecoders.from_state(state["languages"]) if state.get("languages") else None

    def parse_input(self, line: str) -> Any:
        """An audio file's path -> (path, mono samples at the model's rate, seconds); a file longer than
        long_audio.LONG_S -> (path, LongAudio, seconds), read window by window when transcribed."""
        return read_input(super().parse_input(line).strip(), self.task_cfg.data.sample_rate,
                          self.task_cfg.features.win_ms)

    def predict(self, model: nn.Module, inputs: List[Any], options: SpeechPredictOptions, progress) -> List[Any]:
        """The training's features, the evaluation's batches and its test decoding (greedy, or beam with the
        character LM) in the language chosen or identified, unless the options say otherwise; one
        ``{"audio", "text", "seconds", "language"}`` per file (tasks/speech/inference.py)."""
        self.use_options(options)
        return transcribe(self, model, inputs, progress)

    def use_options(self, options: SpeechPredictOptions) -> SpeechConfig:
        """predict.py's / evaluate.py's options replace the test decoding settings (decode() reads task_cfg
        and ``language``); a language the model was not trained on is one line."""
        chosen = {k: v for k, v in dataclasses.asdict(options).items() if v is not None and k != "language"}
        self._task_cfg = dataclasses.replace(self.task_cfg, **chosen)
        if self.languages is not None:
            self.languages.check(options.language)
        elif options.language != AUTO:
            raise ValueError(f"language={options.language}: this model's training data names no languages, so it "
                             f"has one alphabet and LM; leave language= out (auto)")
        self.language = options.language
        return self._task_cfg

    def features_of(self, wave: np.ndarray, logmel: LogMel) -> Tensor:
        """The model input of one clip's samples, as the training's features."""
        f = self.task_cfg.features
        m = logmel(torch.from_numpy(wave))
        m = cmvn(m) if f.cmvn == "utterance" else cmvn(m, *self.global_stats) if f.cmvn == "global" else m
        return stack_frames(m, f.stack, f.skip)
