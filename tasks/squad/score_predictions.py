"""Score a predictions file ({question id: answer}) against a SQuAD v1.1 data file, as the official
evaluate-v1.1.py does (EM/F1 in percent over every question of the data file; unanswered ones score 0).

    python -m tasks.squad.score_predictions ~/.cache/sru-experiments/squad/wiki-generated-*/dev-v1.1.json \
        outputs/runs/<run>/predictions_valid.json
"""
from __future__ import annotations

import argparse
import json

from tasks.squad.data import load_squad_file
from tasks.squad.metrics import score


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m tasks.squad.score_predictions", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data_file")
    ap.add_argument("predictions_file")
    args = ap.parse_args(argv)
    with open(args.predictions_file, encoding="utf-8") as f:
        predictions = json.load(f)
    examples = load_squad_file(args.data_file)
    em = f1 = 0.0
    missing = 0
    for ex in examples:
        if ex.qid not in predictions:
            missing += 1
            continue
        e, f = score(predictions[ex.qid], ex.answers)
        em, f1 = em + e, f1 + f
    n = max(len(examples), 1)
    print(json.dumps({"exact_match": 100.0 * em / n, "f1": 100.0 * f1 / n, "questions": len(examples),
                      "unanswered": missing}))


if __name__ == "__main__":
    main()
