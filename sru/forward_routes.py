"""Which route one forward of ``SRU`` or ``SRUCell`` takes: the table of routes and ``choose_route``, the one
function that picks among them (docs/ops.md#forward-routes, the specification this file follows).

A stack's forward takes one route for all its layers (``STACK``, ``PACKED``, ``INFERENCE``), or runs layer by
layer (``GENERAL``), each layer then choosing its own route (``INFERENCE`` for a lone cell, ``EXPORT``,
``FUSED``, ``GENERAL``). Every route computes the same function (tests/test_forward_routes.py); they differ
in what they can run and how fast. ``TORCHSCRIPT`` is the one route not chosen here: ``torch.jit.script``
decides it while compiling, from ``torch.jit.is_scripting()`` on the first line of each ``forward``.

Called on every forward, including one decoding step, so each guard is a flag or shape test first.
"""
from enum import Enum
from typing import Optional, Tuple

from torch import Tensor
from torch.nn.utils.rnn import PackedSequence

from sru.cell_base import StackBase
from sru.ops.backends import fuse_layer, inference_plan, stack_plan
from sru.ops.precision import under_autocast
from sru.ops.tracing import exporting


class Route(str, Enum):
    """The routes, in the order ``choose_route`` tries them (docs/ops.md#forward-routes has when each applies
    and what runs)."""

    TORCHSCRIPT = "torchscript"  # torch.jit.script compiled the module: sru/scripting/cells.py
    STACK = "stack"              # a plain stack in inference, eager CPU: one C call (sru/ops/cpu/stack.py)
    PACKED = "packed"            # PackedSequence / forward_varlen: each layer's body over a PackedLayout
    INFERENCE = "inference"      # no autograd, eager CPU: a direct kernel call per layer (sru/ops/cpu/inference.py)
    EXPORT = "export"            # torch.onnx.export / torch.export tracing: the general body, the recurrence a scan
    FUSED = "fused training"     # eager CPU training of a plain k = 3 layer: sru/ops/cpu/fused_layer.py
    GENERAL = "general"          # anything: U = x W (or custom_m), then sru.ops.elementwise_recurrence


def choose_route(module, input, c0: Optional[Tensor] = None, mask_pad: Optional[Tensor] = None,
                 layout=None) -> Tuple[Route, object]:
    """(route, plan) for one forward of ``module``: an ``SRU`` (its raw arguments) or an ``SRUCell`` (checked
    time-major input, or packed rows with their ``layout``). ``plan`` is what the route runs with (the stack
    plan, the per-layer inference arguments) or None."""
    if isinstance(module, StackBase):
        plan = stack_plan(module, input, c0, mask_pad)  # first: at one decoding step it is all there is
        if plan is not None:
            return Route.STACK, plan
        if isinstance(input, PackedSequence):
            return Route.PACKED, None
        # input_to_hidden runs before the layers: under autocast its output is no longer the input's dtype
        if type(input) is Tensor and (module.input_to_hidden is None or not under_autocast("cpu")):
            plan = inference_plan(module.rnn_lst, input)
            if plan is not None:
                return Route.INFERENCE, plan
        return Route.GENERAL, None  # layer by layer: each layer chooses below
    if layout is None:  # padded: a lone cell in inference
        plan = inference_plan((module,), input)
        if plan is not None:
            return Route.INFERENCE, plan
    if exporting():
        return Route.EXPORT, None
    if fuse_layer(module, input, c0):
        return Route.FUSED, None
    return Route.GENERAL, None
