"""Synthetic copies of the training split (tasks/corpora/synthetic_copies.py): which clips get a copy and how is
a pure function of the plan; one voice pool serves both languages and leaves out the check sets' voices; the
audio is real espeak-ng speech in the clip's language; the character LMs count only the recorded transcripts."""
from __future__ import annotations

import json
import shutil
from collections import Counter
from types import SimpleNamespace

import pytest

from tasks.corpora.synthetic_copies import HELD_OUT, VOICE_POOL, plan_copies, prepare_copies
from tasks.speech.data import Utterance, read_manifest
from tasks.speech.task import SpeechRecognitionTask

LINES = {"cs": ["to by měli vidět lidi z greenpeace", "no možná máš pravdu", "je tu tma", "konkrétně pět hodin"],
         "nl": ["iemand van greenpeace moet dit zien", "nou misschien heb je gelijk", "het is donker", "staal"]}


def _utterances(n: int = 200):
    return [Utterance(id=f"{lang}/level{i % 7}/line{i}", audio=None, text=LINES[lang][i % 4], language=lang)
            for i in range(n) for lang in ("cs", "nl")]


def test_plan_is_deterministic_and_each_clip_draws_alone():
    utts = _utterances()
    plan = plan_copies(utts, 0.5, seed=3)
    assert plan == plan_copies(list(utts), 0.5, seed=3) and plan != plan_copies(utts, 0.5, seed=4)
    # a clip added in front changes no other clip's copy (each draws from its own generator)
    extra = Utterance(id="cs/new/line", audio=None, text="ahoj", language="cs")
    assert [c for c in plan_copies([extra, *utts], 0.5, seed=3) if c["source"] != extra.id] == plan
    assert 0.4 < len(plan) / len(utts) < 0.6 and plan_copies(utts, 0.0, seed=3) == []
    assert len(plan_copies(utts, 1.0, seed=3)) == len(utts)


def test_both_languages_share_one_voice_pool_without_the_check_sets_voices():
    plan = plan_copies(_utterances(400), 1.0, seed=0)
    by_language = {lang: Counter(c["variant"] for c in plan if c["language"] == lang) for lang in ("cs", "nl")}
    assert set(by_language["cs"]) == set(by_language["nl"]) == set(VOICE_POOL)
    assert all(c["voice"] == f"{c['language']}+{c['variant']}" and c["variant"] not in HELD_OUT for c in plan)
    assert all(130 <= c["espeak_speed"] <= 190 and 25 <= c["espeak_pitch"] <= 75 for c in plan)
    with pytest.raises(ValueError, match=r"\['f4', 'm6'\] are voices of the new-voice check sets"):
        plan_copies(_utterances(2), 0.5, seed=0, voices=("m1", "f4", "m6"))
    with pytest.raises(ValueError, match="names no language; espeak-ng needs one"):
        plan_copies([Utterance(id="a", audio=None, text="one two")], 0.5, seed=0)


def test_missing_espeak_is_one_line_naming_the_fix(tmp_path, monkeypatch):
    monkeypatch.setattr("shutil.which", lambda tool: None if tool == "espeak-ng" else "/usr/bin/" + tool)
    with pytest.raises(OSError, match=r"synthetic_share=0.5 needs espeak-ng \(not found\): sudo apt-get install -y "
                                      r"espeak-ng sox; or task.data.fillets.synthetic_share=0"):
        prepare_copies(_utterances(2), 0.5, seed=0, cache_root=tmp_path)
    assert not list(tmp_path.iterdir())  # nothing half-made


def test_language_models_count_only_the_recorded_transcripts():
    data = {"train": {"ref": ["a", "b", "a"], "target": [[1], [2], [1]], "language": ["cs", "nl", "cs"],
                      "kind": [None, None, "synthetic"]}}
    recorded = SpeechRecognitionTask.recorded_training(SimpleNamespace(data=data))
    assert recorded == {"ref": ["a", "b"], "target": [[1], [2]], "language": ["cs", "nl"]}


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("espeak-ng") is None or shutil.which("sox") is None,
                    reason="needs espeak-ng and sox (apt-get install espeak-ng sox)")
def test_copies_are_espeak_speech_in_their_language_written_once(tmp_path, capsys):
    import soundfile
    utts = _utterances(4)
    manifest = prepare_copies(utts, 1.0, seed=1, cache_root=tmp_path)
    rows = [json.loads(line) for line in manifest.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == len(utts) and {r["kind"] for r in rows} == {"synthetic"}
    assert [(r["copy_of"], r["text"], r["language"]) for r in rows] == [(u.id, u.text, u.language) for u in utts]
    for row in rows:
        info = soundfile.info(str(manifest.parent / row["audio"]))
        assert info.samplerate == 16000 and info.channels == 1 and info.duration == pytest.approx(row["duration"], abs=1e-3)
        assert row["voice"] == f"espeak:{row['speaker'].split('-', 1)[1]}"
    read = read_manifest(manifest)
    assert [u.kind for u in read] == ["synthetic"] * len(rows) and {u.language for u in read} == {"cs", "nl"}
    stamp = manifest.stat().st_mtime_ns
    capsys.readouterr()
    assert prepare_copies(utts, 1.0, seed=1, cache_root=tmp_path) == manifest  # the same plan: nothing redone
    assert manifest.stat().st_mtime_ns == stamp and "synthesising" not in capsys.readouterr().out
