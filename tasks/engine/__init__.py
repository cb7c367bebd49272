"""The generic machinery every task runs on: runner (compose -> run), trainer, evaluation, checkpoints,
distributed setup, loggers, signals, run lock, divergence guard, config schemas and their checks.
Nothing here imports a task folder or ``tasks.common``; tasks are found by name (``registry``)."""
