"""Bandwidth-bound prediction of the Triton recurrence's time per step (docs/gpu.md#predicted-time-per-step).

Each time step reads and writes a fixed number of bytes per state element (B x dirs x d of
them); at best the kernel streams them at the GPU's HBM bandwidth, so one step takes at least
bytes_per_step / bandwidth. ``scripts/check_gpu.py`` prints this beside its measured time. The
bound ignores latency: each step's loads wait a full DRAM round trip (~0.5-1 µs) unless enough
warps are resident to hide it, so small B x d run slower than predicted.

    python -m sru.ops.triton.roofline        # the table in docs/gpu.md
"""
from typing import Dict

# Peak HBM bandwidth, GB/s (vendor figures: H100 SXM5 HBM3 3.35 TB/s, H200 HBM3e 4.8 TB/s).
HBM_GBPS: Dict[str, float] = {"H100": 3350.0, "H200": 4800.0}
SHAPES = ((32, 512, False), (128, 1024, False), (128, 1024, True))  # (B, d, bidirectional)
DTYPES = {"fp32": 4, "bf16": 2}


def step_bytes(batch: int, hidden: int, bidirectional: bool, element_size: int) -> Dict[str, int]:
    """Bytes one time step must move (k = 3 with the skip input x, as bench/gpu_check.py's
    bandwidth shape): inference reads U (3 values) and x, writes h; the training forward also
    writes the fp32 c history; the backward reads grad_h, U, x and c, writes grad_U and grad_x."""
    states = batch * hidden * (2 if bidirectional else 1)
    es = element_size
    inference = states * (3 * es + es + es)
    return dict(inference=inference, forward=inference + states * 4,
                backward=states * (es + 3 * es + es + 4 + 3 * es + es))


def predicted_us(bytes_per_step: int, gpu: str) -> float:
    """Microseconds per step at ``gpu``'s peak HBM bandwidth."""
    return bytes_per_step / (HBM_GBPS[gpu] * 1e3)


def gpu_key(name: str) -> str:
    """The HBM_GBPS entry for a device name (H200 if it says so, else H100)."""
    return "H200" if "H200" in name.upper() else "H100"


def table() -> str:
    lines = ["| B | d | bi | dtype | bytes/step (inf / fwd / bwd) | H100 µs/step (inf / fwd / bwd) "
             "| H200 µs/step (inf / fwd / bwd) |", "|---|---|---|---|---|---|---|"]
    for batch, hidden, bi in SHAPES:
        for dtype, es in DTYPES.items():
            b = step_bytes(batch, hidden, bi, es)
            cells = [" / ".join(f"{b[k] / 1024:.0f} KiB" for k in b)]
            for gpu in HBM_GBPS:
                cells.append(" / ".join(f"{predicted_us(b[k], gpu):.2f}" for k in b))
            lines.append(f"| {batch} | {hidden} | {bi} | {dtype} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table())
