"""The engine: the machinery every task runs on, one package per concern (docs/architecture.md):
``config/`` (conf/ tree, typed schemas, checks), ``run/`` (the run context: signals, process group, run dir
and lock, seed, threads, device), ``base`` (the task contract and the registry), ``training/`` (the loop,
optimisers, divergence guard, checkpoints, evaluation, loggers), ``sweeps/``, ``inference/`` (loader,
evaluate and predict commands), and the train command (``train/``: ``runner``, ``run_start``, ``command``).
Nothing here imports a task folder or ``tasks.common``; tasks are found by name (``base.build_task``)."""
