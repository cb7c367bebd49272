"""The train command: ``python train.py`` and ``sru-train`` (the training loop it runs is ``training/``).

- ``runner``: the pipeline, compose -> check -> run context -> task -> fit -> test -> ``results.json``
  (``compose`` and ``run`` are what scripts, tests and task commands use instead of importing train.py);
- ``run_start``: ``RunStart``, the Hydra callback that takes the run lock and refuses a bad resume before
  Hydra writes ``.hydra/`` into the run dir;
- ``start_signals``: SIGINT / SIGTERM while Hydra starts (one line, a fresh run dir removed);
- ``command``: ``sru-train``, with the signal handler installed before any import.

This file imports nothing, so that ``command`` installs its handler before torch and Hydra load.
"""
