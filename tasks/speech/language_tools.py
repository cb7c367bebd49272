"""Language tools for a trained speech model (tasks/speech/languages.py):

    python -m tasks.speech.language_tools add OLD_MODEL NEW_MODEL
    python -m tasks.speech.language_tools identify MODEL [MANIFEST]   # MANIFEST: a .jsonl with "language"; else test
    python -m tasks.speech.language_tools identify MODEL [MANIFEST] --classifiers   # + the dropped classifiers

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
``--classifiers`` adds two logistic regressions on the model's own outputs (below:
the utterance-mean CTC posteriors, the utterance-mean encoder states), fitted on the model's validation
split as heard and played at speeds 0.8 and 1.25, and prints how many of the second language each called
the first.
"""
from __future__ import annotations

import argparse
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import numpy as np
import torch
from torch import Tensor

from tasks.common.batching import bucket_batches
from tasks.engine.inference.loader import InferenceInputError, build_trained, load_trained, read_trained
from tasks.engine.inference.options import one_line_errors
from tasks.engine.inference.predict_cmd import export
from tasks.engine.run.context import open_run
from tasks.speech.data import load_audio, load_split_utterances
from tasks.speech.decoding import gated_bonus, greedy_decode
from tasks.speech.features import LogMel, change_speed
from tasks.speech.inference import batched_log_probs
from tasks.speech.languages import DecodeSettings, LanguageDecoders


# ---- language classifiers on the model's own outputs: tried for auto and dropped (tasks/speech/README.md) ----
# Two summaries of an utterance, each averaged over its frames: the CTC posteriors of the non-blank labels
# (renormalised, logged: a soft bag of the characters the model hears) and the encoder's output states. The
# rules are fitted on the model's validation split, as heard and played at other speeds (change_speed: tempo,
# pitch and formants shifted together, a cheap stand-in for voices the model has not heard).
SPEEDS = (1.0, 0.8, 1.25)  # the validation split as heard and as two shifted "voices"


@dataclass
class LogisticRule:
    mean: Tensor
    scale: Tensor
    weight: Tensor
    bias: Tensor

    def logits(self, x: Tensor) -> Tensor:
        return ((x - self.mean) / self.scale) @ self.weight + self.bias

    def predict(self, x: Tensor) -> Tensor:
        return self.logits(x) > 0


def fit_logistic(x: Tensor, y: Tensor, l2: float = 1e-2, steps: int = 200) -> LogisticRule:
    """Binary logistic regression on standardised features (``y`` bool), L2 penalty ``l2`` on the weights."""
    if y.all() or not y.any():
        raise ValueError("fit_logistic: the labels hold one class only; both languages are needed")
    x, y = x.double(), y.double()
    mean, scale = x.mean(0), x.std(0).clamp_min(1e-6)
    z = (x - mean) / scale
    weight = torch.zeros(x.size(1), dtype=torch.float64, requires_grad=True)
    bias = torch.zeros((), dtype=torch.float64, requires_grad=True)
    opt = torch.optim.LBFGS([weight, bias], max_iter=steps, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = torch.nn.functional.binary_cross_entropy_with_logits(z @ weight + bias, y) + l2 * weight.square().sum()
        loss.backward()
        return loss
    opt.step(closure)
    return LogisticRule(mean, scale, weight.detach(), bias.detach())


def posterior_summary(log_probs: Tensor) -> Tensor:
    """log of the utterance's share of each non-blank label in the CTC posteriors (summed over frames)."""
    mass = log_probs.float().exp()[:, 1:].sum(0)
    return (mass / mass.sum().clamp_min(1e-9) + 1e-4).log()


@torch.no_grad()
def utterance_features(task, model, inputs: Sequence[Tensor]) -> Dict[str, Tensor]:
    """Per-utterance summaries of the model's outputs on ``inputs`` (model inputs, as task.features_of)."""
    states: Dict[str, Tensor] = {}
    hook = model.encoder.register_forward_hook(lambda module, args, out: states.__setitem__("h", out[0]))
    posts: List[Tensor] = [torch.empty(0)] * len(inputs)
    encs: List[Tensor] = [torch.empty(0)] * len(inputs)
    plan = bucket_batches([x.size(0) for x in inputs], max_tokens=task.task_cfg.eval_max_frames, max_examples=None)
    try:
        for index, log_probs, lengths in batched_log_probs(model, list(inputs), plan, torch.device("cpu")):
            for b, (i, n) in enumerate(zip(index, lengths.tolist())):
                posts[i], encs[i] = posterior_summary(log_probs[:n, b]), states["h"][:n, b].float().mean(0)
    finally:
        hook.remove()
    return {"posteriors": torch.stack(posts), "encoder": torch.stack(encs)}


def shifted_inputs(task, waves: Sequence[np.ndarray], speed: float) -> List[Tensor]:
    """The model inputs of ``waves`` played ``speed`` times as fast."""
    t = task.task_cfg
    logmel = LogMel(t.data.sample_rate, t.features.n_mels, t.features.win_ms, t.features.hop_ms)
    return [task.features_of(change_speed(w, speed), logmel) for w in waves]


def fit_rules(task, model, waves: Sequence[np.ndarray], languages: Sequence[str],
              second: str) -> Dict[str, LogisticRule]:
    """One rule per summary, fitted on ``waves`` at every speed of SPEEDS (True: ``second`` language)."""
    feats = [utterance_features(task, model, shifted_inputs(task, waves, s)) for s in SPEEDS]
    y = torch.tensor([lang == second for lang in languages] * len(SPEEDS))
    return {name: fit_logistic(torch.cat([f[name] for f in feats]), y) for name in feats[0]}


def rule_accuracy(rules: Dict[str, LogisticRule], feats: Dict[str, Tensor], languages: Sequence[str],
                  second: str) -> Dict[str, Tuple[float, int]]:
    """Share right (percent) and how many of ``second`` each rule called the first language."""
    y = torch.tensor([lang == second for lang in languages])
    out = {}
    for name, rule in rules.items():
        guess = rule.predict(feats[name])
        out[name] = (100.0 * float((guess == y).double().mean()), int((y & ~guess).sum()))
    return out


def add_languages(old: Path, new: Path) -> LanguageDecoders:
    if new.exists():
        raise InferenceInputError(f"{new}: the file exists and is never overwritten; pick another name")
    trained = load_trained(old, splits=("train",), device="cpu", expect_tasks=("speech",))
    task = trained.task
    if not trained.data_loaded:
        task.setup()  # the training split: its transcripts and languages
    train = task.recorded_training()  # the corpus's own transcripts, without synthetic copies
    languages = LanguageDecoders.fit(train["target"], train["language"], task.task_cfg.lm_order, len(task.vocab))
    if languages is None:
        raise InferenceInputError(f"{old}: its training data names no language per utterance; a model of one "
                                  f"language decodes as it is (language=auto)")
    task.languages = languages
    export(trained, new)
    return languages


def utterances(model_path: Path, manifest):
    """(log-probs (T, V), language) of every utterance of the test split or ``manifest``; the task and model."""
    run = read_trained(model_path, "best", [], scored_file=(str(manifest), "test") if manifest else None)
    with open_run(run.cfg, None, lock=False):
        trained = build_trained(run, splits=("test",), device="cpu")
        task = trained.task
        task.setup()
        if task.languages is None:
            raise ValueError(f"{model_path}: no languages in it (python -m tasks.speech.language_tools add gives them)")
        out, d = [], task.data["test"]
        with torch.no_grad():
            for batch in task.batches("test"):
                lp = trained.model(batch["x"], batch["mask_pad"]).float().log_softmax(-1)
                out += [(lp[:n, b].clone(), d["language"][i])
                        for b, (i, n) in enumerate(zip(batch["index"], batch["lengths"].tolist()))]
    return task, out, trained.model


def classifier_accuracy(model_path: Path, task, model) -> str:
    """The classifiers of tasks/speech/language_probe.py, fitted on the model's validation split, scored on
    the utterances of ``task``'s test split (the manifest)."""
    run = read_trained(model_path, "best", [])
    with open_run(run.cfg, None, lock=False):
        fitted = build_trained(run, splits=("valid",), device="cpu")
        data = fitted.task.task_cfg.data
        utts = load_split_utterances(data, "valid")
        first, second = task.languages.names[:2]
        rules = fit_rules(fitted.task, fitted.model, [load_audio(u, data.sample_rate) for u in utts],
                          [u.language for u in utts], second)
    feats = utterance_features(task, model, task.data["test"]["x"])
    scores = rule_accuracy(rules, feats, task.data["test"]["language"], second)
    return "classifiers fitted on valid: " + ", ".join(f"{name}-lr {acc:.1f}% ({missed} {second} called {first})"
                                                      for name, (acc, missed) in scores.items())


def identify(model: Path, manifest, classifiers: bool = False) -> None:
    """Print the share of utterances each rule gives the right language."""
    task, items, acoustic = utterances(model, manifest)
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
    if classifiers:
        print(classifier_accuracy(model, task, acoustic), flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tasks.speech.language_tools", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    add = commands.add_parser("add", help="a new model file with the languages of an older one")
    add.add_argument("old", type=Path, help="a speech model.pt (or run directory)")
    add.add_argument("new", type=Path, help="the model file to write (must not exist)")
    grid = commands.add_parser("identify", help="each identification rule's share of languages right")
    grid.add_argument("model", type=Path)
    grid.add_argument("manifest", type=Path, nargs="?")
    grid.add_argument("--classifiers", action="store_true", help="also the two logistic-regression classifiers (fitted on the validation split)")
    args = parser.parse_args(argv)
    with one_line_errors("language_tools"):
        if args.command == "add":
            languages = add_languages(args.old, args.new)
            print(f"[language_tools] {args.new}: languages {', '.join(languages.names)}", flush=True)
        else:
            identify(args.model, args.manifest, args.classifiers)


if __name__ == "__main__":
    main()
