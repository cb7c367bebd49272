"""The official SRU initialisation recipe (paper section 3.2; docs/spec.md#initialisation), step by step.

Kept apart from ``sru/modules.py`` so the recipe reads as one function; ``SRUCell.reset_parameters``
calls it.
"""
import math

import torch


@torch.no_grad()
def reset_cell_parameters(cell) -> None:
    """Initialise one ``SRUCell`` in place, exactly as the official ``sru`` 2.x package does."""
    d = cell.output_size
    cell.bias.zero_()
    cell.bias[d:] = cell.highway_bias  # b_r: biases the highway gate towards the skip input
    alpha = math.sqrt(1 + 2 * math.exp(cell.highway_bias))
    cell.set_scale_x(alpha if cell.rescale and cell.has_skip_term else 1.0)

    if cell.custom_m is None:
        # E[w] = 0, Var[w] = 1 / fan_in, so U keeps the scale of the input.
        fan_in = cell.weight.size(0)
        cell.weight.uniform_(-math.sqrt(3.0 / fan_in), math.sqrt(3.0 / fan_in))
        if cell.weight_proj is not None:
            bound = math.sqrt(3.0 / cell.weight_proj.size(0))
            cell.weight_proj.uniform_(-bound, bound)
        w = cell.weight.view(fan_in, -1, cell.hidden_size, cell.num_matrices)
        if cell.dropout > 0:  # keep the candidate's variance under the dropout mask
            w[..., 0].mul_(math.sqrt(1 - cell.dropout))
        if cell.rnn_dropout > 0:
            w.mul_(math.sqrt(1 - cell.rnn_dropout))
        if cell.layer_norm is not None:  # normalized inputs are larger: start smaller
            w.mul_(0.1)
        if cell.rescale and cell.has_skip_term and cell.num_matrices == 4:
            w[..., 3].mul_(alpha)
    elif hasattr(cell.custom_m, "reset_parameters"):
        cell.custom_m.reset_parameters()

    if cell.layer_norm is not None:
        cell.layer_norm.reset_parameters()

    if cell.v1:  # the paper's first version: no c_{t-1} term in the gates
        cell.weight_c.zero_()
        cell.weight_c.requires_grad_(False)
    else:
        if cell.weight_c_init is None:
            cell.weight_c.uniform_(-math.sqrt(3.0), math.sqrt(3.0)).mul_(math.sqrt(0.5))
        else:
            cell.weight_c.uniform_(-cell.weight_c_init, cell.weight_c_init)
        if cell.custom_m is None:  # gate pre-activations sum two terms: halve each variance
            w[..., 1].mul_(math.sqrt(0.5))
            w[..., 2].mul_(math.sqrt(0.5))
