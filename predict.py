"""Use a trained model on your own input: ``python predict.py run=<run dir | model file> < inputs.txt``.

The command lives in ``tasks/engine/predict_cmd.py`` (also installed as ``sru-predict``); docs/inference.md.
Only the signal handler's module is imported before it is installed (tasks/engine/inference/early_signals.py).
"""
if __name__ == "__main__":
    from tasks.engine.inference.early_signals import predict

    predict()
