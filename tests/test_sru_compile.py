"""torch.compile of a small SRU model runs and matches eager mode (forward and backward).

The fused CPU kernel is a custom op, so the whole model compiles as one graph with the
default (inductor) compiler. The reference backend is a Python loop over time that dynamo
unrolls; inductor would spend minutes generating code for it, so it is traced with
``aot_eager`` (same capture and autograd, no code generation) to keep the test fast.
"""
import pytest
import torch

from sru import SRU
from sru.ops import available_backends


class _Tagger(torch.nn.Module):
    """Embedding -> SRU -> linear: the shape of the paper's classification/LM models."""

    def __init__(self, backend):
        super().__init__()
        self.embed = torch.nn.Embedding(20, 8)
        self.rnn = SRU(8, 4, num_layers=2, bidirectional=True, layer_norm=True, backend=backend)
        self.out = torch.nn.Linear(8, 3)

    def forward(self, tokens, mask_pad):
        h, c = self.rnn(self.embed(tokens), mask_pad=mask_pad)
        return self.out(h), c


@pytest.mark.parametrize("backend, compiler, fullgraph", [
    pytest.param("cpu", "inductor", True, marks=pytest.mark.skipif(
        "cpu" not in available_backends(), reason="the fused CPU kernel does not build here")),
    ("reference", "aot_eager", False),
])
@pytest.mark.slow
def test_compiled_sru_matches_eager(backend, compiler, fullgraph):
    torch.manual_seed(0)
    model = _Tagger(backend).eval()  # eval: no random dropout masks to line up
    tokens = torch.randint(0, 20, (6, 3))
    mask_pad = torch.arange(6).unsqueeze(1) >= torch.tensor([6, 4, 5]).unsqueeze(0)

    def run(fn):
        model.zero_grad()
        logits, c = fn(tokens, mask_pad)
        (logits.square().sum() + c.sum()).backward()
        return [logits, c] + [p.grad.clone() for p in model.parameters()]

    eager = run(model)
    torch._dynamo.reset()
    compiled = run(torch.compile(model, backend=compiler, fullgraph=fullgraph))
    for want, got in zip(eager, compiled):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
