"""Sample text from a trained language model: ``python scripts/sample_lm.py RUN_DIR|MODEL_FILE [--prompt TEXT]
[--tokens 200] [--temperature 1.0] [--top-k 0] [--seed 0] [--checkpoint best|last]`` (tasks/lm/sample.py)."""
from tasks.lm.sample import main

if __name__ == "__main__":
    main()
