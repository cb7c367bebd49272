"""Sweeps: the Optuna study glue the sweeper and its jobs share, the storage check, what a sweep leaves in
its sweep dir, how one crashing job is recorded, and the table that collects a sweep's runs."""
