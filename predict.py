"""Use a trained model on your own input: ``python predict.py run=<run dir | model file> < inputs.txt``.

The command lives in ``tasks/engine/inference/predict_cmd.py`` (also installed as ``sru-predict``); docs/inference.md.
"""
from tasks.engine.inference.predict_cmd import main

if __name__ == "__main__":
    main()
