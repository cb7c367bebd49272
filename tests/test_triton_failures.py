"""A Triton kernel that fails to compile or launch on a user's GPU is one line naming the layer,
the kernel variant and ``backend="reference"`` (sru/ops/triton/launch.py). The failure is
simulated: the kernels are replaced by ones that raise what Triton's driver raises, and the
rest runs in Triton's interpreter on CPU."""
import pytest
import torch
from torch.nn.utils.rnn import pack_sequence

pytest.importorskip("triton", reason="triton is not installed")

from sru import SRU, SRUCell  # noqa: E402
from sru import testing  # noqa: E402
from sru.ops.errors import TritonKernelError  # noqa: E402
import importlib  # noqa: E402

# The modules (the package's attributes of these names are its entry functions).
triton_packed = importlib.import_module("sru.ops.triton.packed")
triton_padded = importlib.import_module("sru.ops.triton.padded")

DRIVER_ERROR = ("Triton Error [CUDA]: device kernel image is invalid\n"
                "  (the rest of a long driver message)")


class BrokenKernel:
    """Indexing by a grid and calling fails as a kernel with no image for this GPU does."""

    def __getitem__(self, grid):
        def run(*args, **kwargs):
            raise RuntimeError(DRIVER_ERROR)
        return run


@pytest.fixture(autouse=True)
def interpreter():
    with testing.triton_interpreter():
        yield


def _break(monkeypatch, module, forward: bool, backward: bool):
    real_forward, real_backward = module.compiled_kernels()
    monkeypatch.setattr(module, "compiled_kernels", lambda: (BrokenKernel() if forward else real_forward,
                                                     BrokenKernel() if backward else real_backward))


def _check_message(message: str, *expected: str):
    assert "\n" not in message
    assert 'backend="reference"' in message
    assert "device kernel image is invalid" in message
    for part in expected:
        assert part in message, (part, message)


def test_forward_failure_names_layer_variant_and_fix(monkeypatch):
    _break(monkeypatch, triton_padded, forward=True, backward=False)
    cell = SRUCell(4, 4, bidirectional=True, backend="triton")
    with pytest.raises(TritonKernelError) as info:
        cell(torch.randn(3, 2, 4))
    _check_message(str(info.value), "SRUCell(4, 4, bidirectional=True",
                   "forward[float32, K=4, SKIP=2,", "hidden_size=4, directions=2")


def test_backward_failure_names_variant_and_fix(monkeypatch):
    _break(monkeypatch, triton_padded, forward=False, backward=True)
    rnn = SRU(4, 4, num_layers=1, backend="triton")
    h, _ = rnn(torch.randn(3, 2, 4))
    with pytest.raises(TritonKernelError) as info:
        h.sum().backward()
    _check_message(str(info.value), "backward[float32, K=3, SKIP=1,", "hidden_size=4")


def test_packed_failure_is_one_line_too(monkeypatch):
    _break(monkeypatch, triton_packed, forward=True, backward=False)
    rnn = SRU(4, 4, num_layers=1, backend="triton")
    batch = pack_sequence([torch.randn(3, 4), torch.randn(2, 4)])
    with pytest.raises(TritonKernelError) as info:
        rnn(batch)
    _check_message(str(info.value), "forward[float32,", "PACKED=True")


def test_the_named_fix_works(monkeypatch):
    _break(monkeypatch, triton_padded, forward=True, backward=True)
    rnn = SRU(4, 4, num_layers=1, backend="triton")
    x = torch.randn(3, 2, 4)
    with pytest.raises(TritonKernelError):
        rnn(x)
    rnn.backend = "reference"
    assert rnn(x)[0].shape == (3, 2, 4)
