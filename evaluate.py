"""Score a trained model on a split: ``python evaluate.py run=<run dir | model file> [split=test] ...``.

The command lives in ``tasks/engine/evaluate_cmd.py`` (also installed as ``sru-evaluate``); docs/inference.md.
Only the signal handler's module is imported before it is installed (tasks/engine/inference/early_signals.py).
"""
if __name__ == "__main__":
    from tasks.engine.inference.early_signals import evaluate

    evaluate()
