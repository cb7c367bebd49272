"""Train and evaluate one configuration: ``python train.py task=lm model=sru [key=value ...]``.

The Hydra entry point only; the pipeline (compose -> check -> seed -> task -> fit -> test) lives in
``tasks/engine/train/runner.py`` so that scripts and tests use it without importing this file. A signal during the
imports ends the command in one line: the handler is installed first (tasks/engine/run/interrupts.py).
"""
if __name__ == "__main__":
    from tasks.engine.run.interrupts import stop_on_signals

    stop_on_signals("train")

import hydra  # noqa: E402 - after the signal handler

from tasks.engine.train.start_signals import run_app  # noqa: E402
from tasks.engine.train.runner import hydra_main, prepare_argv  # noqa: E402


@hydra.main(version_base="1.3", config_path="conf", config_name="config")
def main(cfg):
    return hydra_main(cfg)


if __name__ == "__main__":
    prepare_argv()
    run_app(main)
