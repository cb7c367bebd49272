"""sru: the Simple Recurrent Unit (Lei et al., "Training RNNs as Fast as CNNs", arXiv 1709.02755).

Drop-in compatible with the official ``sru`` 2.x package (same modules, arguments and
checkpoint layout). Importing this package builds nothing: fused kernels compile lazily on
first use (see ``sru.ops``).
"""
from sru.modules import SRU, SRUCell
from sru.ops import elementwise_recurrence

__version__ = "0.1.0"

__all__ = ["SRU", "SRUCell", "elementwise_recurrence", "__version__"]
