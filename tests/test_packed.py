"""Packed input without padded compute (sru/ops/packing.py, sru/packed.py): every backend's packed
recurrence, and SRU over a PackedSequence or cu_seqlens, equal the padded path with mask_pad
(outputs and all gradients, float64), plus the errors for bad packed input."""
import pytest
import torch
from torch.nn.utils.rnn import pack_padded_sequence

import sru
from sru import testing
from sru.ops import elementwise_recurrence
from sru.ops.packing import PackedLayout, elementwise_recurrence_packed

BACKENDS = ("reference", "cpu", "triton")


def _skip_unavailable(backend):
    reason = testing.unavailable_reason(backend)
    if reason:
        pytest.skip(reason)


def _padded_vs_packed(backend, lengths, d, bidirectional, k, has_skip_term, activation, dtype,
                      mask_c=True, seed=0):
    """(padded results, packed results): h on real tokens in packed order, c_last and the
    gradients of U, x, weight_c, bias, c0, mask_c (zeros where an input gets none)."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.tensor(lengths)
    L, B, dirs = int(lengths.max()), len(lengths), 2 if bidirectional else 1
    W = dirs * d
    device = testing.backend_device(backend)
    make = (lambda *shape: torch.randn(*shape, generator=gen, dtype=dtype).to(device))
    inputs = [make(L, B, W * k), make(L, B, W), make(2 * W), make(2 * W), make(B, W),
              (torch.rand(B, W, generator=gen, dtype=dtype) + 0.5).to(device)]
    pad = (torch.arange(L).unsqueeze(1) >= lengths.unsqueeze(0)).to(device)
    order = pack_padded_sequence(torch.arange(L * B).view(L, B), lengths, enforce_sorted=False)
    rows, sorted_idx = order.data.to(device), order.sorted_indices.to(device)
    loss_weights = make(order.data.numel(), W), make(B, W)

    def run(packed: bool):
        leaves = [t.clone().requires_grad_() for t in inputs]
        U, x, wc, bias, c0, mc = leaves
        mc = mc if mask_c else None
        options = dict(bidirectional=bidirectional, has_skip_term=has_skip_term, scale_x=0.7,
                       activation=activation, mask_c=None, backend=backend)
        with testing.triton_interpreter(backend):
            if packed:
                pick = (lambda t: t.reshape(L * B, -1).index_select(0, rows))
                options["mask_c"] = None if mc is None else mc.index_select(0, sorted_idx)
                h, c = elementwise_recurrence_packed(pick(U), pick(x), wc, bias,
                                                     c0.index_select(0, sorted_idx), d,
                                                     order.batch_sizes, **options)
            else:  # the caller's batch order; h and c put in the packed / sorted order
                options["mask_c"] = mc
                h, c = elementwise_recurrence(U, x, wc, bias, c0, d, mask_pad=pad, **options)
                h, c = h.reshape(L * B, -1).index_select(0, rows), c.index_select(0, sorted_idx)
            loss = (h * loss_weights[0]).sum() + (c * loss_weights[1]).sum()
            loss.backward()
        grads = [torch.zeros_like(t) if t.grad is None else t.grad for t in leaves]
        return [h.detach(), c.detach(), *grads]

    return run(False), run(True)


CASES = {  # awkward sizes: lengths with ties, 1 and the maximum; odd hidden sizes
    "uni-k3": dict(lengths=[4, 7, 1, 7, 2], d=5, bidirectional=False, k=3, has_skip_term=True,
                   activation="none"),
    "bi-k3-tanh": dict(lengths=[3, 6, 6, 1], d=3, bidirectional=True, k=3, has_skip_term=True,
                       activation="tanh"),
    "bi-k4": dict(lengths=[2, 5, 1], d=4, bidirectional=True, k=4, has_skip_term=True,
                  activation="none"),
    "uni-k4-noskip": dict(lengths=[1, 3], d=2, bidirectional=False, k=4, has_skip_term=False,
                          activation="tanh", mask_c=False),
    "bi-k3-noskip-one-seq": dict(lengths=[5], d=3, bidirectional=True, k=3, has_skip_term=False,
                                 activation="none"),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", list(CASES))
def test_packed_recurrence_equals_padded_float64(backend, case):
    _skip_unavailable(backend)
    padded, packed = _padded_vs_packed(backend, dtype=torch.float64, **CASES[case])
    names = ("h", "c_last", "grad U", "grad x", "grad weight_c", "grad bias", "grad c0",
             "grad mask_c")
    for name, want, got in zip(names, padded, packed):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10, msg=name)


@pytest.mark.parametrize("backend", ("cpu",))
def test_packed_kernel_float32_vector_steps_and_threads(backend):
    """float32 k = 3 takes the AVX2 steps (d = 37: vectors plus a tail), the grouped walk
    (unidirectional) and several threads (L*B*D >= 32K elements)."""
    _skip_unavailable(backend)
    for bidirectional in (False, True):
        padded, packed = _padded_vs_packed(backend, [40, 17, 40, 3, 29, 1, 38, 12, 25], d=37,
                                           bidirectional=bidirectional, k=3, has_skip_term=True,
                                           activation="tanh", dtype=torch.float32)
        for want, got in zip(padded, packed):
            torch.testing.assert_close(got, want, rtol=2e-4, atol=2e-4)


MODULES = {
    "bi-plain": dict(bidirectional=True),
    "uni-k4-first": dict(bidirectional=False, rescale=True),
    "bi-proj-norm": dict(bidirectional=True, projection_size=3, layer_norm=True),
    "uni-tanh-post-norm": dict(use_tanh=True, layer_norm=True, normalize_after=True),
    "bi-rnn-compatible": dict(bidirectional=True, nn_rnn_compatible_return=True,
                              proj_input_to_hidden_first=True),
}


@pytest.mark.parametrize("backend", [  # interpreted Triton: seconds per stack
    "reference", "cpu", pytest.param("triton", marks=pytest.mark.slow)])
@pytest.mark.parametrize("config", list(MODULES))
def test_sru_packed_sequence_equals_mask_pad(backend, config):
    """SRU on a PackedSequence (unsorted lengths, c0 in the caller's order) equals SRU on the
    padded batch with mask_pad: h, c and the gradients of input, c0 and every parameter."""
    _skip_unavailable(backend)
    device = testing.backend_device(backend)
    torch.manual_seed(0)
    rnn = sru.SRU(6, 4, num_layers=3, backend=backend, **MODULES[config]).double().to(device)
    lengths = torch.tensor([3, 7, 1, 7, 5])
    L, B = 7, 5
    x = torch.randn(L, B, 6, dtype=torch.float64, device=device)
    c0 = torch.randn(3, B, rnn.output_size, dtype=torch.float64, device=device)
    pad = (torch.arange(L).unsqueeze(1) >= lengths.unsqueeze(0)).to(device)

    def run(packed):
        xi, ci = x.clone().requires_grad_(), c0.clone().requires_grad_()
        with testing.triton_interpreter(backend):
            if packed:
                h, c = rnn(pack_padded_sequence(xi, lengths, enforce_sorted=False), ci)
                h = h.data
            else:
                h, c = rnn(xi, ci, mask_pad=pad)
                h = pack_padded_sequence(h, lengths, enforce_sorted=False).data
            loss = h.pow(2).sum() + c.pow(3).sum()
            grads = torch.autograd.grad(loss, [xi, ci, *rnn.parameters()])
        return [h.detach(), c.detach(), *grads]

    for want, got in zip(run(False), run(True)):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)


def test_sru_packed_inference_and_dropout_equal_padded():
    """No-grad inference (the kernel without the c history) and, with sorted lengths and the
    same seed, training-mode dropout (masks drawn per sequence, in the same order)."""
    rnn = sru.SRU(5, 3, num_layers=2, bidirectional=True, dropout=0.3, rnn_dropout=0.2).double()
    lengths = torch.tensor([6, 4, 4, 1])
    x = torch.randn(6, 4, 5, dtype=torch.float64)
    pad = torch.arange(6).unsqueeze(1) >= lengths.unsqueeze(0)
    for training in (False, True):
        rnn.train(training)
        with torch.set_grad_enabled(training):
            torch.manual_seed(3)
            h, c = rnn(x, mask_pad=pad)
            torch.manual_seed(3)
            hp, cp = rnn(pack_padded_sequence(x, lengths))
        torch.testing.assert_close(hp.data, pack_padded_sequence(h, lengths).data, rtol=1e-10, atol=1e-10)
        torch.testing.assert_close(cp, c, rtol=1e-10, atol=1e-10)


def test_forward_varlen_equals_padded():
    rnn = sru.SRU(4, 3, num_layers=2, bidirectional=True).double()
    lengths = [2, 5, 1, 5]
    x = torch.randn(5, 4, 4, dtype=torch.float64)
    c0 = torch.randn(2, 4, 6, dtype=torch.float64)
    pad = torch.arange(5).unsqueeze(1) >= torch.tensor(lengths).unsqueeze(0)
    h, c = rnn(x, c0, mask_pad=pad)
    tokens = torch.cat([x[:n, b] for b, n in enumerate(lengths)]).requires_grad_()
    cu_seqlens = torch.tensor([0, 2, 7, 8, 13], dtype=torch.int32)
    hv, cv = rnn.forward_varlen(tokens, cu_seqlens, c0)
    torch.testing.assert_close(hv, torch.cat([h[:n, b] for b, n in enumerate(lengths)]))
    torch.testing.assert_close(cv, c)
    hv.sum().backward()
    assert tokens.grad.shape == tokens.shape and tokens.grad.abs().sum() > 0


def test_custom_m_falls_back_to_padding():
    """A custom_m module sees (L, B, d) tensors, so such a stack pads (with mask_pad) instead."""
    rnn = sru.SRU(4, 4, num_layers=2, custom_m=torch.nn.Linear(4, 12, bias=False)).double()
    lengths = torch.tensor([3, 1])
    x = torch.randn(3, 2, 4, dtype=torch.float64)
    h, c = rnn(x, mask_pad=torch.arange(3).unsqueeze(1) >= lengths.unsqueeze(0))
    hp, cp = rnn(pack_padded_sequence(x, lengths))
    torch.testing.assert_close(hp.data, pack_padded_sequence(h, lengths).data)
    torch.testing.assert_close(cp, c)
    with pytest.raises(ValueError, match="custom_m"):
        rnn.forward_varlen(x[:, 0], torch.tensor([0, 3]))


def test_packed_input_errors_name_the_fix():
    rnn = sru.SRU(4, 3)
    packed = pack_padded_sequence(torch.randn(3, 2, 4), torch.tensor([3, 2]))
    with pytest.raises(ValueError, match="mask_pad=None"):
        rnn(packed, mask_pad=torch.zeros(3, 2))
    with pytest.raises(ValueError, match=r"c0 of shape \(num_layers, batch"):
        rnn(packed, torch.zeros(1, 2, 3))
    with pytest.raises(ValueError, match="drop empty"):
        rnn.forward_varlen(torch.randn(5, 4), torch.tensor([0, 2, 2, 5]))
    with pytest.raises(ValueError, match="end at the number of tokens"):
        rnn.forward_varlen(torch.randn(5, 4), torch.tensor([0, 2, 4]))
    with pytest.raises(ValueError, match="non-increasing"):
        PackedLayout(torch.tensor([1, 2]))
    with pytest.raises(ValueError, match="per-step gate"):
        elementwise_recurrence_packed(torch.randn(3, 9), torch.randn(3, 3),
                                      torch.randn(3, 1, 6), torch.randn(6), None, 3,
                                      torch.tensor([2, 1]))


def test_packed_matmuls_cover_real_tokens_only():
    """Every matrix product of a packed forward + backward has N = sum(lengths) rows (or
    reduces over them), never the L*B of the padded batch."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class MatmulShapes(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.shapes = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func in (torch.ops.aten.mm.default, torch.ops.aten.addmm.default):
                self.shapes.append([tuple(a.shape) for a in args if isinstance(a, torch.Tensor)])
            return func(*args, **(kwargs or {}))

    rnn = sru.SRU(6, 4, num_layers=2, bidirectional=True)  # k = 4 then k = 3 (fused layer)
    lengths = torch.tensor([9, 2, 5, 1])
    packed = pack_padded_sequence(torch.randn(9, 4, 6, requires_grad=True), lengths,
                                  enforce_sorted=False)
    log = MatmulShapes()
    with log:
        h, c = rnn(packed)
        (h.data.sum() + c.sum()).backward()
    tokens, padded = int(lengths.sum()), 9 * 4
    assert log.shapes, "no matrix product was seen"
    for shapes in log.shapes:
        dims = {d for shape in shapes for d in shape}
        assert tokens in dims and padded not in dims, shapes
