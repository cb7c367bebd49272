"""Speech task: features against independent references, manifests and audio errors, CTC decoding,
WER/CER against jiwer, the offline corpus plan, and config checks. (End-to-end run: test_speech_e2e.py.)"""
from __future__ import annotations

import math
import random

import numpy as np
import pytest
import soundfile
import torch
from conftest import ROOT, compose

from tasks.common.batching import pad_collate
from tasks.speech.data import Utterance, load_audio, read_manifest
from tasks.speech.char_lm import CharNgramLM
from tasks.speech.decoding import collapse, gated_bonus, greedy_decode, prefix_beam_search
from tasks.speech.features import LogMel, cmvn, hz_to_mel, mel_filterbank, mel_to_hz, spec_augment, stack_frames
from tasks.speech.report import error_counts, rates
from tasks.corpora.transcripts import normalize_transcript
from tasks.speech.text import char_vocabulary

FIXTURES = ROOT / "tests" / "fixtures" / "speech"


# ---- features -------------------------------------------------------------------------------------
@pytest.mark.slow  # importing librosa JIT-compiles its numba kernels: 10-30 s before the first comparison
@pytest.mark.parametrize("htk,norm", [(False, "slaney"), (True, "slaney"), (False, None), (True, None)])
@pytest.mark.parametrize("n_fft,n_mels,fmin,fmax", [(512, 80, 0.0, None), (400, 40, 20.0, 7600.0)])
def test_mel_filterbank_matches_librosa(htk, norm, n_fft, n_mels, fmin, fmax):
    librosa = pytest.importorskip("librosa", reason="librosa (test-only reference) is not installed")
    ref = librosa.filters.mel(sr=16000, n_fft=n_fft, n_mels=n_mels, fmin=fmin, fmax=fmax, htk=htk, norm=norm)
    ours = mel_filterbank(n_mels, n_fft, 16000, fmin=fmin, fmax=fmax, htk=htk, norm=norm).numpy()
    assert ours.shape == ref.shape
    np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-7 * np.abs(ref).max())


def test_mel_scale_round_trips():
    hz = torch.tensor([0.0, 440.0, 999.0, 1000.0, 4000.0, 8000.0], dtype=torch.float64)
    for htk in (False, True):
        assert torch.allclose(mel_to_hz(hz_to_mel(hz, htk), htk), hz, atol=1e-6)


@pytest.mark.parametrize("freq", [300.0, 1000.0, 2500.0, 6000.0])
def test_pure_tone_energy_lands_in_its_mel_bin(freq):
    sr, logmel = 16000, LogMel(16000, n_mels=80)
    t = torch.arange(sr) / sr
    feats = logmel(torch.sin(2 * math.pi * freq * t))
    assert feats.shape == (sr // 160 + 1, 80)
    peak = int(feats[10:-10].mean(0).argmax())
    # the filter whose triangle peaks closest to the tone (mel points 1..80 of 82 are the centres)
    mel = torch.linspace(float(hz_to_mel(0.0)), float(hz_to_mel(8000.0)), 82)
    centres = mel_to_hz(mel)[1:-1]
    assert abs(peak - int((centres - freq).abs().argmin())) <= 1


def test_stacking_shortens_sequences_and_mask_pad_matches():
    feats = [torch.randn(n, 4) for n in (7, 9, 3)]
    stacked = [stack_frames(f, stack=3, skip=3) for f in feats]
    assert [s.shape for s in stacked] == [(3, 12), (3, 12), (1, 12)]
    assert torch.equal(stacked[0][1], feats[0][3:6].reshape(-1))
    assert torch.equal(stacked[0][2], torch.cat([feats[0][6]] * 3))  # last frame repeated past the end
    _, mask_full, _ = pad_collate(feats, 0.0)
    _, mask_stacked, _ = pad_collate(stacked, 0.0)
    assert torch.equal(mask_stacked, mask_full[::3])  # the padded mask shortened exactly as the sequences


def test_cmvn_and_spec_augment():
    x = torch.randn(50, 8) * 3 + 5
    y = cmvn(x)
    assert torch.allclose(y.mean(0), torch.zeros(8), atol=1e-5) and torch.allclose(y.std(0, unbiased=False), torch.ones(8), atol=1e-4)
    stacked = stack_frames(y, 2, 2)  # (25, 16): 2 x 8 mels
    g = torch.Generator().manual_seed(0)
    aug = spec_augment(stacked, n_mels=8, generator=g, freq_masks=1, freq_width=3, time_masks=1, time_width=4)
    zero_bins = (aug.view(25, 2, 8) == 0).all(0).all(0)
    assert aug.shape == stacked.shape and not torch.equal(aug, stacked)
    assert zero_bins.sum() <= 3  # masked mel bins are the same in both stacked frames


# ---- manifests and audio --------------------------------------------------------------------------
def test_manifest_jsonl_and_tsv():
    utts = read_manifest(FIXTURES / "manifest.jsonl")
    assert [u.id for u in utts] == ["a", "b"]
    assert utts[0].audio == FIXTURES / "a.wav" and utts[1].audio == FIXTURES / "sub" / "b.wav"  # relative to file
    assert utts[0].text == "One two!" and utts[1].text == "three" and utts[0].duration == 0.5
    assert utts[0].speaker == "s1" and utts[0].where.endswith("manifest.jsonl:1")
    tsv = read_manifest(FIXTURES / "manifest.tsv")
    assert [(u.id, u.text, u.duration) for u in tsv] == [("x1", "one two", 0.5)]


def test_manifest_errors_name_file_and_line(tmp_path):
    with pytest.raises(ValueError, match=r"no_text.jsonl:1: no transcript"):
        read_manifest(FIXTURES / "no_text.jsonl")
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        read_manifest(tmp_path / "nope.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"audio": "a.wav", "text": "x"}\n{oops\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2: not valid JSON"):
        read_manifest(bad)


def _tone(path, sr=16000, seconds=0.3):
    soundfile.write(str(path), np.sin(np.arange(int(sr * seconds)) * 0.05).astype("float32"), sr)
    return path


def test_audio_errors_name_the_file(tmp_path):
    ok = Utterance("ok", _tone(tmp_path / "ok.wav"), "x", where="m.jsonl:3")
    assert load_audio(ok, 16000).shape == (4800,)
    missing = Utterance("m", tmp_path / "missing.wav", "x", where="m.jsonl:4")
    with pytest.raises(FileNotFoundError, match=r"missing.wav \(listed at m.jsonl:4\)"):
        load_audio(missing, 16000)
    corrupt = Utterance("c", FIXTURES / "corrupt.wav", "x")
    with pytest.raises(ValueError, match=r"cannot decode audio .*corrupt.wav.*corrupt"):
        load_audio(corrupt, 16000)
    wrong_rate = Utterance("r", _tone(tmp_path / "r8k.wav", sr=8000), "x")
    with pytest.raises(ValueError, match=r"r8k.wav.*8000 Hz, expected 16000 Hz.*sox"):
        load_audio(wrong_rate, 16000)


def test_stereo_audio_is_mixed_to_mono(tmp_path):
    path = tmp_path / "st.wav"
    soundfile.write(str(path), np.stack([np.full(400, 0.5), np.full(400, -0.25)], 1).astype("float32"), 16000)
    assert np.allclose(load_audio(Utterance("s", path, "x"), 16000), 0.125, atol=1e-4)


# ---- transcripts, decoding, metrics ---------------------------------------------------------------
def test_transcripts_use_letters_space_apostrophe():
    assert normalize_transcript("  Don't STOP, 42 times!") == "don't stop times"
    vocab = char_vocabulary()
    assert vocab.itos[0] == "<blank>" and len(vocab) == 30
    assert "".join(vocab.decode(vocab.encode(list("it's ok")))) == "it's ok"


def test_greedy_collapses_repeats_and_removes_blanks():
    assert collapse([0, 1, 1, 0, 1, 2, 2, 0, 0, 3, 3]) == [1, 1, 2, 3]  # a blank separates a real repeat
    assert collapse([0, 0, 0]) == []
    path = torch.tensor([[5, 5, 0, 5, 0, 7, 7], [3, 0, 3, 3, 9, 9, 9]]).t()  # (T, B)
    log_probs = torch.nn.functional.one_hot(path, 10).float().log_softmax(-1)
    assert greedy_decode(log_probs, torch.tensor([7, 4])) == [[5, 5, 7], [3, 3]]  # lengths cut padding


def test_prefix_beam_one_equals_greedy_on_peaky_frames():
    for seed in range(40):
        g = torch.Generator().manual_seed(seed)
        T, V = random.Random(seed).randint(5, 40), 8
        labels = torch.randint(0, V, (T,), generator=g)
        logits = torch.randn(T, V, generator=g)
        logits[torch.arange(T), labels] += 5.0  # trained CTC outputs: one clear winner per frame
        lp = logits.log_softmax(-1)
        assert prefix_beam_search(lp, beam=1) == greedy_decode(lp.unsqueeze(1), torch.tensor([T]))[0]


def test_prefix_beam_sums_paths_greedy_misses():
    # two frames, p(blank)=0.6, p(a)=0.4: best path "--" gives "" (0.36), but "a" has aa+a-+-a = 0.64
    lp = torch.tensor([[0.6, 0.4], [0.6, 0.4]]).log()
    assert greedy_decode(lp.unsqueeze(1), torch.tensor([2])) == [[]]
    assert prefix_beam_search(lp, beam=4) == [1]


def test_lm_bonus_is_withheld_where_greedy_output_is_nearly_empty():
    # all-blank acoustics (a model still in CTC's blank phase): greedy writes nothing; with the bonus the LM
    # writes text of its own, which the gate prevents
    lm = CharNgramLM.fit([[3, 4, 5, 3, 4, 5]] * 20, order=3, vocab_size=6)
    lp = torch.tensor([[0.9] + [0.02] * 5] * 12).log()
    greedy = greedy_decode(lp.unsqueeze(1), torch.tensor([12]))[0]
    assert greedy == []
    assert len(prefix_beam_search(lp, beam=4, lm=lm, lm_weight=0.5, bonus=8.0)) > 0
    bonus = gated_bonus(greedy, 12, 8.0, chars_per_step=0.5)
    assert bonus == 0.0 and prefix_beam_search(lp, beam=4, lm=lm, lm_weight=0.5, bonus=bonus) == []
    # a greedy output of a quarter of the expected length or more keeps the tuned bonus
    assert gated_bonus([3, 4], 12, 8.0, chars_per_step=0.5) == 8.0
    assert gated_bonus([3], 12, 8.0, chars_per_step=0.5) == 0.0


def test_wer_cer_match_jiwer_and_sum_exactly_over_shards():
    jiwer = pytest.importorskip("jiwer")
    rng = random.Random(0)
    words = "one two three four five six".split()
    refs = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 6))) for _ in range(30)]
    hyps = [" ".join(rng.choice(words) for _ in range(rng.randint(0, 6))) for _ in range(30)]
    whole = rates(error_counts(zip(refs, hyps)))
    assert whole["wer"] == pytest.approx(100 * jiwer.wer(refs, hyps))
    assert whole["cer"] == pytest.approx(100 * jiwer.cer(refs, hyps))
    a, b = error_counts(zip(refs[:7], hyps[:7])), error_counts(zip(refs[7:], hyps[7:]))  # two "ranks"
    assert rates({k: a[k] + b[k] for k in a}) == whole


# ---- offline corpus and config --------------------------------------------------------------------
def test_offline_plan_splits_by_speaker():
    from tasks.corpora.speech_synthesis import OfflineSpec, plan_clips
    clips = plan_clips(OfflineSpec(clips_per_voice=4, sentence_fraction=0.25))
    splits = {s: {c["speaker"] for c in clips if c["split"] == s} for s in ("train", "valid", "test")}
    assert all(splits.values())
    assert not (splits["train"] & splits["valid"]) and not (splits["train"] & splits["test"])
    assert not (splits["valid"] & splits["test"])
    engines = {c["engine"] for c in clips if c["split"] == "test"}
    assert engines == {"espeak", "flite", "festival"}  # unseen voices of every engine
    assert plan_clips(OfflineSpec(clips_per_voice=4)) == clips  # a pure function of the spec
    assert all(set(c["text"]) <= set("abcdefghijklmnopqrstuvwxyz' ") for c in clips)


def test_missing_tools_say_which_apt_command(monkeypatch, tmp_path):
    from tasks.corpora.speech_synthesis import VOICES, check_tools
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty PATH: no engine is found
    with pytest.raises(OSError, match=r"(?s)espeak-ng.*apt-get install -y espeak-ng flite sox festival"):
        check_tools(VOICES)


def test_bad_task_keys_fail_before_data(tmp_path):
    from tasks.engine.base import build_task
    with pytest.raises(ValueError, match="task.decoder"):
        build_task(compose(["task=speech", "task.decoder=viterbi"])).check_config()
    with pytest.raises(ValueError, match="task.features.cmvn"):
        build_task(compose(["task=speech", "task.features.cmvn=mean"])).check_config()
    task = build_task(compose(["task=speech", "task.data.source=manifest", f"task.data.cache_dir={tmp_path}"]))
    with pytest.raises(ValueError, match=r"task.data.manifests.train is not set"):
        task.setup()


def test_librispeech_layout_becomes_a_manifest(tmp_path):
    from tasks.corpora.librispeech import write_librispeech_manifest
    chapter = tmp_path / "dev-clean" / "84" / "121123"
    chapter.mkdir(parents=True)
    for utt in ("84-121123-0000", "84-121123-0001"):
        soundfile.write(str(chapter / f"{utt}.flac"), np.zeros(8000, dtype="float32"), 16000)
    (chapter / "84-121123.trans.txt").write_text("84-121123-0000 GO DO YOU HEAR\n84-121123-0001 BUT IN LESS THAN FIVE MINUTES\n")
    manifest = write_librispeech_manifest(tmp_path / "dev-clean", tmp_path / "out" / "dev-clean.jsonl")
    utts = read_manifest(manifest)
    assert [(u.id, u.text, u.duration, u.speaker) for u in utts] == [
        ("84-121123-0000", "go do you hear", 0.5, "84"), ("84-121123-0001", "but in less than five minutes", 0.5, "84")]
    assert load_audio(utts[0], 16000).shape == (8000,)
    (chapter / "84-121123-0001.flac").unlink()
    with pytest.raises(FileNotFoundError, match=r"84-121123.trans.txt:2: lists 84-121123-0001"):
        write_librispeech_manifest(tmp_path / "dev-clean", tmp_path / "out" / "x.jsonl")
