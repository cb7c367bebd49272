"""Use a trained model on your own input: ``python predict.py run=<run dir | model file> < inputs.txt``.

The command lives in ``tasks/engine/inference/predict_cmd.py`` (also installed as ``sru-predict``);
docs/inference.md. The signal handler (``tasks/engine/run/interrupts.py``, standard library only) is installed
before the command's module imports torch, so a Ctrl-C at any moment is one line.
"""
if __name__ == "__main__":
    from tasks.engine.run.interrupts import stop_on_signals

    stop_on_signals("predict")
    from tasks.engine.inference.predict_cmd import main

    main()
