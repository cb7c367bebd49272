"""U and V from a user's ``custom_m`` module (SRUCell.compute_UV), checked against the shapes
the recurrence needs; kept apart from sru/modules.py for its length."""
import math
from typing import Tuple

from torch import Tensor

from sru.checks import shape_of


def custom_m_UV(cell, input: Tensor) -> Tuple[Tensor, Tensor]:
    """``cell.custom_m(input)`` as (U (L, B, dirs*d*k), V): V is ``weight_c`` or, when custom_m
    returns (U, V), per-step gate weights (L, B, dirs*d*2) added to it (see compute_UV)."""
    ret = cell.custom_m(input)
    if isinstance(ret, (tuple, list)):
        if len(ret) not in (1, 2):
            raise ValueError(f"SRUCell expected custom_m to return U or (U, V), "
                             f"got a {type(ret).__name__} of {len(ret)} items")
        U, V = ret[0], (ret[1] + cell.weight_c if len(ret) == 2 else cell.weight_c)
    else:
        U, V = ret, cell.weight_c
    length, batch = input.size(0), input.size(1)
    expected_u = (length, batch, cell.output_size * cell.num_matrices)
    if U.numel() != math.prod(expected_u) or U.size(-1) != expected_u[-1]:
        raise ValueError(f"SRUCell expected custom_m's U of shape {expected_u}, "
                         f"got {shape_of(U)}")
    U = U.reshape(expected_u)
    if V.dim() > 1:
        expected_v = (length, batch, cell.output_size * 2)
        if V.numel() != math.prod(expected_v) or V.size(-1) != expected_v[-1]:
            raise ValueError(f"SRUCell expected custom_m's V of shape {expected_v}, "
                             f"got {shape_of(V)}")
        V = V.reshape(expected_v)
    return U, V
