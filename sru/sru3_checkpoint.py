"""Load the official ``sru`` 3.0 (``3.0.0.dev6``) plain ``SRU`` checkpoints into ``sru.SRU``.

3.0 moved each layer's weight into a ``transform_module``: an ``nn.Linear`` (weight stored
(out, in)) or, with ``projection_size``, ``nn.Sequential(Linear(in, p), Linear(p, out))``. Our
``SRU`` keeps the 2.x layout (``weight`` (in, out), ``weight_proj`` (in, p)); the columns are in
the same (dirs, hidden, k) order, so converting is a transpose per matrix:

    rnn_lst.{i}.transform_module.weight    -> rnn_lst.{i}.weight       (.t())
    rnn_lst.{i}.transform_module.0.weight  -> rnn_lst.{i}.weight_proj  (.t())
    rnn_lst.{i}.transform_module.1.weight  -> rnn_lst.{i}.weight       (.t())

Every other key (weight_c, bias, scale_x, layer_norm.*, input_to_hidden.weight) is the same.
Build the ``SRU`` with the 3.0 model's arguments; two 3.0 defaults differ from 2.x and so from
ours: ``SRUCell(normalize_after=True)`` (the ``SRU`` stack's default is False in both) and
``amp_recurrence_fp16=True`` (pass it if the model was trained under fp16 autocast that way).
Our cell drops a ``projection_size`` that would not shrink the matmul (2.x rule); 3.0 keeps
it, so such a checkpoint is refused by ``load_state_dict(strict=True)`` (unexpected
``weight_proj``) rather than loaded wrongly. Tested in tests/test_srupp_official.py.
"""
import re
from typing import Dict

from torch import Tensor

_TRANSFORM = re.compile(r"^(.*rnn_lst\.\d+\.)transform_module\.(?:(0|1)\.)?weight$")


def convert_sru3_state_dict(state_dict: Dict[str, Tensor]) -> Dict[str, Tensor]:
    """A 3.0 ``SRU`` state_dict in the layout ``sru.SRU.load_state_dict`` takes."""
    converted = {}
    for key, value in state_dict.items():
        match = _TRANSFORM.match(key)
        if match is None:
            converted[key] = value
            continue
        prefix, index = match.groups()
        name = "weight_proj" if index == "0" else "weight"
        converted[prefix + name] = value.t().contiguous()
    return converted
