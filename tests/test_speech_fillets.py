"""The Fish Fillets NG voice-pack corpus (tasks/corpora/fillets_speech.py, tasks/corpora/fillets_dialogs.py) on fixtures in the
packages' real formats: dialogue scripts written as the game writes them (dialogId / dialogStr calls, --
comments, a call over two lines, Lua escapes) and Ogg/Vorbis clips encoded here with soundfile at the
packs' 22.05 kHz."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile

from tasks.corpora.fillets_speech import (FilletsSpec, check_installed, describe, prepare_fillets_corpus,
                                  remove_shared_texts, split_levels, transcript_problem)
from tasks.corpora.fillets_dialogs import ScriptError, parse_dialogs
from tasks.corpora.transcripts import normalize_transcript
from tasks.speech.text import char_vocabulary

REAL_ROOT = Path("/usr/share/games/fillets-ng")

# level -> language -> lines of dialogs_<lang>.lua ((id, font, English, translation or None), ...)
LEVELS = {
    "barrel": {"cs": [("bar-v-videt0", "font_big", "Somebody should see this.", "To by měli vidět lidi z Greenpeace."),
                      ("bar-m-no", "font_small", "Well, you may be right.", "No, možná máš pravdu."),
                      ("bar-m-aha", "font_small", "Aha.", "Aha.")],
               "nl": [("bar-v-videt0", "font_big", "Somebody should see this.", "Iemand van Greenpeace moet dit zien."),
                      ("bar-m-no", "font_small", "Well, you may be right.", "Nou, misschien heb je gelijk.")]},
    "keys": {"cs": [("k-v-ocel", "font_big", "Steel.", "Ocel."),
                    ("k-m-aha", "font_small", "Aha.", "Aha."),
                    ("k-m-hours", "font_white", "It took %1 hours!", "Konkrétně %1 hodin!")],
             "nl": [("k-v-ocel", "font_big", "Steel.", "Staal."),
                    ("k-m-zon", "font_small", "Such a thing.", "Zo’n ruïne, hè?")]},
    "wreck": {"cs": [("w-v-vrak", "font_big", "A wreck LC-10.", "Vrak LC-10."),
                     ("w-m-kde", "font_small", "Where?", "Kde?"),
                     ("w-m-ticho", "font_small", "...", "Ticho."),
                     ("w-s-sileny", "font_statue", "Madness!", "Šílenství!")],
              "nl": [("w-m-kde", "font_small", "Where?", "Waar?")]},
    "cave": {"cs": [("c-v-tma", "font_big", "It is dark.", "Je tu tma."), ("c-v-nic", "font_big", "Nothing.", None)],
             "nl": [("c-v-tma", "font_big", "It is dark.", "Het is donker.")]},
}
NO_CLIP = {("keys", "nl", "k-m-zon")}      # a script line whose clip the pack lacks
EMPTY_CLIP = {("wreck", "cs", "w-m-ticho")}  # a clip that holds no samples


def _lua(lines) -> str:
    out = ["", "-- random texts"]
    for i, (dialog_id, font, english, text) in enumerate(lines):
        if i == 1:  # the game's files sometimes break a call over two lines
            out.append(f'dialogId("{dialog_id}", "{font}",\n    "{english}")')
        else:
            out.append(f'dialogId("{dialog_id}", "{font}", "{english}")')
        if text is not None:
            out.append(f'dialogStr("{text}")')
        out += ["", ""]
    return "\n".join(out)


def _write_ogg(path: Path, seconds: float, seed: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    n = int(22050 * seconds)
    t = np.arange(n) / 22050
    wave = 0.3 * np.sin(2 * np.pi * (200 + 50 * seed) * t) + 0.01 * np.random.default_rng(seed).standard_normal(n)
    soundfile.write(str(path), wave.astype(np.float32), 22050, format="OGG", subtype="VORBIS")


@pytest.fixture(scope="module")
def pack(tmp_path_factory) -> Path:
    """An installed-packages tree: script/<level>/dialogs_{cs,nl}.lua and sound/<level>/{cs,nl}/<id>.ogg."""
    root = tmp_path_factory.mktemp("fillets-ng")
    k = 0
    for level, langs in LEVELS.items():
        for lang, lines in langs.items():
            script = root / "script" / level / f"dialogs_{lang}.lua"
            script.parent.mkdir(parents=True, exist_ok=True)
            script.write_text(_lua(lines), encoding="utf-8")
            for dialog_id, *_ in lines:
                if (level, lang, dialog_id) in NO_CLIP:
                    continue
                ogg = root / "sound" / level / lang / f"{dialog_id}.ogg"
                if (level, lang, dialog_id) in EMPTY_CLIP:
                    ogg.parent.mkdir(parents=True, exist_ok=True)
                    soundfile.write(str(ogg), np.zeros(0, np.float32), 22050, format="OGG", subtype="VORBIS")
                else:
                    k += 1
                    _write_ogg(ogg, 0.5 + 0.1 * k, k)
    _write_ogg(root / "sound" / "cave" / "cs" / "c-x-unscripted.ogg", 0.4, 99)  # a clip no script names
    return root


def test_dialogue_script_parses_ids_fonts_lines_and_escapes(tmp_path):
    script = tmp_path / "dialogs_cs.lua"
    script.write_text('-- Init\n\ndialogId("a-v-1", "font_big", "C:\\\\WINDOWS")\ndialogStr("V adresáři C:\\\\WINDOWS \\"a\\" \\/etc")\n'
                      'dialogId("a-m-2", "font_small",\n   "Two lines.")\ndialogStr(\'Ano.\')\ndialogId("a-m-3", "font_small", "No line.")\n',
                      encoding="utf-8")
    lines = parse_dialogs(script)
    assert [(d.id, d.font, d.line) for d in lines] == [("a-v-1", "font_big", 3), ("a-m-2", "font_small", 5),
                                                       ("a-m-3", "font_small", 8)]
    assert lines[0].english == "C:\\WINDOWS" and lines[0].text == 'V adresáři C:\\WINDOWS "a" /etc'
    assert lines[1].text == "Ano." and lines[2].text == ""


@pytest.mark.parametrize("source,line,says", [
    ('dialogId("a", "font_big", "x")\ndialogStr("unterminated)\n', 2, "unterminated string"),
    ('dialogId("a", "font_big", "x")\n\ndialogStr("a" "b")\n', 3, "malformed dialogStr"),
    ('dialogId("a", "font_big")\ndialogStr("x")\n', 1, "dialogId takes 3 strings"),
    ('\n\nlocal x = 1\n', 3, "unexpected 'local'"),
    ('dialogStr("orphan")\n', 1, "without a dialogId"),
])
def test_malformed_script_is_named_with_file_and_line(tmp_path, source, line, says):
    script = tmp_path / "dialogs_nl.lua"
    script.write_text(source, encoding="utf-8")
    with pytest.raises(ScriptError, match=f"dialogs_nl.lua:{line}: .*{says}"):
        parse_dialogs(script)


def test_normalisation_keeps_the_languages_letters():
    assert normalize_transcript("Musíme je všechny pobít. Takové stvůry... é, vodu!", "cs+nl") == \
        "musíme je všechny pobít takové stvůry é vodu"
    assert normalize_transcript("ŽLUŤOUČKÝ kůň Úpěl ĎÁBELSKÉ ódy", "cs+nl") == "žluťoučký kůň úpěl ďábelské ódy"
    assert normalize_transcript("Zo’n ruïne, hè? ‘Kijk’ 's Nachts “daar”", "cs+nl") == "zo'n ruïne hè kijk 's nachts daar"
    assert normalize_transcript("Příčina") == "p ina"  # the English alphabet (other sources) has no ř, í, č
    vocab = char_vocabulary("cs+nl")
    assert vocab.stoi["<blank>"] == 0 and all(c in vocab.stoi for c in "ěščřžýáíéůúňťďóäëïöüè'")
    assert len(vocab) == len(set(vocab.itos))  # no letter twice (á, é, í, ó, ú are Czech and Dutch)


@pytest.mark.parametrize("text,why", [("", "empty line"), ("   ", "empty line"), ("Konkrétně %1 hodin!", "placeholder"),
                                      ("Vrak LC-10.", "digits"), ("Сказал „да“.", "outside the language"),
                                      ("...", "no letters"), ("Šílenství!", None)])
def test_transcript_problems(text, why):
    problem = transcript_problem(text, "cs")
    assert (problem is None) if why is None else (why in problem)


def test_split_is_by_level_and_no_text_in_two_splits():
    rows = [{"level": f"l{i % 10}", "language": "cs", "text": f"věta {i}"} for i in range(200)]
    assigned = split_levels(rows, 0.1, 0.2, seed=3)
    assert set(assigned) == {f"l{i}" for i in range(10)} and assigned == split_levels(rows, 0.1, 0.2, seed=3)
    counts = {s: sum(assigned[r["level"]] == s for r in rows) for s in ("train", "valid", "test")}
    assert counts == {"train": 140, "valid": 20, "test": 40}  # whole levels of 20 clips each
    by_split = {"train": [{"language": "cs", "text": "aha"}, {"language": "nl", "text": "au"}, {"language": "cs", "text": "ocel"}],
                "valid": [{"language": "nl", "text": "aha"}, {"language": "nl", "text": "staal"}],
                "test": [{"language": "cs", "text": "au"}, {"language": "cs", "text": "kde"}]}
    assert remove_shared_texts(by_split) == {"test": 0, "valid": 0, "train": 2}  # "au" across languages too
    assert [r["text"] for r in by_split["train"]] == ["ocel"] and len(by_split["valid"]) == 2


def test_prepare_joins_decodes_resamples_and_splits(pack, tmp_path, capsys):
    spec = FilletsSpec(root=str(pack), valid_fraction=0.2, test_fraction=0.2, seed=1)
    manifests, stats = prepare_fillets_corpus(tmp_path, spec)
    rows = {s: [json.loads(line) for line in p.read_text(encoding="utf-8").splitlines()] for s, p in manifests.items()}
    everything = [r for part in rows.values() for r in part]
    ids = {r["id"] for r in everything}
    assert "nl/keys/k-m-zon" not in ids and "cs/wreck/w-m-ticho" not in ids and "cs/keys/k-m-hours" not in ids
    assert "cs/wreck/w-v-vrak" not in ids and "cs/cave/c-v-nic" not in ids
    assert stats["dropped"] == {"line without a clip": 1, "empty audio": 1, "placeholder (%1)": 1,
                                "written with digits": 1, "empty line": 1, "clip without a script line": 1}
    assert any(e.startswith(f"{pack}/script/keys/dialogs_nl.lua:") and "k-m-zon: no clip" in e
               for e in stats["drop_examples"])  # a missing clip is named with its script file and line
    for split, part in rows.items():  # a level lies in one split only, with both its languages
        levels = {r["level"] for r in part}
        assert not any(levels & {r["level"] for r in rows[o]} for o in rows if o != split)
    texts = {s: {r["text"] for r in part} for s, part in rows.items()}
    assert not (texts["train"] & texts["test"]) and not (texts["train"] & texts["valid"]) and not stats["shared_text"]
    zon = [r for r in everything if r["id"] == "cs/barrel/bar-v-videt0"][0]
    assert zon["text"] == "to by měli vidět lidi z greenpeace" and zon["voice"] == "cs-big" and zon["language"] == "cs"
    assert zon["script"].endswith("barrel/dialogs_cs.lua:3")
    wave, sr = soundfile.read(str(manifests["train"].parent / zon["audio"]))
    assert sr == 16000 and zon["duration"] == pytest.approx(len(wave) / 16000) and abs(len(wave) / 16000 - 0.6) < 0.01
    print(describe(manifests, stats, ["cs", "nl"]))
    out = capsys.readouterr().out
    assert all(str(p) in out for p in manifests.values()) and " h, " in out
    again, _ = prepare_fillets_corpus(tmp_path, spec)  # cached: the same folder, nothing rebuilt
    assert again == manifests


def test_missing_voice_pack_names_the_apt_command(pack, tmp_path):
    with pytest.raises(FileNotFoundError, match="apt-get install -y fillets-ng-data fillets-ng-data-cs fillets-ng-data-nl"):
        check_installed(tmp_path, ["cs"])
    check_installed(pack, ["cs", "nl"])


@pytest.mark.skipif(not (REAL_ROOT / "script").is_dir(), reason="the Fish Fillets NG packages are not installed")
def test_every_installed_dialogue_script_parses():
    """The parser reads all of the real packages' scripts (what the prepare step reads)."""
    from tasks.corpora.fillets_speech import collect_clips
    rows, dropped, _ = collect_clips(REAL_ROOT)
    per_lang = {lang: sum(r["language"] == lang for r in rows) for lang in ("cs", "nl")}
    assert per_lang["cs"] > 1600 and per_lang["nl"] > 1400, per_lang


def _run_overrides(pack, cache, extra=()):
    return ["task=speech", f"task.data.fillets.root={pack}", f"task.data.cache_dir={cache}",
            "task.data.fillets.valid_fraction=0.2", "task.data.fillets.test_fraction=0.2", "task.data.fillets.seed=1",
            "model.hidden_size=16", "model.num_layers=1", "task.batch_size=4", "trainer.max_epochs=null",
            "trainer.max_steps=2", "trainer.eval_every_steps=2", "trainer.progress_bar=false", "trainer.plot=false",
            "trainer.num_threads=1", "logger=csv", "seed=0", *extra]


@pytest.mark.slow
def test_default_source_run_reports_languages_voices_and_examples(pack, run_train, tmp_path, capsys):
    """train.py's default source on the fixture packs: one cs+nl model, WER/CER per language and voice equal
    to jiwer on the written transcripts, baselines and the random test utterances printed."""
    jiwer = pytest.importorskip("jiwer")
    summary = run_train(_run_overrides(pack, tmp_path / "cache"), tmp_path / "run")
    out = capsys.readouterr().out
    test = summary["test"]
    rows = [json.loads(line) for line in (tmp_path / "run" / "transcripts_test.jsonl").read_text().splitlines()]
    refs, hyps = [r["reference"] for r in rows], [r["hypothesis"] for r in rows]
    assert test["wer"] == pytest.approx(100 * jiwer.wer(refs, hyps)) and test["cer"] == pytest.approx(100 * jiwer.cer(refs, hyps))
    for lang in ("cs", "nl"):
        part = [r for r in rows if r["id"].startswith(f"{lang}/")]
        assert part and test[f"cer_{lang}"] == pytest.approx(100 * jiwer.cer([r["reference"] for r in part],
                                                                             [r["hypothesis"] for r in part]))
    assert any(k.startswith("wer_voice_") for k in test) and test["baseline_empty_wer"] == 100.0
    assert "fillets train: " in out and " h, " in out and "random test utterances" in out and "REF: " in out
    train_texts = {json.loads(line)["text"] for line in next((tmp_path / "cache").glob("fillets-*/train.jsonl")).open()}
    assert not train_texts & set(refs)  # no test transcript in the training manifest


@pytest.mark.slow
def test_one_language_picks_its_clips(pack, run_train, tmp_path):
    run_train(_run_overrides(pack, tmp_path / "cache", ["task.data.languages=[nl]"]), tmp_path / "run")
    rows = [json.loads(line) for line in (tmp_path / "run" / "transcripts_test.jsonl").read_text().splitlines()]
    assert rows and all(r["id"].startswith("nl/") for r in rows)
    with pytest.raises(ValueError, match=r"task.data.languages\[0\]: expected one of \['cs', 'nl'\], received 'de'"):
        run_train(_run_overrides(pack, tmp_path / "cache", ["task.data.languages=[de]"]), tmp_path / "run2")


@pytest.mark.slow
def test_predict_and_evaluate_take_the_language(pack, run_train, tmp_path, capsys):
    """A cs+nl model on the fixture packs: predict.py writes the language beside each transcript (auto picks
    one of the two, language=nl decodes every file as Dutch), evaluate.py reports how often the language
    decoded in is the utterance's own, and a language the model lacks is one line (exit 2)."""
    from tasks.engine.inference.evaluate_cmd import evaluate_run
    from tasks.engine.inference.predict_cmd import main as predict_main
    run_train(_run_overrides(pack, tmp_path / "cache"), tmp_path / "run")
    wavs = sorted(str(p) for p in next((tmp_path / "cache").glob("fillets-*")).glob("wav/**/*.wav"))[:4]
    capsys.readouterr()  # the training's printout
    for language, allowed in (("auto", {"cs", "nl"}), ("nl", {"nl"})):
        with pytest.raises(SystemExit) as done:
            predict_main([f"run={tmp_path / 'run'}", f"language={language}", f"output={tmp_path / language}.jsonl",
                          *wavs])
        rows = [json.loads(line) for line in (tmp_path / f"{language}.jsonl").read_text().splitlines()]
        assert done.value.code == 0 and len(rows) == len(wavs) and {r["language"] for r in rows} <= allowed
        assert all(set(r) == {"audio", "text", "seconds", "language"} for r in rows)
    metrics = evaluate_run([f"run={tmp_path / 'run'}", "language=cs", f"out_dir={tmp_path / 'e'}"])
    test = [json.loads(line) for line in (tmp_path / "e" / "transcripts_test.jsonl").read_text().splitlines()]
    assert {r["decoded_language"] for r in test} == {"cs"}
    assert metrics["language_accuracy"] == pytest.approx(100 * sum(r["language"] == "cs" for r in test) / len(test))
    from tasks.speech.language_tools import main as language_tools
    language_tools(["identify", str(tmp_path / "run" / "model.pt")])  # each rule's share of languages right
    out = capsys.readouterr().out
    assert "3 utterances; language right: greedy-lm " in out and ", beam " in out and "greedy-masked " in out
    run_train(_run_overrides(pack, tmp_path / "cache", ["task.data.languages=[nl]"]), tmp_path / "nl")
    capsys.readouterr()
    with pytest.raises(SystemExit) as refused:
        predict_main([f"run={tmp_path / 'nl'}", "language=cs", *wavs])
    err = capsys.readouterr().err.strip().splitlines()
    assert refused.value.code == 2 and err[-1] == ("[predict] error: language=cs: this model was trained on nl; give "
                                                   "language=nl or language=auto")


@pytest.mark.slow
def test_add_languages_gives_an_older_model_its_languages(pack, run_train, tmp_path):
    """A model saved before per-language decoding (its inference state without languages) gets them from its
    own training transcripts in a new file, the weights unchanged; the old file is only read."""
    import torch

    from tasks.speech.language_tools import main as language_tools
    run_train(_run_overrides(pack, tmp_path / "cache"), tmp_path / "run")
    saved = torch.load(tmp_path / "run" / "model.pt", weights_only=True)
    languages = saved["inference"].pop("languages")
    torch.save(saved, tmp_path / "old.pt")
    language_tools(["add", str(tmp_path / "old.pt"), str(tmp_path / "new.pt")])
    new = torch.load(tmp_path / "new.pt", weights_only=True)
    assert new["inference"]["languages"] == languages and "languages" not in torch.load(tmp_path / "old.pt")["inference"]
    assert all(torch.equal(new["model"][k], saved["model"][k]) for k in saved["model"])
    with pytest.raises(SystemExit) as refused:  # never overwritten
        language_tools(["add", str(tmp_path / "old.pt"), str(tmp_path / "new.pt")])
    assert refused.value.code == 2


@pytest.mark.slow
def test_a_checkpoint_scored_on_a_file_it_cannot_rebuild_from_is_one_line(pack, run_train, tmp_path):
    """A run's checkpoint (no inference state: saved before model.pt) scored on a manifest: the vocabulary
    would be rebuilt from the training data, which file= replaces, so the refusal says so and names the fix."""
    from tasks.engine.inference.evaluate_cmd import evaluate_run
    from tasks.engine.inference.loader import InferenceInputError
    run_train(_run_overrides(pack, tmp_path / "cache"), tmp_path / "run")
    manifest = next((tmp_path / "cache").glob("fillets-*/test.jsonl"))
    (tmp_path / "run" / "model.pt").unlink()  # as while the run is still training
    with pytest.raises(InferenceInputError, match=r"saved before model.pt existed, so its vocabulary is rebuilt "
                                                   r"from the run's training data, which file=.*test.jsonl replaces "
                                                   r"\(task.data.source=manifest: .*\); score the run's own splits"):
        evaluate_run([f"run={tmp_path / 'run'}", "checkpoint=last", f"file={manifest}", f"out_dir={tmp_path / 'e'}"])
