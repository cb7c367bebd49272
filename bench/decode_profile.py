"""Where the microseconds of one SRU decoding step go (``python -m bench.speed --decode`` prints it).

A step of a plain stack in inference is: ``nn.Module.__call__``, ``SRU.forward``'s first tests (scripting,
tracing), the stack path's entry checks (``sru.ops.cpu.paths.stack_inference``: grad mode, autocast and
eager guards, shapes, the cached plan's validity and GEMM route), two output allocations and one C call
(the matmuls and the recurrence of every layer). Each part is timed alone here, the parts interleaved
in rounds with the whole step, so the table reads as one budget: the parts' medians against the
whole's, with the remainder (argument filling, ``contiguous``, the call's Python frames) left over.

Routing decisions are made once per model: the plan (the C layer array, the route) is cached on the
module and only *checked* per call (``StackPlan.current``: one tuple compare over the cells' state and
parameter identities; ``StackPlan.gemm_is_mkl``: a dict hit). Those two checks are rows here.
"""
import ctypes
from typing import Callable, Dict, List

import torch

from bench.harness import calls_per_sample, interleaved, markdown_table, summarize


def _parts(module, x: torch.Tensor, c0: torch.Tensor) -> Dict[str, Callable[[], object]]:
    """The step and each of its parts as a no-argument function, all under inference_mode."""
    from sru.ops.cpu import paths
    from sru.ops.cpu.stack import StackArgs

    with torch.inference_mode():
        module(x, c0)  # builds and caches the plan
    plan = module.__dict__["_stack_plan"]
    cells = list(module.rnn_lst._modules.values())
    rows = x.shape[0] * x.shape[1]
    h = x.new_empty(x.shape[0], x.shape[1], plan.width)
    c_last = x.new_empty(plan.num_layers, x.shape[1], plan.width)
    workspace = x.new_empty(rows * plan.per_row)
    args = StackArgs(layers=plan.layers, num_layers=plan.num_layers, x=x.data_ptr(), c0=c0.data_ptr(),
                     h=h.data_ptr(), c_last=c_last.data_ptr(), workspace=workspace.data_ptr(),
                     length=x.shape[0], batch=x.shape[1], num_threads=torch.get_num_threads())
    ref = ctypes.byref(args)
    buffers = (h, c_last, workspace)  # the C call writes through the pointers: keep them alive

    def c_call():
        return plan.call(ref), buffers

    def inference(fn):
        def run():
            with torch.inference_mode():
                fn()
        return run

    width, layers = plan.width, plan.num_layers
    return {
        "whole step: module(x, c)": inference(lambda: module(x, c0)),
        "SRU.forward (no nn.Module.__call__)": inference(lambda: module.forward(x, c0)),
        "stack path (paths.stack_inference)": inference(lambda: paths.stack_inference(module, x, c0, None)),
        "grad / autocast / eager guards": inference(lambda: (torch.is_grad_enabled(), paths._eager_cpu(x))),
        "plan check (StackPlan.current)": inference(lambda: plan.current(cells, x.dtype)),
        "GEMM routing (StackPlan.gemm_is_mkl)": inference(lambda: plan.gemm_is_mkl(rows)),
        "allocations (h, c)": inference(lambda: (x.new_empty(x.shape[0], x.shape[1], width),
                                                 x.new_empty(layers, x.shape[1], width))),
        "the C call (matmuls + recurrence)": inference(c_call),
    }


def profile(module, x: torch.Tensor, c0: torch.Tensor, timer, repeats: int, min_ms: float) -> List[Dict]:
    """Median µs per call of every part, interleaved in ``repeats`` rounds; ``share`` of the whole step."""
    parts = _parts(module, x, c0)
    numbers = {name: calls_per_sample(fn, timer, min_ms, 50, least=20) for name, fn in parts.items()}
    samples = interleaved(parts, timer, repeats, numbers)
    us = {name: summarize(samples[name])["median_ms"] * 1e3 for name in parts}
    whole = us["whole step: module(x, c)"]
    # the nesting: module() > forward() > stack_inference() > its checks, allocations and the C call
    derived = {
        "nn.Module.__call__": whole - us["SRU.forward (no nn.Module.__call__)"],
        "SRU.forward before the stack path": us["SRU.forward (no nn.Module.__call__)"]
        - us["stack path (paths.stack_inference)"],
        "rest of the stack path (arguments, contiguous, frames)": us["stack path (paths.stack_inference)"]
        - sum(us[k] for k in list(parts)[3:]),
    }
    rows = [{"part": name, "us": value, "share": value / whole} for name, value in us.items()]
    rows += [{"part": f"= {name}", "us": value, "share": value / whole} for name, value in derived.items()]
    return rows


def markdown(profiles: Dict[int, List[Dict]]) -> str:
    """One table: a row per part, a column per batch size."""
    batches = list(profiles)
    parts = [r["part"] for r in profiles[batches[0]]]
    cells = [[part] + [f"{profiles[b][i]['us']:.1f} ({profiles[b][i]['share']:.0%})" for b in batches]
             for i, part in enumerate(parts)]
    head = ("Where one step's µs go (each part timed alone, interleaved with the whole step; median µs, "
            "share of the whole; rows with '=' are differences of the rows above)")
    return head + "\n\n" + markdown_table(["part"] + [f"B = {b}" for b in batches], cells)
