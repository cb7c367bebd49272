"""The fused CPU backend: a C++/OpenMP kernel built lazily (see build.py), called via kernel.py."""
from .build import cache_root, library_path, load_error, load_library

__all__ = ["cache_root", "library_path", "load_error", "load_library"]
