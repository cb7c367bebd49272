"""Score a {question id: answer} predictions file against a SQuAD v1.1 file as the official evaluate-v1.1.py:
``python scripts/evaluate_squad.py <data.json> <predictions.json>`` (tasks/squad/score_predictions.py)."""
from tasks.squad.score_predictions import main

if __name__ == "__main__":
    main()
