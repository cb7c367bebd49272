"""The fused CPU backend: a C++/OpenMP kernel built lazily (build.py) and called via kernel.py;
its backend entries ``padded`` (custom ops, autograd.py) and ``packed`` (packed.py); the fused
training layer (fused_layer.py); the inference paths (inference.py, stack.py) and the choice
between them (paths.py)."""
from .autograd import padded
from .build import cache_root, library_path, load_error, load_library
from .packed import packed

__all__ = ["cache_root", "library_path", "load_error", "load_library", "packed", "padded"]
