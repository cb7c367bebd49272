"""``sru-train``: ``python train.py`` for installed (non-checkout) users, with SIGINT / SIGTERM handled from its
first instruction, as ``sru-evaluate`` and ``sru-predict`` (tasks/engine/run/interrupts.py): this
module imports nothing at its top, so the handler is installed before torch and Hydra load."""


def main() -> None:
    from tasks.engine.run.interrupts import stop_on_signals

    stop_on_signals("train")
    from tasks.engine.train.runner import cli

    cli()
