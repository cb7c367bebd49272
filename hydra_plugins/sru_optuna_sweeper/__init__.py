"""The project's Optuna sweeper for Hydra (``hydra/sweeper=optuna``), on current Optuna; see docs/sweeps.md.

``hydra_plugins`` is a namespace package (no ``__init__.py``): Hydra imports every module under it to find
plugins, so this package keeps its imports light (Optuna and torch are imported when a sweep starts).
"""
