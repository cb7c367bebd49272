"""Shapes every recurrence path shares: a bidirectional layer runs two directions of ``hidden_size``
units side by side, so its state and output are ``num_directions * hidden_size`` wide."""


def num_directions(bidirectional: bool) -> int:
    return 2 if bidirectional else 1


def state_width(hidden_size: int, bidirectional: bool) -> int:
    """Width of c and h for one layer: dirs * d."""
    return num_directions(bidirectional) * hidden_size
