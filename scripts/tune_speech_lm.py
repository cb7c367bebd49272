"""Tune the speech task's character-LM fusion on a trained run's validation split:
``python scripts/tune_speech_lm.py RUN_DIR [--orders 4 6 8] [--weights 0.3 0.5 0.8] [--bonuses 0 1 2] [--beam 8]
[--split valid]`` (tasks/speech/lm_tuning.py)."""
from tasks.speech.lm_tuning import main

if __name__ == "__main__":
    main()
