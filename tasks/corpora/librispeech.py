"""A manifest for a LibriSpeech-layout folder: <part>/<speaker>/<chapter>/<speaker>-<chapter>.trans.txt
lists "<utterance-id> TRANSCRIPT" lines, the audio is <utterance-id>.flac beside it.

    write_librispeech_manifest(Path("LibriSpeech/dev-clean"), Path("dev-clean.jsonl"))

From the shell (what ``task.data.source=librispeech`` does on first use):

    python -m tasks.corpora.librispeech /data/LibriSpeech --parts train-clean-100 dev-clean test-clean \\
        --out data/librispeech
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import List

from tasks.corpora.transcripts import normalize_transcript


def librispeech_rows(part_dir: Path) -> List[dict]:
    part_dir = Path(part_dir)
    transcripts = sorted(part_dir.rglob("*.trans.txt"))
    if not transcripts:
        raise FileNotFoundError(f"no *.trans.txt under {part_dir}: expected the LibriSpeech layout "
                                f"<part>/<speaker>/<chapter>/<speaker>-<chapter>.trans.txt with .flac files beside it")
    import soundfile

    rows = []
    for trans in transcripts:
        for n, line in enumerate(trans.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            utt_id, _, text = line.strip().partition(" ")
            audio = trans.parent / f"{utt_id}.flac"
            if not audio.is_file():
                raise FileNotFoundError(f"{trans}:{n}: lists {utt_id} but {audio} does not exist")
            rows.append({"id": utt_id, "audio": str(audio.resolve()), "duration": round(soundfile.info(str(audio)).duration, 3),
                         "text": normalize_transcript(text), "speaker": utt_id.split("-")[0]})
    return rows


def write_librispeech_manifest(part_dir: Path, manifest: Path) -> Path:
    rows = librispeech_rows(part_dir)
    manifest.parent.mkdir(parents=True, exist_ok=True)
    tmp = manifest.with_suffix(".tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    tmp.replace(manifest)
    print(f"[speech] {part_dir}: {len(rows)} utterances, "
          f"{sum(r['duration'] for r in rows) / 3600:.1f} h -> {manifest}", flush=True)
    return manifest


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
