"""sru: the Simple Recurrent Unit (Lei et al., "Training RNNs as Fast as CNNs", arXiv 1709.02755).

Drop-in compatible with the official ``sru`` 2.x package (same modules, arguments and
checkpoint layout). ``SRUpp`` / ``SRUppCell`` are SRU++ (Lei 2021, arXiv 2102.12459), drop-in
compatible with the official ``sru==3.0.0.dev6``. Importing this package builds nothing: fused
kernels compile lazily on first use (see ``sru.ops``).
"""
from sru.modules import SRU, SRUCell
from sru.quantize import quantize_dynamic, to_precision
from sru.ops import elementwise_recurrence
from sru.ops.precision import Precision
from sru.srupp import SRUpp, SRUppCell
from sru.srupp_attention import SRUppAttention, SRUppProjectedLinear
from sru.srupp_decode import SRUppCache
from sru.sru3_checkpoint import convert_sru3_state_dict

__version__ = "0.1.0"

__all__ = ["SRU", "SRUCell", "SRUpp", "SRUppCell", "SRUppAttention", "SRUppProjectedLinear",
           "SRUppCache", "Precision", "convert_sru3_state_dict", "quantize_dynamic", "to_precision",
           "elementwise_recurrence", "__version__"]
