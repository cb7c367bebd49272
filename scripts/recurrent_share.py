"""The recurrent layers' share of a training step's CPU time: ``python scripts/recurrent_share.py
experiment=cpu/ptb_sru [--batches 8]`` (tasks/paper/recurrent_share.py)."""
from tasks.paper.recurrent_share import main

if __name__ == "__main__":
    main()
