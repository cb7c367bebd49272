"""Compile the Triton kernels for real GPUs on a machine without one (docs/gpu.md#compiled-variants).

``triton.compile(ASTSource(...), target=GPUTarget("cuda", cc, 32))`` runs Triton's whole
pipeline down to a cubin with the ptxas that ships in the triton wheel, so a compile error, or
registers spilled to local memory, show up here rather than on a user's GPU. ``ptxas -v`` on
the PTX gives registers and spill bytes; Triton's metadata gives the shared memory.

Variants: what padded.py and packed.py can launch. Structural axes, all combined: kernel
(forward, backward) x dtype x layout (padded, packed) x (K, SKIP) x architecture. dtype is the
pointer types the launchers pass: ``fp32``; ``fp16``/``bf16`` (U, x, h and their gradients in
half precision, the rest fp32: a direct ``elementwise_recurrence`` call on half U);
``fp16-amp`` (every input fp16: ``amp_recurrence_fp16``); ``fp64`` (gradcheck). The boolean
flags (TANH, HAS_MASK_C, HAS_MASK_PAD, PER_STEP_W, SCALE_FROM_PTR, STORE_C / NEED_GRAD_MASK_C)
are each compiled all off and all on (the register-pressure worst case; padded only for
HAS_MASK_PAD and PER_STEP_W, which packed launches never set). Block sizes: every BLOCK
``launch_config`` returns (32, 64, 128 with 1, 2, 4 warps) for the all-on variants, 128 for
the rest (one column per thread in every case, so registers do not depend on it).

    python -m sru.ops.triton.compile_check [--quick] [--markdown]
"""
import argparse
import itertools
import json
import re
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Dict, List

ARCHS = (80, 90)
SHIPPED_BLOCKS = (32, 64, 128)  # launch_config: BLOCK in [32, 128], num_warps = BLOCK // 32
DTYPES = ("fp32", "fp16", "bf16", "fp16-amp", "fp64")
K_SKIP = ((3, 0), (3, 1), (4, 0), (4, 2))
_LOW = {"U", "X", "H", "C_LAST", "GRAD_H", "GRAD_U", "GRAD_X"}  # pointers in U's dtype
# Spills found by this check and accepted, with why; any other spill fails the check, and a listed
# one that stops spilling fails it too (so this list cannot go stale). Measured with triton 3.9's
# ptxas: the fp64 (gradcheck-only) packed backward spills one 4-byte word on sm_80 with every flag
# off, not with them on; 4 bytes to L1-cached local memory once per program, no measurable cost.
KNOWN_SPILLS = {"backward-fp64-packed-k3s1-plain-b128-sm80": 8}
_SCALARS = {"L": "i32", "B": "i32", "D": "i32", "DD": "i32", "scale_x": "fp32"}


@dataclass(frozen=True)
class Variant:
    kernel: str  # "forward" | "backward"
    dtype: str
    packed: bool
    k: int
    skip: int
    flags: bool  # every boolean flag the layout allows set (True) or none (False)
    block: int
    arch: int

    @property
    def name(self) -> str:
        layout = "packed" if self.packed else "padded"
        return (f"{self.kernel}-{self.dtype}-{layout}-k{self.k}s{self.skip}-"
                f"{'flags' if self.flags else 'plain'}-b{self.block}-sm{self.arch}")

    def constexprs(self) -> Dict[str, object]:
        on = self.flags
        values = dict(K=self.k, SKIP=self.skip, TANH=on, HAS_MASK_C=on,
                      HAS_MASK_PAD=on and not self.packed, PER_STEP_W=on and not self.packed,
                      SCALE_FROM_PTR=on or self.dtype == "fp64", FP64=self.dtype == "fp64",
                      BLOCK=self.block, PACKED=self.packed)
        values["STORE_C" if self.kernel == "forward" else "NEED_GRAD_MASK_C"] = on
        return values

    def pointer_type(self, name: str) -> str:
        if name == "MASK_PAD":
            return "*u8"
        if name in ("BATCH_SIZES", "STEP_OFFSETS"):
            return "*i64"
        if self.dtype == "fp64":
            return "*fp64"
        if self.dtype == "fp16-amp":  # the launchers cast every input to fp16; states stay fp32
            return "*fp32" if name in ("C_ALL", "PART_W", "PART_B") else "*fp16"
        return f"*{self.dtype}" if name in _LOW else "*fp32"


def variants(quick: bool = False) -> List[Variant]:
    """The full matrix, or (quick) one all-flags variant per kernel, dtype and layout at the
    largest block, with the skip mode and the architecture rotating."""
    found = []
    for kernel, dtype, packed, (k, skip), flags, arch in itertools.product(
            ("forward", "backward"), DTYPES, (False, True), K_SKIP, (False, True), ARCHS):
        for block in (SHIPPED_BLOCKS if flags else (128,)):
            found.append(Variant(kernel, dtype, packed, k, skip, flags, block, arch))
    if not quick:
        return found
    picked = []
    for i, (kernel, dtype, packed) in enumerate(itertools.product(
            ("forward", "backward"), DTYPES, (False, True))):
        k, skip = K_SKIP[i % len(K_SKIP)]
        picked.append(Variant(kernel, dtype, packed, k, skip, True, 128, ARCHS[i % len(ARCHS)]))
    return picked


def compile_all(chosen: List[Variant], workers: int = 1) -> List[Dict[str, object]]:
    """``compile_variant`` over ``chosen``, in ``workers`` processes (compiles are CPU-bound)."""
    if workers <= 1:
        return [compile_variant(v) for v in chosen]
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(workers) as pool:
        return list(pool.map(compile_variant, chosen, chunksize=8))


def _ptxas_usage(ptx: str, arch: int) -> Dict[str, int]:
    """Registers and spill bytes from ``ptxas -v`` (the ptxas shipped with triton)."""
    from triton.backends.nvidia.compiler import get_ptxas

    suffix = "a" if arch == 90 else ""  # sm_90a: what Triton itself targets on Hopper
    with tempfile.TemporaryDirectory() as scratch:
        src = Path(scratch) / "kernel.ptx"
        src.write_text(ptx)
        out = subprocess.run([get_ptxas(arch).path, "-v", f"--gpu-name=sm_{arch}{suffix}",
                              str(src), "-o", str(Path(scratch) / "kernel.cubin")],
                             capture_output=True, text=True, check=True)
    log = out.stdout + out.stderr
    registers = re.search(r"Used (\d+) registers", log)
    stores = re.search(r"(\d+) bytes spill stores", log)
    loads = re.search(r"(\d+) bytes spill loads", log)
    return dict(registers=int(registers.group(1)) if registers else -1,
                spill_store_bytes=int(stores.group(1)) if stores else 0,
                spill_load_bytes=int(loads.group(1)) if loads else 0)


def compile_variant(variant: Variant) -> Dict[str, object]:
    """Compile one variant to a cubin; returns its resources (raises on a compile error)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from . import kernels

    body = kernels.sru_forward_kernel if variant.kernel == "forward" else kernels.sru_backward_kernel
    fn = triton.jit(body)
    constexprs = variant.constexprs()
    signature = {name: ("constexpr" if name in constexprs else _SCALARS.get(name)
                        or variant.pointer_type(name)) for name in fn.arg_names}
    compiled = triton.compile(ASTSource(fn, signature, constexprs),
                              target=GPUTarget("cuda", variant.arch, 32),
                              options=dict(num_warps=variant.block // 32))
    if not compiled.asm.get("cubin"):
        raise RuntimeError(f"{variant.name}: triton produced no cubin")
    usage = _ptxas_usage(compiled.asm["ptx"], variant.arch)
    return dict(asdict(variant), name=variant.name, shared_bytes=int(compiled.metadata.shared),
                **usage)


def markdown(rows: List[Dict[str, object]]) -> str:
    """docs/gpu.md's table: per kernel, dtype and layout, the register range per architecture
    (over the (K, SKIP) layouts, flags and block sizes), spills and shared memory."""
    lines = ["| kernel | dtype | layout | variants | sm_80 registers | sm_90 registers "
             "| spilled bytes (variants) | shared bytes |", "|---|---|---|---:|---|---|---|---:|"]
    groups: Dict[tuple, list] = {}
    for row in rows:
        groups.setdefault((row["kernel"], row["dtype"], row["packed"]), []).append(row)
    for (kernel, dtype, packed), group in groups.items():
        regs = []
        for arch in ARCHS:
            found = [r["registers"] for r in group if r["arch"] == arch]
            regs.append(f"{min(found)}-{max(found)}" if found else "-")
        spilled = [r for r in group if r["spill_store_bytes"] or r["spill_load_bytes"]]
        spills = (", ".join(f"{r['spill_store_bytes'] + r['spill_load_bytes']} ({r['name']})"
                            for r in spilled) or "0")
        lines.append(f"| {kernel} | {dtype} | {'packed' if packed else 'padded'} | {len(group)} "
                     f"| {regs[0]} | {regs[1]} | {spills} | {max(r['shared_bytes'] for r in group)} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the representative subset")
    parser.add_argument("--markdown", action="store_true", help="print docs/gpu.md's table")
    parser.add_argument("--json", type=Path, help="also write every row to this file")
    parser.add_argument("--workers", type=int, default=1, help="compile in this many processes")
    args = parser.parse_args(argv)
    rows = compile_all(variants(args.quick), args.workers)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    print(markdown(rows) if args.markdown else "\n".join(
        f"{r['name']}: {r['registers']} registers, {r['spill_store_bytes']}+"
        f"{r['spill_load_bytes']} spill bytes, {r['shared_bytes']} shared" for r in rows))
    problems = unexpected_spills(rows)
    if problems:
        print(f"error: {'; '.join(problems[:5])}", file=sys.stderr)
        return 1
    return 0


def unexpected_spills(rows: List[Dict[str, object]]) -> List[str]:
    """Spills outside KNOWN_SPILLS, and listed spills (of compiled variants) that changed."""
    problems = []
    for row in rows:
        spilled = int(row["spill_store_bytes"]) + int(row["spill_load_bytes"])
        expected = KNOWN_SPILLS.get(row["name"], 0)
        if spilled != expected:
            problems.append(f"{row['name']} spills {spilled} bytes (expected {expected}: "
                            "sru/ops/triton/compile_check.py KNOWN_SPILLS)")
    return problems


if __name__ == "__main__":
    sys.exit(main())
