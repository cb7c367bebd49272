"""Deprecated: the CPU backend's custom ops moved to ``sru.ops.cpu.autograd`` (the backend entry
is ``sru.ops.cpu.padded``). Re-exported for one release."""
import warnings

from .cpu.autograd import (NO_SKIP, SKIP_FROM_U, SKIP_SCALED_X, _library, padded,  # noqa: F401
                           recurrence_bwd, recurrence_fwd)
from .spec import flat_entry

elementwise_recurrence_cpu = flat_entry(padded, "elementwise_recurrence_cpu")

warnings.warn("sru.ops.autograd is deprecated and will be removed in the next release: use "
              "sru.ops.cpu.autograd (or sru.ops.elementwise_recurrence(..., backend='cpu'))",
              DeprecationWarning, stacklevel=2)
