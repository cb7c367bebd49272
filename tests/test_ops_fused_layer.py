"""The fused CPU layer (matmul + recurrence as one autograd function) against the reference.

``SRUCell`` takes this path in eager CPU training of a plain k = 3 layer; its backward adds
the skip gradient inside the backward GEMM and overwrites U and the stored states with
gradients, so here we check every gradient it returns, including a second backward through
the same graph (retain_graph=True), which must recompute what the first one overwrote.
"""
import pytest
import torch

from sru import SRU, SRUCell, forward_routes
from sru.ops import available_backends

pytestmark = pytest.mark.skipif("cpu" not in available_backends(),
                                reason="the fused CPU kernel does not build here")


def _run(module, x, c0, mask_pad, grad_h, grad_c):
    module.zero_grad()
    x = x.detach().clone().requires_grad_(True)
    c0 = None if c0 is None else c0.detach().clone().requires_grad_(True)
    h, c = module(x, c0, mask_pad=mask_pad)
    (h * grad_h).sum().backward(retain_graph=True)
    (c * grad_c).sum().backward()
    grads = [x.grad] + ([] if c0 is None else [c0.grad]) + [p.grad for p in module.parameters()]
    return h, c, grads


@pytest.mark.parametrize("bidirectional", [False, True])
@pytest.mark.parametrize("use_tanh, with_c0, with_pad", [(False, False, False),
                                                         (True, True, True)])
def test_fused_layer_matches_reference(bidirectional, use_tanh, with_c0, with_pad):
    torch.manual_seed(0)
    L, B, d = 7, 3, 5
    width = d * (2 if bidirectional else 1)
    cell = SRUCell(width, d, bidirectional=bidirectional, use_tanh=use_tanh, highway_bias=-1.0,
                   backend="cpu").double()
    with torch.no_grad():
        cell.weight_c.normal_()  # random gate weights and biases, not the init's structure
        cell.bias.normal_()
    x = torch.randn(L, B, width, dtype=torch.float64)
    c0 = torch.randn(B, width, dtype=torch.float64) if with_c0 else None
    mask_pad = (torch.arange(L).unsqueeze(1) >= torch.tensor([7, 4, 6])) if with_pad else None
    grad_h, grad_c = torch.randn(L, B, width, dtype=torch.float64), torch.randn(B, width,
                                                                               dtype=torch.float64)
    h, c, grads = _run(cell, x, c0, mask_pad, grad_h, grad_c)
    assert type(h.grad_fn).__name__ == "_LinearRecurrenceBackward"  # the fused path ran
    cell.backend = "reference"
    h_ref, c_ref, grads_ref = _run(cell, x, c0, mask_pad, grad_h, grad_c)
    assert type(h_ref.grad_fn).__name__ != "_LinearRecurrenceBackward"
    torch.testing.assert_close(h, h_ref, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(c, c_ref, rtol=1e-10, atol=1e-10)
    for got, want in zip(grads, grads_ref):
        torch.testing.assert_close(got, want, rtol=1e-9, atol=1e-10)


def test_fused_stack_with_dropout_matches_the_unfused_ops(monkeypatch):
    """float32, two layers, dropout masks (same seed for both runs): fused == custom ops."""
    L, B, d = 9, 4, 16
    model = SRU(d, d, num_layers=2, dropout=0.3, rescale=True, backend="cpu")
    x = torch.randn(L, B, d)
    grad_h = torch.randn(L, B, d)

    def run(fuse):
        model.zero_grad()
        xi = x.clone().requires_grad_(True)
        torch.manual_seed(1)  # same dropout masks in both runs
        if fuse:
            h, _ = model(xi)
        else:  # switch the fused route off: the layers run the sru:: custom ops instead
            with monkeypatch.context() as patch:
                patch.setattr(forward_routes, "fuse_layer", lambda *args: False)
                h, _ = model(xi)
        (h * grad_h).sum().backward()
        return [h, xi.grad] + [p.grad.clone() for p in model.parameters()]

    fused, unfused = run(True), run(False)
    assert type(fused[0].grad_fn).__name__ == "_LinearRecurrenceBackward"
    assert type(unfused[0].grad_fn).__name__ != "_LinearRecurrenceBackward"
    for got, want in zip(fused, unfused):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_inference_does_not_take_the_fused_path():
    cell = SRUCell(6, 6, backend="cpu")
    with torch.no_grad():
        h, _ = cell(torch.randn(3, 2, 6))
    assert h.grad_fn is None
    h, _ = cell(torch.randn(3, 2, 6))
    assert type(h.grad_fn).__name__ == "_LinearRecurrenceBackward"
