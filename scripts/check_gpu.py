"""One prepared check for a short time on a GPU machine (about 5 minutes on one GPU).

    python scripts/check_gpu.py [--out outputs/check_gpu] [--skip-bench] [--bench-timeout 420]
    TRITON_INTERPRET=1 python scripts/check_gpu.py --dry-run-cpu   # smoke-test this script

Correctness of the Triton recurrence on the GPU and its memory bandwidth (bench/gpu_check.py), then
``python -m bench.speed --device cuda``; everything goes to --out (correctness.json, bandwidth.json,
summary.md, bench/, bench_log.txt). Exit status 1 if a correctness check fails.
"""
import argparse
import subprocess
import sys
from pathlib import Path

from bench.gpu_check import run_checks
from bench.harness import markdown_table, module_command


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="outputs/check_gpu")
    parser.add_argument("--skip-bench", action="store_true", help="do not run bench.speed")
    parser.add_argument("--bench-timeout", type=float, default=420.0, help="seconds")
    parser.add_argument("--dry-run-cpu", action="store_true",
                        help="test this script on CPU under TRITON_INTERPRET=1 (small cases)")
    return parser.parse_args(argv)


def run_bench_speed(out: Path, timeout: float) -> str:
    """The layer speed table on the GPU, in a fresh process; its status in words."""
    cmd, env = module_command("bench.speed", "--device", "cuda", "--repeats", "10", "--out", str(out / "bench"))
    print("running:", " ".join(cmd), flush=True)
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as err:
        (out / "bench_log.txt").write_text(str(err.stdout or "") + str(err.stderr or ""))
        return f"timed out after {timeout:.0f}s"
    (out / "bench_log.txt").write_text(done.stdout + done.stderr)
    print(done.stdout[-4000:], done.stderr[-2000:], flush=True)
    return f"exit {done.returncode}"


def summary(info, results, rows, sweep, bench_status: str) -> str:
    step = (lambda r, kind: f"{r[kind + '_us_per_step']:.2f} ({r[kind + '_predicted_us_per_step']:.2f})")
    table = markdown_table(
        ["L", "B", "d", "bi", "dtype", "inference ms", "inf GB/s", "fwd ms", "fwd GB/s", "bwd ms",
         "bwd GB/s", "µs/step inf (predicted)", "fwd (predicted)", "bwd (predicted)"],
        [[r["L"], r["B"], r["d"], r["bidirectional"], r["dtype"], f"{r['inference_ms']:.3f}",
          f"{r['inference_GBps']:.0f}", f"{r['forward_ms']:.3f}", f"{r['forward_GBps']:.0f}",
          f"{r['backward_ms']:.3f}", f"{r['backward_GBps']:.0f}", step(r, "inference"),
          step(r, "forward"), step(r, "backward")] for r in rows])
    all_ok = all(r["ok"] for r in results)
    lines = [f"# GPU check: {info['device']} (torch {info['torch']}, triton {info['triton']})", "",
             f"correctness: {'ALL OK' if all_ok else 'FAILURES'} "
             f"({sum(r['ok'] for r in results)}/{len(results)})", "", table, "",
             f"predicted = bytes per step / {rows[0]['predicted_for'] if rows else 'H100'} peak "
             "HBM bandwidth (sru/ops/triton/roofline.py)"]
    lines += ["", "BLOCK sweep (bi, fp32, fwd+bwd ms): "
              + ", ".join(f"{r['block']}: {r['fwd_bwd_ms']:.3f}" for r in sweep)]
    lines += ["", f"bench.speed: {bench_status} (see bench/ and bench_log.txt)"]
    return "\n".join(lines) + "\n"


def main(argv=None):
    args = parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    info, results, rows, sweep = run_checks(out, dry_run_cpu=args.dry_run_cpu)
    bench_status = "skipped" if args.skip_bench or args.dry_run_cpu else run_bench_speed(out, args.bench_timeout)
    text = summary(info, results, rows, sweep, bench_status)
    (out / "summary.md").write_text(text)
    print(text, end="")
    sys.exit(0 if all(r["ok"] for r in results) else 1)


if __name__ == "__main__":
    main()
