"""SRU++'s one-position decoding step as one C call (``sru.ops.backends.cpu_srupp_step``): which SRUpp models
it takes, and the step itself; ``sru.srupp_decode.decode`` runs it for every single-position step it can, and
the reference step (its torch ops) for the rest. Both give the same h and cache up to float rounding
(tests/test_srupp_fused.py).

The layer knows its modules, the C step knows what it computes: ``step_layers`` describes each layer as a
``StepLayer`` (weights, layer norms by where they apply, heads) and ``SruppStepPlan`` says whether it takes
them (float32, affine norms, a head size of 16 / 32 / 64 / 128, an AVX-512 build). The plan is made once per
model and kept in its ``__dict__`` (left out of pickles: ``SRUpp.__getstate__``); per call only its
``watch`` is checked, and it is rebuilt when a module, parameter, storage or mode changed.

Taken: eval mode, float32 CPU input outside autocast, tracing and compile, layers whose transform is
``SRUppAttention`` or ``SRUppProjectedLinear`` with plain float32 products (no int8 weight, no bf16
precision, the GEMM library ``auto`` or ``mkl``: a layer forced to oneDNN keeps the routed reference step).
"""
from typing import List, Optional, Tuple

import torch
from torch import Tensor, nn

from sru.linear import DispatchedLinear
from sru.ops.backends import cpu_srupp_step, load_library
from sru.ops.precision import under_autocast
from sru.ops.tracing import eager_cpu
from sru.srupp_attention import SRUppAttention, SRUppProjectedLinear
from sru.srupp_decoding.cache import KeyStore, SRUppCache

PLAN = "_srupp_step_plan"  # the model's __dict__ key (SRUpp.__getstate__ drops it)


def _plain_weight(linear: nn.Module) -> Optional[Tensor]:
    """The weight of a bias-free Linear whose product is a plain float32 one, else None."""
    if type(linear) not in (nn.Linear, DispatchedLinear) or linear._parameters.get("bias") is not None:
        return None
    if isinstance(linear, DispatchedLinear) and (linear.gemm not in ("auto", "mkl")
                                                 or not linear.precision.plain_float_products):
        return None
    return linear._parameters["weight"]


def _layer(cell) -> Optional[cpu_srupp_step.StepLayer]:
    """One SRUppCell as the C step reads it, or None where its transform is not one the step computes."""
    transform, norm = cell._modules["transform_module"], cell._modules.get("layer_norm")
    pre, post = (None, norm) if cell.normalize_after else (norm, None)
    inner = transform._modules.get("layer_norm") if isinstance(transform, _TRANSFORMS) else None
    if cell.own_precision is not None:
        return None
    if isinstance(transform, SRUppAttention):
        weights = [_plain_weight(transform._modules[name]) for name in ("linear1", "linear2", "linear3")]
        z_norm, out_norm = (None, inner) if transform.normalize_after else (inner, None)
        if None in weights:
            return None
        return cpu_srupp_step.StepLayer(cell, weights[0], weights[1], weights[2], transform._parameters["alpha"],
                                        (pre, z_norm, out_norm, post), transform.num_heads)
    if isinstance(transform, SRUppProjectedLinear):
        weights = [_plain_weight(transform._modules[name]) for name in ("linear1", "linear2")]
        if None in weights:
            return None
        return cpu_srupp_step.StepLayer(cell, weights[0], None, weights[1], None, (pre, inner, None, post), 1)
    return None


_TRANSFORMS = (SRUppAttention, SRUppProjectedLinear)


def step_layers(model) -> Optional[List[cpu_srupp_step.StepLayer]]:
    """Every layer of ``model`` as a ``StepLayer``, or None where one is not a layer the step computes."""
    layers = [_layer(cell) for cell in model.rnn_lst._modules.values()]
    return None if None in layers else layers


def _drawing(model) -> List[nn.Module]:
    """The modules below the cells whose mode changes what the reference step computes: a dropout that draws,
    an attention with attn_dropout (a cell's own mode and dropouts are among its options the plan watches)."""
    return [m for m in model.modules() if (isinstance(m, nn.Dropout) and m.p > 0)
            or (isinstance(m, SRUppAttention) and m.attn_dropout > 0)]


def plan_for(model, x: Tensor) -> Optional[cpu_srupp_step.SruppStepPlan]:
    """The model's step plan when the step runs ``x`` (B, input_size) that way, else None."""
    # grad mode does not matter: decoding records no graph (the reference step runs under no_grad)
    if x.dtype is not torch.float32 or under_autocast("cpu") or not eager_cpu(x):
        return None
    plan = model.__dict__.get(PLAN)
    if plan is None or not plan.watch.current():
        layers = step_layers(model)
        w_in = model._modules.get("input_to_hidden")
        w_in = None if w_in is None else _plain_weight(w_in)
        usable = layers is not None and (w_in is not None or model._modules.get("input_to_hidden") is None)
        plan = cpu_srupp_step.SruppStepPlan(load_library() if usable else None, layers or [], w_in,
                                            model.input_size, list(model.modules()), _drawing(model))
        setattr(model, PLAN, plan)  # a plain attribute (nn.Module keeps non-tensors in __dict__)
    return plan if plan.usable else None


def decode_step(model, x: Tensor, cache: SRUppCache,
                max_context: Optional[int]) -> Optional[Tuple[Tensor, SRUppCache]]:
    """h (B, width) of one position ``x`` (B, input_size) after ``cache``, and the new cache, by the C step;
    None where it does not run them (``plan_for``; keys or c in another dtype; no BLAS symbol in this torch):
    the reference step runs instead (on the cache as it was: a row reserved here only moved its buffer's
    frontier, so the reference copies instead of appending in place)."""
    plan = model.__dict__.get(PLAN)  # the common case first: the plan is current (plan_for, inlined)
    if (x.dtype is not torch.float32 or under_autocast("cpu") or not eager_cpu(x)
            or plan is None or not plan.watch.current()):
        plan = plan_for(model, x)
    elif not plan.usable:
        plan = None
    c0, batch = cache.c, x.shape[0]
    if plan is None or c0.dtype is not torch.float32 or c0.shape != (plan.num_layers, batch, plan.width):
        return None  # a cache of other sizes: the reference step says what is wrong with it
    stores, reserved = [None] * len(cache.c), []
    for i, key_bytes in zip(plan.attention_layers, plan.key_bytes):
        store = KeyStore.reserve(cache, i, None, 1, max_context, max_context)
        buffer, first = store.buffer, store.first
        if buffer.dtype is not torch.float32 or buffer.row_bytes != batch * key_bytes:
            return None
        # the rows attended: every cached one and the step's own (the window applies from the next step)
        row = first * buffer.row_bytes
        reserved.append((buffer.key_address + row, buffer.value_address + row, store.end - first))
        stores[i] = store
    out = plan.run(x.contiguous(), c0.contiguous(), reserved)
    return None if out is None else (out[0], SRUppCache(None, None, out[1], stores))
