"""Using a trained model: the loader (run dir or ``model.pt`` -> task + model) and the two commands built on
it, ``evaluate.py`` (``evaluate_cmd``) and ``predict.py`` (``predict_cmd``).

``sru-evaluate`` / ``sru-predict`` (pyproject.toml) enter below, as ``evaluate.py`` / ``predict.py`` do: the
signal handler first, then the command's module (torch and the rest), so that this package stays cheap to
import."""
from tasks.engine.run.interrupts import stop_on_signals


def evaluate() -> None:
    """``sru-evaluate``."""
    stop_on_signals("evaluate")
    from tasks.engine.inference.evaluate_cmd import main
    main()


def predict() -> None:
    """``sru-predict``."""
    stop_on_signals("predict")
    from tasks.engine.inference.predict_cmd import main
    main()
