"""Using a trained model: the loader (run dir or ``model.pt`` -> task + model) and the two commands built on
it, ``evaluate.py`` (``evaluate_cmd``) and ``predict.py`` (``predict_cmd``)."""
