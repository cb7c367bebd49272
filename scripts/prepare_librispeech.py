"""Write jsonl manifests for LibriSpeech parts (reads the *.trans.txt files and the .flac durations).

    python scripts/prepare_librispeech.py /data/LibriSpeech --parts train-clean-100 dev-clean test-clean \\
        --out data/librispeech
    python train.py task=speech task.data.source=manifest \\
        task.data.manifests.train=data/librispeech/train-clean-100.jsonl \\
        task.data.manifests.valid=data/librispeech/dev-clean.jsonl \\
        task.data.manifests.test=data/librispeech/test-clean.jsonl

(task.data.source=librispeech task.data.librispeech.root=/data/LibriSpeech does this on first use.)
"""
from __future__ import annotations

import argparse
from pathlib import Path

from tasks.corpora.librispeech import write_librispeech_manifest


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("root", type=Path, help="the LibriSpeech folder (holding train-clean-100/ ...)")
    parser.add_argument("--parts", nargs="+", default=["train-clean-100", "dev-clean", "test-clean"])
    parser.add_argument("--out", type=Path, default=Path("data/librispeech"))
    args = parser.parse_args(argv)
    for part in args.parts:
        write_librispeech_manifest(args.root / part, args.out / f"{part}.jsonl")


if __name__ == "__main__":
    main()
