"""Synthesise the offline speech corpus (what `python train.py task=speech` does on first use).

    python scripts/prepare_speech_offline.py                         # default spec, ~1,000 clips
    python scripts/prepare_speech_offline.py --clips-per-voice 100 --out ~/.cache/sru-experiments/speech

Prints the three manifests (train/valid/test, split by voice). Needs espeak-ng, flite, sox, festival and
the festvox-kallpc16k / festvox-us-slt-hts voices (the error says which apt-get command to run).
"""
from __future__ import annotations

import argparse

from tasks.speech.paths import default_cache_dir
from tasks.corpora.speech_synthesis import OfflineSpec, prepare_offline_corpus


def main(argv=None) -> None:
    defaults = OfflineSpec()
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=None, help="cache root (default: $SRU_DATA_DIR/speech or "
                                                    "~/.cache/sru-experiments/speech)")
    parser.add_argument("--clips-per-voice", type=int, default=defaults.clips_per_voice)
    parser.add_argument("--sentence-fraction", type=float, default=defaults.sentence_fraction)
    parser.add_argument("--sentence-pool", type=int, default=defaults.sentence_pool)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--workers", type=int, default=2, help="parallel synthesis processes")
    args = parser.parse_args(argv)
    spec = OfflineSpec(clips_per_voice=args.clips_per_voice, sentence_fraction=args.sentence_fraction,
                       sentence_pool=args.sentence_pool, seed=args.seed)
    manifests = prepare_offline_corpus(args.out or default_cache_dir(), spec, workers=args.workers)
    for split, path in manifests.items():
        print(f"{split}: {path}")


if __name__ == "__main__":
    main()
