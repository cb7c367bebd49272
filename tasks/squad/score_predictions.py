"""Score a predictions file ({question id: answer}) against a SQuAD v1.1 data file, as the official
evaluate-v1.1.py does (EM/F1 in percent over every question of the data file; unanswered ones score 0).

    python -m tasks.squad.score_predictions ~/.cache/sru-experiments/squad/wiki-generated-*/dev-v1.1.json \
        outputs/runs/<run>/predictions_valid.json
    python -m tasks.squad.score_predictions tasks/squad/human_report-v1.1.json answers.json --by-kind

``--by-kind`` adds EM/F1 per question kind (question_kinds.py: measures, time boundaries, places by kind, works
and events, other) and per id prefix (the report half: "human" = the 81 questions of the old check set,
"human-report" = the 150 new ones).
"""
from __future__ import annotations

import argparse
import json
from typing import Dict, List

from tasks.squad.data import load_squad_file
from tasks.squad.metrics import score
from tasks.squad.question_kinds import question_kind


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m tasks.squad.score_predictions", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data_file")
    ap.add_argument("predictions_file")
    ap.add_argument("--by-kind", action="store_true", help="also EM/F1 per question kind and per id prefix")
    args = ap.parse_args(argv)
    with open(args.predictions_file, encoding="utf-8") as f:
        predictions = json.load(f)
    examples = load_squad_file(args.data_file)
    groups: Dict[str, List[float]] = {}  # group -> [questions, EM sum, F1 sum]
    missing = 0
    for ex in examples:
        missing += ex.qid not in predictions
        e, f = score(predictions[ex.qid], ex.answers) if ex.qid in predictions else (0.0, 0.0)
        names = ["all"] + ([f"kind: {question_kind(ex.question)}", f"ids: {ex.qid.rsplit('-', 1)[0]}"]
                           if args.by_kind else [])
        for name in names:
            g = groups.setdefault(name, [0, 0.0, 0.0])
            g[0], g[1], g[2] = g[0] + 1, g[1] + e, g[2] + f
    n, em, f1 = groups.get("all", [0, 0.0, 0.0])
    out = {"exact_match": 100.0 * em / max(n, 1), "f1": 100.0 * f1 / max(n, 1), "questions": len(examples),
           "unanswered": missing}
    if args.by_kind:
        out["groups"] = {name: {"exact_match": round(100.0 * g[1] / g[0], 2), "f1": round(100.0 * g[2] / g[0], 2),
                                "questions": g[0]} for name, g in sorted(groups.items()) if name != "all"}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
