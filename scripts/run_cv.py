"""k-fold cross-validation for the classification task: ``python scripts/run_cv.py [--folds N] [--models a,b]
<train.py overrides>`` (tasks/classification/cross_validation.py)."""
from tasks.classification.cross_validation import main

if __name__ == "__main__":
    main()
