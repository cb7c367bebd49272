"""The stack path (sru/ops/cpu/stack.py + sru_stack.cpp): a plain SRU stack in inference as
one C call. It must give the general path's numbers (bit for bit above 8 rows, where both use
the same BLAS; to float rounding at or below, where its own small matmul sums in another
order), decode step by step to the full-sequence result, and notice every change of the
module that its cached plan depends on.
"""
import copy
import pickle
import threading

import pytest
import torch

from sru import SRU
from sru.ops import available_backends
from sru_helpers import randomize, decode_step_by_step

pytestmark = pytest.mark.skipif("cpu" not in available_backends(),
                                reason="the fused CPU kernel does not build here")

CONFIGS = {
    "plain": dict(),
    "k4 first layer": dict(input_size=6),
    "bidirectional": dict(hidden_size=4, bidirectional=True),
    "no skip, tanh": dict(has_skip_term=False, use_tanh=True),
    "rescale, highway bias": dict(rescale=True, highway_bias=-1.0),
    "batch first": dict(batch_first=True),
}


def _general(module, *args, **kwargs):
    with torch.enable_grad():  # grad mode: the autograd path, never the stack path
        h, c = module(*args, **kwargs)
    return h.detach(), c.detach()


def _tolerance(rows, dtype):
    if rows > 8:
        return dict(rtol=0, atol=0)
    # few rows: the matmul library may sum in another order than the general path (a float32 value of
    # ~0.2 then differs by a few ulps after two layers)
    return dict(rtol=1e-12, atol=1e-12) if dtype == torch.float64 else dict(rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("length,batch", [(1, 1), (1, 5), (5, 3)])
def test_stack_path_equals_the_general_path(name, dtype, length, batch):
    cfg = dict(input_size=8, hidden_size=8, num_layers=3, dropout=0.3)
    cfg.update(CONFIGS[name])
    rnn = randomize(SRU(**cfg)).eval().to(dtype)
    gen = torch.Generator().manual_seed(1)
    shape = (batch, length) if rnn.batch_first else (length, batch)
    x = torch.randn(*shape, cfg["input_size"], generator=gen, dtype=dtype)
    c0 = torch.randn(3, batch, rnn.output_size, generator=gen, dtype=dtype)
    mask_pad = torch.rand(shape, generator=gen) < 0.3
    for kwargs in ({}, {"c0": c0}, {"c0": c0, "mask_pad": mask_pad}):
        expected = _general(rnn, x, **kwargs)
        with torch.inference_mode():
            got = rnn(x, **kwargs)
        assert rnn._stack_plan.usable
        torch.testing.assert_close(got, expected, **_tolerance(length * batch, dtype))


@pytest.mark.parametrize("batch", [1, 32])
def test_decoding_2x512_step_by_step_equals_the_full_sequence(batch):
    """The decoding shape of docs/benchmarks.md: one step at a time, state carried. One GEMM library
    for both row counts: gemm="auto" may pick MKL for one and oneDNN for the other, which moves h by
    fp32 rounding (rel ~5e-5 with these large random weights; docs/ops.md#cpu-gemm-dispatch-sruopscpugemmpy)."""
    rnn = randomize(SRU(512, 512, num_layers=2, gemm="mkl")).eval()
    x = torch.randn(6, batch, 512, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        (h_full, c_full), (h_steps, c) = decode_step_by_step(rnn, x)
    torch.testing.assert_close(h_steps, h_full, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(c, c_full, rtol=1e-5, atol=1e-5)


def test_non_plain_stacks_keep_the_general_inference_path():
    for rnn in (SRU(8, 8, num_layers=2, layer_norm=True).eval(),
                SRU(12, 8, num_layers=2, projection_size=4).eval()):
        x = torch.randn(2, 1, rnn.input_size)
        expected = _general(rnn, x)
        with torch.no_grad():
            got = rnn(x)
        assert not rnn._stack_plan.usable
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
    training = SRU(8, 8, dropout=0.5).train()  # dropout masks to draw: never the stack path
    with torch.no_grad():
        training(torch.randn(2, 1, 8))
    assert not training._stack_plan.usable


def test_the_cached_plan_follows_changes_of_the_module():
    torch.manual_seed(0)  # its own data, whatever ran before
    rnn = randomize(SRU(8, 8, num_layers=2, rescale=True)).eval()
    x = torch.randn(1, 2, 8)

    def check(dtype=torch.float32):
        xi = x.to(dtype)
        expected = _general(rnn, xi)
        with torch.no_grad():
            got = rnn(xi)
        torch.testing.assert_close(got, expected, **_tolerance(2, dtype))

    check()
    first = rnn._stack_plan
    check()
    assert rnn._stack_plan is first  # unchanged module: the plan is reused
    rnn.double()
    check(torch.float64)
    rnn.float()
    check()
    rnn.rnn_lst[1].weight.data = torch.randn_like(rnn.rnn_lst[1].weight)  # bypasses __setattr__
    check()
    state = {k: v.clone() for k, v in rnn.state_dict().items()}
    state["rnn_lst.0.scale_x"].fill_(0.25)  # the skip scale lives in the plan
    rnn.load_state_dict(state)
    check()
    rnn.backend = "reference"
    with torch.no_grad():
        rnn(x)
    assert not rnn._stack_plan.usable


def test_pickle_and_deepcopy_with_a_cached_plan():
    rnn = randomize(SRU(8, 8, num_layers=2)).eval()
    x = torch.randn(3, 2, 8)
    with torch.no_grad():
        expected = rnn(x)
        for other in (pickle.loads(pickle.dumps(rnn)), copy.deepcopy(rnn)):
            assert "_stack_plan" not in other.__dict__
            torch.testing.assert_close(other(x), expected, rtol=0, atol=0)


def test_threads_split_columns_without_changing_numbers():
    rnn = randomize(SRU(256, 256, num_layers=2)).eval()
    x = torch.randn(1, 2, 256)
    before = torch.get_num_threads()
    try:
        with torch.no_grad():
            torch.set_num_threads(1)
            one = rnn(x)
            torch.set_num_threads(2)
            two = rnn(x)
    finally:
        torch.set_num_threads(before)
    torch.testing.assert_close(two, one, rtol=0, atol=0)


def test_concurrent_calls_from_threads_use_their_own_scratch():
    rnn = randomize(SRU(64, 64, num_layers=2)).eval()
    inputs = [torch.randn(1, 3, 64, generator=torch.Generator().manual_seed(i)) for i in range(4)]
    with torch.no_grad():
        expected = [rnn(x) for x in inputs]
    results, errors = {}, []

    def work(i):
        try:
            with torch.no_grad():
                for _ in range(200):
                    results[i] = rnn(inputs[i])
                    torch.testing.assert_close(results[i], expected[i], rtol=0, atol=0)
        except Exception as exc:  # reported below: a thread's exception is not raised here
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
