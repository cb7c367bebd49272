"""Per-language decoding of the speech task (tasks/speech/languages.py): alphabets and character LMs from each
language's own transcripts, ``language=cs|nl|auto`` of predict.py / evaluate.py, and the automatic
identification on the real Czech and Dutch lines of the voice packs.

The identification tests give the decoder CTC outputs that cannot tell spelling apart (each spoken letter
is as likely written plain as with a diacritic, or as its other-language spelling), the failure of the
shared decoder ("ik vej clíc"): only the language's alphabet and LM can then pick the transcript."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from tasks.corpora.transcripts import normalize_transcript
from tasks.engine.inference.options import OptionError, command_options, parse_options
from tasks.speech.languages import AUTO, DecodeSettings, LanguageDecoders
from tasks.speech.text import char_vocabulary

REAL_ROOT = Path("/usr/share/games/fillets-ng")
VOCAB = char_vocabulary("cs+nl")
# what a letter may be heard as: the shared model's confusions between the two spellings
CONFUSED = {"a": "á", "á": "a", "e": "ě", "ě": "e", "é": "e", "i": "í", "í": "i", "u": "ů", "ů": "u", "y": "ý",
            "ý": "y", "s": "š", "š": "s", "c": "č", "č": "c", "r": "ř", "ř": "r", "z": "ž", "ž": "z", "o": "ó",
            "j": "y", "v": "w", "w": "v", "g": "h", "h": "g", "k": "c", "t": "ť", "ť": "t", "d": "ď", "n": "ň"}


@pytest.fixture(scope="module")
def real_lines():
    """The voice packs' real lines by split: levels of 30% of the lines held out, as the corpus splits them."""
    if not (REAL_ROOT / "script").is_dir():
        pytest.skip("the voice packs are not installed (apt-get install fillets-ng-data fillets-ng-data-cs "
                    "fillets-ng-data-nl)")
    from tasks.corpora.fillets_speech import collect_clips, split_levels

    rows, _, _ = collect_clips(REAL_ROOT)
    levels = split_levels(rows, 0.0, 0.3, seed=25)
    out = {"train": [], "test": []}
    for r in rows:
        text = normalize_transcript(r["raw_text"], "cs+nl")
        if text:
            out["train" if levels[r["level"]] == "train" else "test"].append((r["language"], text))
    return out


@pytest.fixture(scope="module")
def decoders(real_lines):
    train = real_lines["train"]
    return LanguageDecoders.fit([VOCAB.encode(list(t)) for _, t in train], [lang for lang, _ in train], 8, len(VOCAB))


def heard(text: str) -> torch.Tensor:
    """CTC log-probabilities (T, V) of ``text``: each letter then a blank frame; a confusable letter is as
    likely written as its confusion (55 / 40), the rest of the mass on other labels."""
    rows = []
    for ch in text:
        p = torch.full((len(VOCAB),), 1e-7)
        p[VOCAB.stoi[ch]] = 0.55
        p[VOCAB.stoi[CONFUSED.get(ch, ch)]] += 0.40
        blank = torch.full((len(VOCAB),), 1e-7)
        blank[0] = 0.95
        rows += [p / p.sum(), blank / blank.sum()]
    return torch.stack(rows).log()


def test_alphabets_are_each_languages_own_letters(decoders):
    letters = {name: {VOCAB.itos[i] for i in d.labels} for name, d in decoders.by_language.items()}
    assert decoders.names == ["cs", "nl"]
    assert set("řěůšč") <= letters["cs"] and not set("řěůšč") & letters["nl"]
    assert {" ", "e", "n"} <= letters["nl"] and len(letters["nl"]) < len(letters["cs"])
    # each LM knows its language: "het" is likelier after Dutch than after Czech training
    het = VOCAB.encode(list("het is"))
    assert decoders.by_language["nl"].lm.sequence_log_prob(het) > decoders.by_language["cs"].lm.sequence_log_prob(het) + 5


@pytest.mark.parametrize("beam", [None, 4])
def test_auto_identifies_real_held_out_lines(decoders, real_lines, beam):
    """Lines of 3+ words of the held-out levels, heard with spelling confusions: auto picks the right
    language for at least 95% of them, and decoding in the other language writes only its letters."""
    lines = [(lang, t) for lang, t in real_lines["test"] if len(t.split()) >= 3]
    lines = lines[::6] if beam is None else lines[::12]  # the beam is slower; a spread-out sample
    settings = DecodeSettings(beam, 0.5, 1.0 if beam else 0.0)
    right = 0
    for lang, text in lines:
        ids, chosen = decoders.decode(heard(text), AUTO, settings)
        right += chosen == lang
    assert len(lines) >= 30 and right / len(lines) >= 0.95, (right, len(lines))
    lang, text = next((lang, t) for lang, t in lines if lang == "cs" and set(t) & set("řěůšč"))
    ids, chosen = decoders.decode(heard(text), "nl", settings)
    assert chosen == "nl" and set(ids) <= set(decoders.by_language["nl"].labels)


def test_the_language_decoded_in_spells_as_that_language(decoders):
    """Dutch heard with Czech-looking confusions: decoded as Dutch it keeps the Dutch spelling."""
    text = "ik weet het niet"
    ids, chosen = decoders.decode(heard(text), AUTO, DecodeSettings(8, 0.5, 1.0))
    assert chosen == "nl" and "".join(VOCAB.decode(ids)) == text


def test_state_round_trip_decodes_the_same(decoders):
    again = LanguageDecoders.from_state(decoders.state())
    x = heard("tady je voda")
    for language in (AUTO, "cs", "nl"):
        assert again.decode(x, language, DecodeSettings(4, 0.5, 1.0)) == decoders.decode(x, language,
                                                                                        DecodeSettings(4, 0.5, 1.0))


def test_a_corpus_without_languages_has_no_language_decoders():
    assert LanguageDecoders.fit([[5, 6]], [None], 3, len(VOCAB)) is None
    assert LanguageDecoders.fit([], [], 3, len(VOCAB)) is None


def test_language_option_values_are_checked_in_one_line():
    with pytest.raises(OptionError, match=r"^language=de: expected auto, cs or nl \(predict.py and evaluate.py, "
                                          r"task=speech\)$"):
        parse_options("predict", {"run": "model.pt", "language": "de"})
    assert parse_options("evaluate", {"run": "model.pt", "language": "nl"})["language"] == "nl"
    # evaluate.py takes only the task options declared for it: the beam's options stay predict.py's
    assert "language" in command_options("evaluate") and "beam_size" not in command_options("evaluate")


def test_a_language_the_model_lacks_is_refused(decoders):
    only_nl = LanguageDecoders({"nl": decoders.by_language["nl"]})
    with pytest.raises(ValueError, match=r"^language=cs: this model was trained on nl; give language=nl or "
                                         r"language=auto$"):
        only_nl.check("cs")
    only_nl.check(AUTO)


def test_greedy_scores_are_the_best_path_within_the_alphabet(decoders):
    x = heard("je")
    ids, chosen = decoders.decode(x, "cs", DecodeSettings(None, 0.0, 0.0))
    expected = sum(max(row[[0, *decoders.by_language["cs"].labels]].tolist()) for row in x)
    _, score = decoders._decode_one(x, decoders.by_language["cs"], DecodeSettings(None, 0.0, 0.0))
    assert chosen == "cs" and math.isclose(score, expected, rel_tol=1e-5)


def test_the_new_voice_check_set_is_new_text_in_new_voices(real_lines):
    """No check-set sentence is a transcript of the voice packs (any split), and no voice of it is in a
    training split of the synthesised corpus (the only corpus with espeak-ng voices)."""
    from tasks.corpora.speech_synthesis import VOICES
    from tasks.corpora.new_voices import LANGUAGES, VARIANTS, plan, sentences

    transcripts = {text for split in real_lines.values() for _, text in split}
    for lang in LANGUAGES:
        written = [normalize_transcript(s, "cs+nl") for s in sentences(lang)]
        assert len(set(written)) == len(written) == 40 and not set(written) & transcripts
    trained_variants = {voice.partition("+")[2] for engine, voice, _, split in VOICES if split == "train"}
    assert not {v.lstrip("+") for v in VARIANTS if v} & trained_variants
    from tasks.corpora.synthetic_copies import HELD_OUT, VOICE_POOL  # the default's training copies
    assert {v.lstrip("+") for v in VARIANTS} <= set(HELD_OUT) and not set(VOICE_POOL) & set(HELD_OUT)
    clips = plan()
    assert len(clips) == 240 and sum(c["half"] == "report" for c in clips) == 120
    # another engine: the Czech sentences by festival's four Czech voices, the same halves
    festival = plan("festival")
    assert len(festival) == 160 and {c["language"] for c in festival} == {"cs"} and {c["engine"] for c in festival} == {"festival"}
    assert [c["half"] for c in festival[:40]] == ["tune"] * 20 + ["report"] * 20


def test_the_festival_check_without_festival_names_the_apt_command(tmp_path, monkeypatch):
    from tasks.corpora import new_voices
    monkeypatch.setattr(new_voices.shutil, "which", lambda tool: None)
    with pytest.raises(OSError, match=r"--engine festival needs festival and its Czech voices .*install them with: "
                                      r"sudo apt-get install -y festival festival-czech festvox-czech-dita "
                                      r"festvox-czech-krb festvox-czech-machac festvox-czech-ph"):
        new_voices.prepare(tmp_path, engine="festival")
    assert not any(tmp_path.rglob("*.wav"))


@pytest.mark.slow
@pytest.mark.skipif(not Path("/usr/share/festival/voices/czech/czech_ph").is_dir(),
                    reason="needs festival's Czech voices (sudo apt-get install -y festival-czech festvox-czech-ph)")
def test_festival_reads_czech_in_its_own_encoding(tmp_path):
    """festival's Czech voices read ISO-8859-2: given UTF-8 they spell each byte of a Czech letter out, and a
    short sentence comes out several times as long."""
    import soundfile

    from tasks.corpora.speech_synthesis import synthesise_voice
    clips = [{"id": f"c{i}", "engine": "festival", "voice": "czech_ph", "tempo": 1.0, "pitch_cents": 0, "text": text}
             for i, text in enumerate(["ahoj", "dobrý den, jak se máš? venku dnes prší."])]
    synthesise_voice(clips, tmp_path, lambda: None)
    short, long = (soundfile.info(str(tmp_path / f"c{i}.wav")).duration for i in range(2))
    assert 0.2 < short < 1.5 and 1.5 < long < 5.0  # UTF-8 gave 8.8 s for the second


def test_a_model_without_languages_refuses_one_and_decodes_auto_as_before():
    from conftest import compose

    from tasks.engine.base import build_task
    from tasks.speech.schema import SpeechPredictOptions

    task = build_task(compose(["task=speech", "task.data.source=offline"]))
    assert task.languages is None
    with pytest.raises(ValueError, match=r"^language=nl: this model's training data names no languages, so it has "
                                         r"one alphabet and LM; leave language= out \(auto\)$"):
        task.use_options(SpeechPredictOptions(language="nl"))
    task.use_options(SpeechPredictOptions())
    assert task.language == AUTO
