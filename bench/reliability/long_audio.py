"""Peak memory and wall time of ``predict.py`` on long audio (docs/inference.md#long-audio).

    python -m bench.reliability.long_audio --minutes 20 180
    python -m bench.reliability.long_audio --minutes 20 --runs outputs/runs/<run> outputs/runs/<run>/model.pt


Builds a speech model file of the default shape (``task=speech``: 12 bidirectional SRU layers of 200,
the default decoder: prefix beam search, beam 8, with an order-8 character LM; weights as initialised,
not trained, and the LM fitted on a few sentences), writes a WAV of each length (16 kHz, 16-bit: tones
with pauses and noise), and runs ``python predict.py`` on it in a fresh process per case, with the
default decoder and with ``decoder=greedy``: the peak resident memory of that process (ru_maxrss of the
child) and its wall time. ``--runs``: trained runs too, each a run directory or a model file as ``run=``
takes it; the built model is given both ways as well (its file, and a directory holding it as model.pt).
An untrained model emits other labels than a trained one, so the beam's work
differs; the memory bound comes from the windows (tasks/speech/long_audio.py) either way.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from omegaconf import OmegaConf

ROOT = Path(__file__).resolve().parents[2]
RATE = 16000


def model_file(path: Path) -> None:
    from tasks.engine.config.tree import compose
    from tasks.engine.inference.loader import write_model_file
    from tasks.engine.base import build_task
    from tasks.speech.char_lm import CharNgramLM

    cfg = compose(["task=speech", "trainer.device=cpu"])
    task = build_task(cfg)
    text = ["the quick brown fox jumps over the lazy dog", "a long file is read window by window"] * 20
    ids = [[task.vocab.stoi[c] for c in s if c in task.vocab.stoi] for s in text]
    task.char_lm = CharNgramLM.fit(ids, task.task_cfg.lm_order, len(task.vocab))
    task.frequent_word, task.train_chars_per_step = "the", 0.4
    model = task.build_model()
    write_model_file(path, task, OmegaConf.to_container(cfg, resolve=True), model.state_dict(), 0)


def wav_file(path: Path, minutes: float) -> None:
    import soundfile

    rng = np.random.default_rng(0)
    with soundfile.SoundFile(str(path), "w", RATE, 1, "PCM_16") as f:
        for second in range(int(minutes * 60)):  # written a second at a time: the bench itself stays small
            t = np.arange(RATE) / RATE
            tone = 0.2 * np.sin(2 * np.pi * (200 + 40 * (second % 7)) * t) * (second % 4 != 3)
            f.write((tone + 0.01 * rng.standard_normal(RATE)).astype(np.float32))


# each case in its own wrapper process: ru_maxrss of children is a running maximum per parent
WRAPPER = ("import resource, subprocess, sys; done = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
           "sys.stderr.write(done.stderr); print(done.returncode, len(done.stdout), "
           "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


def measure(model: Path, wav: Path, extra) -> tuple:
    """(peak resident KiB of the predict.py process, wall seconds)."""
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", WRAPPER, sys.executable, str(ROOT / "predict.py"), f"run={model}",
                           *extra, str(wav)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    seconds = time.perf_counter() - t0
    status, _, peak = (int(x) for x in done.stdout.split())
    if status != 0:
        raise SystemExit(done.stderr[-3000:])
    return peak, seconds


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, nargs="+", default=[20, 180])
    ap.add_argument("--decoders", nargs="+", default=["default", "greedy"])
    ap.add_argument("--runs", nargs="*", default=[], help="trained runs: run directories or model files")
    ap.add_argument("--forms", nargs="*", default=["file", "dir"], choices=["file", "dir"],
                    help="the built (untrained) model as run=<file> and/or run=<dir>; none: only the --runs")
    args = ap.parse_args()
    if not args.forms and not args.runs:
        ap.error("nothing to measure: give --runs, or leave --forms out (the built model, both forms)")
    if min(args.minutes) <= 0:
        ap.error(f"--minutes: expected lengths > 0, received {args.minutes}")
    missing = [r for r in args.runs if not Path(r).expanduser().exists()]
    if missing:  # before minutes of WAV writing, not after
        ap.error(f"--runs: no such run directory or model file: {', '.join(missing)}")
    with tempfile.TemporaryDirectory() as tmp:
        built = Path(tmp) / "untrained" / "model.pt"
        models = [{"file": built, "dir": built.parent}[form] for form in args.forms]
        if models:
            built.parent.mkdir()
            model_file(built)
        models += [Path(r).expanduser().resolve() for r in args.runs]
        print("| model (run=) | audio | decoder | peak memory | wall time | load average (start, end) |\n"
              "|---|---|---|---|---|---|", flush=True)
        for minutes in args.minutes:
            wav = Path(tmp) / f"{minutes:g}min.wav"
            wav_file(wav, minutes)
            for model in models:
                for decoder in args.decoders:
                    extra = [] if decoder == "default" else [f"decoder={decoder}"]
                    load = os.getloadavg()[0]
                    peak, seconds = measure(model, wav, extra)
                    name = "beam 8 + char LM (default)" if decoder == "default" else decoder
                    shown = str(model).replace(tmp, "<built>")
                    print(f"| {shown} | {minutes:g} min | {name} | {peak / 2**20:.2f} GiB | {seconds:.0f} s | "
                          f"{load:.1f}, {os.getloadavg()[0]:.1f} |", flush=True)
            wav.unlink()
    import torch
    from tasks.engine.run.devices import cpu_model  # the one machine description

    print(f"\nCPU: {cpu_model()}, {os.cpu_count()} cores; torch {torch.__version__}, "
          f"capability {torch.backends.cpu.get_cpu_capability()}")


if __name__ == "__main__":
    main()
