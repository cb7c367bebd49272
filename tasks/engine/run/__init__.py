"""The run's process-wide resources, set up once per launch (``context.open_run``): signals, process group,
run directory and its lock, seed, threads, device, console. Imports the config package and the engine's
errors only."""
