"""Training: the one loop (``trainer.fit``), optimisers and schedules, the divergence guard, atomic
checkpoints, evaluation, loggers and curves. Imports the run and config packages and the task contract."""
