"""ONNX Runtime for an SRU exported with ``torch.onnx.export(..., dynamo=True)`` (docs/deploy.md#onnx).

ONNX Runtime's ``Scan`` (the recurrence's loop over time) fails inside the node on a length-0 input
("Invalid dim0_offset of 0"), and a batch-0 input fails in a ``Reshape``; a wrong width or dtype
fails deep in the graph too. ``onnx_session(path)`` is ``onnxruntime.InferenceSession`` whose ``run``
checks the model's first input first, as ``sru.deploy.load_package`` and ``sru.deploy.export`` do
(sru/deploy/checks.py), and raises one ValueError naming the expected shape:

    session = sru.deploy.onnx.onnx_session("sru.onnx")
    h, c = session.run(None, {"x": x.numpy()})
"""
from pathlib import Path
from typing import Any, Dict, Optional, Sequence

from sru.deploy.checks import InputSpec

OWNER = "ONNX session"
WHY = "ONNX Runtime's Scan fails on length 0 and its Reshape on batch 0"
DTYPES = {"tensor(float)": "float32", "tensor(double)": "float64", "tensor(float16)": "float16",
          "tensor(bfloat16)": "bfloat16"}


class CheckedSession:
    """An ONNX Runtime session whose ``run`` checks the first input (the SRU's ``x``) first; everything
    else (``get_inputs``, ``get_outputs``, ...) is the session's."""

    def __init__(self, session, batch_first: bool = False):
        import torch

        first = session.get_inputs()[0]
        if len(first.shape) != 3 or not isinstance(first.shape[-1], int):
            raise ValueError(f"sru.deploy.onnx_session: the model's first input {first.name!r} has shape "
                             f"{first.shape}; expected (length, batch, input_size) with a fixed input_size, as "
                             "torch.onnx.export of an SRU writes it")
        dtype = getattr(torch, DTYPES.get(first.type, "float32"))
        self.session, self.name, self.dims = session, first.name, first.shape
        self.spec = InputSpec(first.shape[-1], batch_first, dtype, "cpu")

    def run(self, output_names: Optional[Sequence[str]], input_feed: Dict[str, Any], *args, **kwargs):
        if self.name not in input_feed:
            raise ValueError(f"{OWNER} expected an input named {self.name!r}, got {sorted(input_feed)}")
        x = input_feed[self.name]
        self.spec.check_array(OWNER, x, WHY)
        fixed = [(k, d) for k, d in enumerate(self.dims[:2]) if isinstance(d, int) and x.shape[k] != d]
        if fixed:
            raise ValueError(f"{OWNER} expected input of shape {tuple(self.dims)} (exported without dynamic_shapes), "
                             f"got {tuple(x.shape)}; export with dynamic_shapes for other sizes (docs/deploy.md#onnx)")
        return self.session.run(output_names, input_feed, *args, **kwargs)

    def __getattr__(self, name):
        if name in ("session", "name", "dims", "spec"):  # not set yet (a copy being built): no recursion
            raise AttributeError(name)
        return getattr(self.session, name)


def onnx_session(path, batch_first: bool = False, providers: Sequence[str] = ("CPUExecutionProvider",),
                 **options) -> CheckedSession:
    """``onnxruntime.InferenceSession(path, providers=...)`` that checks each ``run``'s first input.
    ``batch_first``: the exported model's layout (the ONNX file does not record it), for the messages."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"sru.deploy.onnx_session: no ONNX file at {path}; make one with "
                                "torch.onnx.export(model, (x,), path, dynamo=True) (docs/deploy.md#onnx)")
    try:
        import onnxruntime
    except ImportError:
        raise ImportError("sru.deploy.onnx_session needs onnxruntime: pip install 'sru-experiments[export]'") from None
    try:
        session = onnxruntime.InferenceSession(str(path), providers=list(providers), **options)
    except Exception as err:  # onnxruntime's own classes (InvalidProtobuf, Fail, ...) by what went wrong
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(f"sru.deploy.onnx_session: {path} could not be loaded as an ONNX model ({first}); make "
                         "one with torch.onnx.export(model, (x,), path, dynamo=True) (docs/deploy.md#onnx)") from None
    return CheckedSession(session, batch_first)
