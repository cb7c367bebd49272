"""The official-SRU++ comparison cases under tests/fixtures/srupp/ (float64, tiny), written by
``scripts/make_srupp_fixtures.py``.

Each case is one ``torch.save``d dict: the official ``sru==3.0.0.dev6`` ``SRUpp`` constructor
arguments, a random state_dict (every parameter random, so that the attention's alpha, the
layer norms and the biases all take part), the forward inputs, the outputs (h, c,
saved_inputs) and the gradients of a random linear function of h and c with respect to the
inputs and every parameter. tests/test_srupp_official.py loads them into ``sru.SRUpp``.

This module must import the OFFICIAL package, not this repository's ``sru``:

    pip install --no-deps --target /tmp/sru3 sru==3.0.0.dev6
    PYTHONPATH=/tmp/sru3 python scripts/make_srupp_fixtures.py

(it compiles the official package's small CPU extension on first import; needs ninja + g++).
"""
from pathlib import Path

import torch

FIXTURES = str(Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "srupp")

# name: (SRUpp kwargs, input_size, length, batch, extra) ; extra names the inputs the case uses
CASES = {
    "padding": (dict(hidden_size=4, proj_size=4, num_layers=2, num_heads=2), 4, 5, 3,
                {"mask_pad": True}),
    "causal_memory": (dict(hidden_size=4, proj_size=4, num_layers=2, num_heads=2), 4, 4, 2,
                      {"memory": 3, "causal": True, "c0": True, "memory_mask_pad": True}),
    "layer_norm_before": (dict(hidden_size=4, proj_size=6, num_layers=2, layer_norm=True,
                               normalize_after=False), 5, 5, 2, {"causal": True}),
    "layer_norm_after": (dict(hidden_size=4, proj_size=6, num_layers=2, layer_norm=True,
                              normalize_after=True), 5, 5, 2, {"mask_pad": True}),
    "attention_every_2": (dict(hidden_size=4, proj_size=4, num_layers=4,
                               attention_every_n_layers=2), 4, 4, 2, {"causal": True}),
    "attention_last_1": (dict(hidden_size=4, proj_size=4, num_layers=3,
                              attention_last_n_layers=1), 6, 4, 2, {"mask_pad": True}),
    "bidirectional": (dict(hidden_size=3, proj_size=4, num_layers=2, num_heads=2,
                           bidirectional=True, nn_rnn_compatible_return=True), 5, 5, 3,
                      {"mask_pad": True, "c0": True}),
    "input_proj_rescale": (dict(hidden_size=4, proj_size=4, num_layers=2, rescale=True,
                                proj_input_to_hidden_first=True, highway_bias=-1.0), 7, 5, 2,
                           {"causal": True}),
    "no_attn_layer_norm": (dict(hidden_size=4, proj_size=4, num_layers=2, num_heads=2,
                                attn_layer_norm=False), 4, 5, 2, {"mask_pad": True}),
}


# 3.0 plain SRU cases (checkpoints loaded into sru.SRU via sru.sru3_checkpoint):
# name: (SRU kwargs, input_size, length, batch)
PLAIN_SRU_CASES = {
    "bi_proj_preln_rescale": (dict(hidden_size=4, num_layers=2, bidirectional=True,
                                   projection_size=3, layer_norm=True, rescale=True), 7, 5, 3),
    "uni_postln_k4": (dict(hidden_size=5, num_layers=2, layer_norm=True, normalize_after=True,
                           highway_bias=-1.0), 3, 5, 2),
}


def make_plain_sru_case(name, kwargs, input_size, length, batch, seed):
    """A 3.0 plain SRU case (padding, c0): outputs and grads of inputs and parameters."""
    import sru
    gen = torch.Generator().manual_seed(seed)
    rand = lambda *shape: torch.randn(*shape, generator=gen, dtype=torch.float64)  # noqa: E731
    model = sru.SRU(input_size, **kwargs).double().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(rand(*p.shape) * 0.5)
    lengths = torch.tensor([length - b for b in range(batch)])
    inputs = {"input": rand(length, batch, input_size).requires_grad_(),
              "c0": (rand(kwargs["num_layers"], batch, model.output_size) * 0.5).requires_grad_(),
              "mask_pad": torch.arange(length).unsqueeze(1) >= lengths.unsqueeze(0)}
    h, c = model(**inputs)
    w_h, w_c = rand(*h.shape), rand(*c.shape)
    ((h * w_h).sum() + (c * w_c).sum()).backward()
    grads = {"input": inputs["input"].grad, "c0": inputs["c0"].grad}
    grads.update({f"param.{n}": p.grad for n, p in model.named_parameters()})
    return {"name": name, "made_with": f"sru=={sru.__version__}",
            "kwargs": dict(kwargs, input_size=input_size),
            "state_dict": {k: v.clone() for k, v in model.state_dict().items()},
            "inputs": {k: v.detach().clone() for k, v in inputs.items()},
            "loss_weights": {"h": w_h, "c": w_c}, "outputs": {"h": h.detach(), "c": c.detach()},
            "grads": {k: v.detach() for k, v in grads.items()}}


def causal_mask(length: int, mem_len: int) -> torch.Tensor:
    """Additive (length, mem_len + length) mask: position t sees the memory and steps <= t."""
    full = torch.ones(length, mem_len + length, dtype=torch.bool).triu(mem_len + 1)
    return torch.zeros(full.shape, dtype=torch.float64).masked_fill(full, float("-inf"))


def make_case(name, kwargs, input_size, length, batch, extra, seed):
    import sru  # the official package (see the module docstring)
    gen = torch.Generator().manual_seed(seed)
    rand = lambda *shape: torch.randn(*shape, generator=gen, dtype=torch.float64)  # noqa: E731
    model = sru.SRUpp(input_size, **kwargs).double().eval()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(rand(*p.shape) * 0.5)
        for cell in model.rnn_lst:
            if cell.rescale:
                cell.scale_x.fill_(1.3)

    inputs = {"input": rand(length, batch, input_size).requires_grad_()}
    out_size = model.output_size
    if extra.get("c0"):
        inputs["c0"] = (rand(kwargs["num_layers"], batch, out_size) * 0.5).requires_grad_()
    if extra.get("mask_pad"):  # batch item b has length - b real steps (all > 0)
        lengths = torch.tensor([length - b for b in range(batch)])
        inputs["mask_pad"] = torch.arange(length).unsqueeze(1) >= lengths.unsqueeze(0)
    mem_len = extra.get("memory", 0)
    if mem_len:
        # memory = the saved inputs of a previous segment, as in Transformer-XL training
        # (with grad on: the official CPU inference kernel takes float32 only)
        _, _, state = model(rand(mem_len, batch, input_size))
        inputs["memory"] = [m.detach().clone().requires_grad_() for m in state["saved_inputs"]]
        if extra.get("memory_mask_pad"):
            pad = torch.zeros(mem_len, batch, dtype=torch.bool)
            pad[0, 0] = True  # the oldest memory slot of item 0 is padding
            inputs["memory_mask_pad"] = pad
    if extra.get("causal"):
        inputs["attn_mask"] = causal_mask(length, mem_len)

    h, c, state = model(**inputs)
    w_h, w_c = rand(*h.shape), rand(*c.shape)
    ((h * w_h).sum() + (c * w_c).sum()).backward()

    grads = {"input": inputs["input"].grad}
    if "c0" in inputs:
        grads["c0"] = inputs["c0"].grad
    if "memory" in inputs:
        grads.update({f"memory.{i}": m.grad for i, m in enumerate(inputs["memory"])})
    grads.update({f"param.{n}": p.grad for n, p in model.named_parameters()})
    detach = lambda t: t.detach().clone() if isinstance(t, torch.Tensor) else t  # noqa: E731
    return {
        "name": name, "made_with": f"sru=={sru.__version__}",
        "kwargs": dict(kwargs, input_size=input_size),
        "state_dict": {k: v.clone() for k, v in model.state_dict().items()},
        "inputs": {k: ([detach(m) for m in v] if isinstance(v, list) else detach(v))
                   for k, v in inputs.items()},
        "loss_weights": {"h": w_h, "c": w_c},
        "outputs": {"h": h.detach(), "c": c.detach(),
                    "saved_inputs": [t.detach() for t in state["saved_inputs"]]},
        "grads": {k: v.detach() for k, v in grads.items()},
    }
