"""End-to-end training throughput per task: SRU vs its baseline on the same batches, in one process.

(``python -m bench.task_throughput``)

Every task compares two models (``PAIRS``): translation ``model=transformer_sru`` with
``model=transformer``, every other task ``model=sru`` with ``model=lstm``. For each the config is
composed exactly as ``train.py task=<name> model=<model>`` would (``tasks.engine.train.runner.compose``), the task
builds its data, model and optimizer, and ``--steps`` training batches are taken once and replayed for
both models (the two tasks are built from one config but for the model and give identical batches;
checked). The models then alternate, ``--steps`` optimizer steps each per round, the order flipping
every round, so load from other processes falls on both alike; items/s is the task's throughput key
(tokens, sentences, frames) over the step time, and the ratio (SRU model / baseline) is the median of
the per-round ratios.

Where each step goes, from hooks that do not change what runs: forward of the embedding(s), of the
encoder and of the rest (head, attention, softmax/decoder and loss); backward of the encoder (for each
encoder module, from the gradient of its output arriving to the last gradient of its parameters; the
union of those spans) and of the rest; the optimizer step (the trainer's: gradients normalised by the
sample size, clipped or their norm taken, step, zero_grad; tasks/engine/training/step.py, which also
runs the forward and backward). "Encoder" is the recurrent part the two models differ in
(``tasks.common.encoders.recurrent_modules``: the outermost SRU / SRU++ / LSTM modules):
  lm, lm_char, classification, speech: ``model.encoder`` (the SRU or LSTM stack);
  squad: the reader's paragraph and question encoders (``doc_rnn``, ``question_rnn``);
  translation: the ``sru.SRU`` inside every SRU sublayer of the Transformer's encoder and decoder layers
  (what ``transformer_sru`` adds). ``model=transformer`` has none, so its encoder parts are 0 and its
  attention and feed-forward sublayers count as the rest in both models.
``--tasks`` takes the ``task=`` configs of ``conf/task/`` (``all``: every one) and the presets below.
"""
import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Tuple

import torch
from torch import nn

from sru.ops.precision import AUTOCAST_NAMES
from bench.harness import interleaved, machine_info, make_timer, markdown_table
from tasks.common.encoders import recurrent_modules
from tasks.engine.base import build_task
from tasks.engine.config.checks import run_config
from tasks.engine.config.tree import find_conf_dir
from tasks.engine.run.devices import move_to_device
from tasks.engine.train.runner import compose
from tasks.engine.training.optim import build_optimizer
from tasks.engine.training.step import TrainStep

# Paper setups composed by experiment files: label -> overrides for a model name.
PRESETS: Dict[str, Callable[[str], List[str]]] = {
    "ptb-paper": lambda model: [f"experiment=paper/ptb_{model}"],  # 6 x 910, batch 32, bptt 35
}
# (SRU model, baseline) per task; every other task and preset: model=sru vs model=lstm.
PAIRS: Dict[str, Tuple[str, str]] = {"translation": ("transformer_sru", "transformer")}
PARTS = ("embedding", "encoder_fwd", "rest_fwd", "encoder_bwd", "rest_bwd", "optimizer")


def task_configs() -> List[str]:
    """The ``task=`` choices: conf/task/*.yaml (lm_char is a config of the lm task)."""
    return sorted(p.stem for p in (find_conf_dir() / "task").glob("*.yaml"))


def model_pair(task: str) -> Tuple[str, str]:
    return PAIRS.get(task, ("sru", "lstm"))


def tensors(x) -> List[torch.Tensor]:
    """The tensors in nested dicts, lists and tuples (dicts in key order)."""
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, dict):
        return [t for k in sorted(x) for t in tensors(x[k])]
    if isinstance(x, (list, tuple)):
        return [t for v in x for t in tensors(v)]
    return []


def overrides_for(task: str, model: str, extra: List[str]) -> List[str]:
    if task in PRESETS:
        return PRESETS[task](model) + extra
    if task not in task_configs():
        raise ValueError(f"--tasks: expected task configs from {task_configs()} or presets "
                         f"{sorted(PRESETS)}, received {task!r}")
    return [f"task={task}", f"model={model}"] + extra


class StepClock:
    """Accumulates wall time per part of a training step via module and tensor hooks."""

    def __init__(self, model: nn.Module):
        self.totals = dict.fromkeys(PARTS, 0.0)
        self._fwd_start: Dict[int, float] = {}
        self._bwd: Dict[int, List[float]] = {}  # encoder i -> [its output's grad arrived, its last param grad]
        self.encoders = recurrent_modules(model)
        for module in model.modules():
            if isinstance(module, nn.Embedding):
                self._time_forward(module, "embedding")
        for i, encoder in enumerate(self.encoders):
            self._time_forward(encoder, "encoder_fwd")
            encoder.register_forward_hook(lambda mod, args, out, i=i: self._watch_output(i, out))
            for p in encoder.parameters():
                if p.requires_grad:
                    p.register_post_accumulate_grad_hook(lambda p, i=i: self._grad_done(i))

    def _time_forward(self, module: nn.Module, part: str) -> None:
        def pre(mod, args):
            self._fwd_start[id(mod)] = time.perf_counter()

        def post(mod, args, out):
            self.totals[part] += time.perf_counter() - self._fwd_start.pop(id(mod))
        module.register_forward_pre_hook(pre)
        module.register_forward_hook(post)

    def _watch_output(self, i: int, out) -> None:
        """An encoder's backward starts when the first grad of its output(s) arrives."""
        for t in tensors(out):
            if t.requires_grad:
                t.register_hook(lambda g, i=i: self._grad_arrives(i))

    def _grad_arrives(self, i: int) -> None:
        self._bwd.setdefault(i, [time.perf_counter(), 0.0])

    def _grad_done(self, i: int) -> None:
        if i in self._bwd:
            self._bwd[i][1] = time.perf_counter()

    def backward_done(self, total_s: float) -> None:
        """Split one backward pass: the encoders' spans (their union, so overlaps count once) and the rest."""
        encoder, covered = 0.0, float("-inf")
        for begin, end in sorted(tuple(span) for span in self._bwd.values()):
            begin = max(begin, covered)
            if end > begin:
                encoder += end - begin
            covered = max(covered, end)
        self.totals["encoder_bwd"] += encoder
        self.totals["rest_bwd"] += total_s - encoder
        self._bwd = {}


class Runner:
    """One model of one task: its own task object (the LM carries its state per model), model,
    optimizer and clock; ``step_on(batch)`` is one training step, the trainer's own (``TrainStep``)."""

    def __init__(self, cfg, precision: str):
        self.cfg = cfg
        self.task = build_task(cfg)
        torch.set_flush_denormal(bool(cfg.trainer.flush_denormal))  # as the trainer does
        self.task.setup()
        torch.manual_seed(int(cfg.get("seed") or 0))
        model = self.task.build_model().train()
        trainer = dataclasses.replace(run_config(cfg).trainer, precision=precision)
        # the trainer's own step (tasks/engine/training/step.py): autocast, loss normalisation, clipping
        self.step = TrainStep(self.task, model, build_optimizer(model.parameters(), trainer.optimizer), trainer,
                              torch.device("cpu"))
        self.clock = StepClock(model)
        self.parameters = sum(p.numel() for p in model.parameters())

    def batches(self, n: int) -> list:
        it = self.task.batches("train", epoch=0, seed=int(self.cfg.get("seed") or 0))
        return [move_to_device(next(it), torch.device("cpu")) for _ in range(n)]

    def step_on(self, batch) -> float:
        """One optimizer step on one batch, its parts timed; returns the items it trained on."""
        start = time.perf_counter()
        loss, out = self.step.forward(batch)
        c = self.clock.totals
        c["rest_fwd"] += time.perf_counter() - start  # the hooked parts are taken out in parts()
        start = time.perf_counter()
        self.step.backward(loss, out)
        self.clock.backward_done(time.perf_counter() - start)
        start = time.perf_counter()
        self.step.optimizer_step([out])
        c["optimizer"] += time.perf_counter() - start
        return float(out.get(self.task.throughput_key, 0.0))

    def parts(self) -> Dict[str, float]:
        """Seconds per part, the hooked forward parts taken out of the forward total."""
        t = dict(self.clock.totals)
        t["rest_fwd"] -= t["embedding"] + t["encoder_fwd"]
        return t


def same_batches(a: list, b: list) -> bool:
    fa, fb = tensors(a), tensors(b)
    return len(fa) == len(fb) and all(x.shape == y.shape and torch.equal(x, y) for x, y in zip(fa, fb))


def bench_task(task: str, args) -> Dict:
    candidate, baseline = pair = model_pair(task)
    runners = {m: Runner(compose(overrides_for(task, m, args.override)), args.precision) for m in pair}
    batches = runners[candidate].batches(args.steps)
    if not same_batches(batches, runners[baseline].batches(args.steps)):
        raise RuntimeError(f"{task}: the {candidate} and {baseline} configs give different batches; "
                           "the comparison would not be like for like")
    for runner in runners.values():  # warm-up: kernel builds, allocator, first-step costs
        for batch in batches[:2]:
            runner.step_on(batch)
        runner.clock.totals = dict.fromkeys(PARTS, 0.0)
    items = dict.fromkeys(pair, 0.0)

    def steps(m):  # one round of one model: --steps optimizer steps on the same batches
        def run():
            items[m] = sum(runners[m].step_on(batch) for batch in batches)
        return run
    seconds = interleaved({m: steps(m) for m in pair}, make_timer("cpu"), args.rounds)  # order flips per round
    rounds = {m: [items[m] / s for s in seconds[m]] for m in pair}
    ratios = [a / b for a, b in zip(rounds[candidate], rounds[baseline])]
    result = {"task": task, "candidate": candidate, "baseline": baseline, "steps_per_round": args.steps,
              "rounds": args.rounds, "items": runners[candidate].task.throughput_key,
              "ratio_over_baseline": statistics.median(ratios), "ratio_rounds": ratios, "models": {}}
    for m, runner in runners.items():
        total_steps = args.steps * args.rounds
        parts = {k: v / total_steps * 1e3 for k, v in runner.parts().items()}
        result["models"][m] = {"items_per_s": statistics.median(rounds[m]), "items_per_s_rounds": rounds[m],
                               "parameters": runner.parameters, "ms_per_step_parts": parts,
                               "ms_per_step": sum(parts.values())}
    return result


def markdown(results: List[Dict]) -> str:
    rows = []
    for r in results:
        for m in (r["candidate"], r["baseline"]):
            x = r["models"][m]
            share = [f"{x['ms_per_step_parts'][p]:.1f} ({100 * x['ms_per_step_parts'][p] / x['ms_per_step']:.0f}%)"
                     for p in PARTS]
            ratio = f"**{r['ratio_over_baseline']:.2f}x**" if m == r["candidate"] else ""
            rows.append([r["task"], m, f"{x['parameters'] / 1e6:.1f}M", f"{x['items_per_s']:.0f} {r['items']}/s",
                         ratio, f"{x['ms_per_step']:.1f}", *share])
    header = ["task", "model", "params", "items/s (median)", "SRU / baseline", "ms/step", *PARTS]
    return markdown_table(header, rows)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", default="all", help="comma-separated task configs and presets; all: every "
                        "conf/task config")
    parser.add_argument("--steps", type=int, default=10, help="training steps per model per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--precision", default="fp32", choices=AUTOCAST_NAMES)
    parser.add_argument("--override", action="append", default=[],
                        help="a config override for every task and model, e.g. task.batch_size=16")
    parser.add_argument("--out", default="outputs/bench_tasks")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.rounds < 1 or args.threads < 1:
        parser.error("--steps, --rounds and --threads: expected >= 1")
    return args


def main(argv=None) -> List[Dict]:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for task in task_configs() if args.tasks == "all" else args.tasks.split(","):
        print(f"[{task}] building data and both models ({' and '.join(model_pair(task))})", flush=True)
        r = bench_task(task, args)
        results.append(r)
        print(f"[{task}] {r['candidate']} / {r['baseline']} = {r['ratio_over_baseline']:.2f}x", flush=True)
    info = machine_info("cpu", "python -m bench.task_throughput " + " ".join(argv if argv is not None else sys.argv[1:]),
                        precision=args.precision)
    table = markdown(results)
    (out / "bench_tasks.json").write_text(json.dumps({"machine": info, "results": results}, indent=1))
    (out / "bench_tasks.md").write_text(f"Command: `{info['command']}`  \n{info}\n\n{table}\n")
    print("\n" + table + f"\n\nwrote {out / 'bench_tasks.json'}, {out / 'bench_tasks.md'}")
    return results


if __name__ == "__main__":
    main()
