"""Deprecated: the argument checks moved to ``sru.checks`` and the choice of CPU execution path
to ``sru.ops.cpu.paths``. Re-exported from both for one release."""
import warnings

from sru.checks import *  # noqa: F401,F403
from sru.checks import LOW_PRECISION, shape_of  # noqa: F401
from sru.ops.cpu.paths import (_eager_cpu, fuse_layer, inference_plan,  # noqa: F401
                               run_inference_path, stack_inference)

warnings.warn("sru.dispatch is deprecated and will be removed in the next release: import the "
              "checks from sru.checks and the CPU paths from sru.ops.cpu.paths",
              DeprecationWarning, stacklevel=2)
