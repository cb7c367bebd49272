"""Score a trained model on a split: ``python evaluate.py run=<run dir | model file> [split=test] ...``.

The command lives in ``tasks/engine/inference/evaluate_cmd.py`` (also installed as ``sru-evaluate``);
docs/inference.md. The signal handler (``tasks/engine/run/interrupts.py``, standard library only) is installed
before the command's module imports torch, so a Ctrl-C at any moment is one line.
"""
if __name__ == "__main__":
    from tasks.engine.run.interrupts import stop_on_signals

    stop_on_signals("evaluate")
    from tasks.engine.inference.evaluate_cmd import main

    main()
