"""Where the microseconds of one SRU++ decoding step go (``python -m bench.speed --decode`` prints it beside
the SRU step's profile, ``bench.decode``).

A step at one position of float32 input is (sru/srupp_decode.py, sru/srupp_decoding/one_call.py): ``decode``'s argument
checks, the plan check (``one_call.plan_for``: the guards and ``ModuleWatch.current``, the plan itself made
once per model), a row reserved in every attention layer's key/value buffer (``KeyStore.reserve``), then
``SruppStepPlan.run``: two allocations (h, c), the per-call fields and one C call (per layer the products,
the layer norms, the attention over the cache and the recurrence). Each part is timed alone here, interleaved
in rounds with the whole step, so the table reads as one budget.
"""
import ctypes
from typing import Callable, Dict, List

import torch

from bench.harness import step_budget

WHOLE = "whole step: decode(model, x, cache) under inference_mode"


def _parts(batch: int, width: int, layers: int, proj: int, context: int, device: str
           ) -> Dict[str, Callable[[], object]]:
    from sru import SRUpp
    from sru.ops.backends import cpu_decoding
    from sru.srupp_decoding import one_call
    from sru.srupp_decoding.cache import KeyStore
    from sru.srupp_decode import decode

    model = SRUpp(width, width, proj_size=proj, num_layers=layers).to(device).eval()
    gen = torch.Generator().manual_seed(batch)
    with torch.inference_mode():
        _, cache = decode(model, torch.randn(context, batch, width, generator=gen).to(device))
        x = torch.randn(batch, width, generator=gen).to(device)
        _, cache = decode(model, x, cache, max_context=context)  # builds the plan
    plan = model.__dict__[one_call.PLAN]
    if not plan.usable:
        return {}
    box = [cache]

    def whole():
        with torch.inference_mode():
            _, box[0] = decode(model, x, box[0], max_context=context)

    def bare():
        _, box[0] = decode(model, x, box[0], max_context=context)

    def reserve():  # every attention layer's row, then the frontier put back (the next step reserves it again)
        stores = [KeyStore.reserve(box[0], i, None, 1, context, context) for i in plan.attention_layers]
        for store in stores:
            store.buffer.used -= 1
        return stores

    held = [(s.buffer.key_address + s.start * s.buffer.row_bytes, s.buffer.value_address + s.start * s.buffer.row_bytes,
             s.end - s.start) for s in cache.stores if s is not None]
    c0 = cache.c
    plan.run(x, c0, held)  # this thread's argument struct
    args, ref = plan._scratch.__dict__["args"], plan._scratch.__dict__["ref"]
    h, c_last = torch.empty(batch, plan.width), torch.empty(layers, batch, plan.width)
    buffers = (h, c_last, held)  # the C call writes through the pointers: keep them alive

    def c_call():
        args.h, args.c_last = h.data_ptr(), c_last.data_ptr()
        return plan.call(ref), buffers

    # the C step's attention kernel over the same cached rows and head layout, called as the C step calls it
    kernel, heads, size = cpu_decoding.attention_kernel(), model.num_heads, proj // model.num_heads
    queries, out = torch.randn(batch, proj, generator=gen).to(device), torch.empty(batch, proj)
    strides = [(ctypes.c_int64 * 4)(proj, size, size, 1), (ctypes.c_int64 * 4)(proj, size, batch * proj, 1)]
    cached = [(k.data_ptr(), v.data_ptr(), k.size(0)) for k, v in zip(cache.keys, cache.values) if k is not None]

    def attention():
        return [kernel.sru_decode_attention(queries.data_ptr(), k, v, None, out.data_ptr(), batch, heads, 1,
                                            positions, size, strides[0], strides[1], strides[1], None,
                                            size ** -0.5, 1 if batch * heads == 1 else torch.get_num_threads())
                for k, v, positions in cached], (queries, out, cache)

    return {WHOLE: whole, "decode (no inference_mode)": bare,
            "  plan check (one_call.plan_for)": lambda: one_call.plan_for(model, x),
            "    ModuleWatch.current": plan.watch.current,
            "  cache rows (KeyStore.reserve, every attention layer)": reserve,
            "  SruppStepPlan.run": lambda: plan.run(x, c0, held),
            "    the C call (products, layer norms, attention, recurrence)": c_call,
            "    allocations (h, c)": lambda: (x.new_empty(batch, plan.width),
                                               x.new_empty(layers, batch, plan.width)),
            "    of the C call: the attention alone (decode_attention.cpp, every attention layer)": attention}


def profile(batch: int, width: int, layers: int, proj: int, context: int, device: str, timer, repeats: int,
            min_ms: float) -> List[Dict]:
    """Median µs per call of every part, interleaved in ``repeats`` rounds; ``share`` of the whole step."""
    parts = _parts(batch, width, layers, proj, context, device)
    if not parts:
        return []
    names = list(parts)

    def derived(us: Dict[str, float]) -> Dict[str, float]:
        whole = us[WHOLE]
        return {
            "inference_mode (entering and leaving it)": whole - us[names[1]],
            "rest of decode (argument checks, the new SRUppCache)":
            us[names[1]] - us[names[2]] - us[names[4]] - us[names[5]],
            "rest of the run (per-call fields, the ctypes call)": us[names[5]] - us[names[6]] - us[names[7]],
            "all but the C call": whole - us[names[6]],
        }
    return step_budget(parts, WHOLE, derived, timer, repeats, min_ms, "one C call")
