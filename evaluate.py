"""Score a trained model on a split: ``python evaluate.py run=<run dir | model file> [split=test] ...``.

The command lives in ``tasks/engine/inference/evaluate_cmd.py`` (also installed as ``sru-evaluate``); docs/inference.md.
"""
from tasks.engine.inference.evaluate_cmd import main

if __name__ == "__main__":
    main()
