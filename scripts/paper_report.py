"""Rebuild docs/paper.md from the committed run records: ``python scripts/paper_report.py [--records DIR]
[--out FILE] [--bench DIR]`` (tasks/paper/report.py)."""
from tasks.paper.report import main

if __name__ == "__main__":
    main()
