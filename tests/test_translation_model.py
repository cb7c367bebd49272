"""Transformer / Transformer+SRU: incremental decoding equals full-sequence decoding, the decoder is
causal, beam search with beam 1 equals greedy search, and bad model keys fail before any data."""
from __future__ import annotations

import pytest
import torch
from conftest import compose
from omegaconf import OmegaConf

from tasks.translation.model import Seq2SeqTransformer, check_model_config
from tasks.translation.search import beam_search, best_continuations, fill_from_the_end, greedy_search

PAD, BOS, EOS, V = 0, 2, 3, 37
VARIANTS = [("transformer", "pre", "none"), ("transformer", "post", "none"),
            ("transformer_sru", "pre", "before_ffn"), ("transformer_sru", "post", "replace_ffn")]


def tiny_model(model: str, norm: str, sru_mode: str, seed: int = 0, vocab: int = V, d_model: int = 24,
               heads: int = 3) -> Seq2SeqTransformer:
    cfg = OmegaConf.to_container(compose([
        "task=translation", f"model={model}", f"model.d_model={d_model}", f"model.attention_heads={heads}",
        "model.ffn_dim=40", "model.encoder_layers=2", "model.decoder_layers=2", f"model.norm={norm}",
        f"model.sru.mode={sru_mode}", "model.share_all_embeddings=false"]).model)
    check_model_config(cfg)
    torch.manual_seed(seed)
    model = Seq2SeqTransformer(vocab, PAD, cfg).eval()
    with torch.no_grad():  # random, non-trivial SRU gates (the init keeps them near the highway path)
        for name, p in model.named_parameters():
            if name.endswith("weight_c") or name.endswith(".bias") and "rnn" in name:
                p.normal_(0.0, 0.5)
    return model


def source_batch(seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    lengths = [9, 4, 7]  # awkward, unequal: padding reaches the encoder's attention and its SRU
    src = torch.randint(4, V, (max(lengths), len(lengths)), generator=g)
    src_pad = torch.arange(max(lengths)).unsqueeze(1) >= torch.tensor(lengths).unsqueeze(0)
    return src.masked_fill(src_pad, PAD), src_pad


@pytest.mark.parametrize("model_name,norm,sru_mode", VARIANTS)
@pytest.mark.parametrize("grad", [False, True])  # without grad the keys live in buffers written in place
def test_incremental_decoding_equals_full_sequence(model_name, norm, sru_mode, grad):
    with torch.set_grad_enabled(grad):
        model = tiny_model(model_name, norm, sru_mode)
        src, src_pad = source_batch()
        prev = torch.randint(4, V, (8, 3), generator=torch.Generator().manual_seed(2))
        full = model(src, src_pad, prev)
        state = model.start_decoding(*model.encode(src, src_pad))
        steps = []
        for t in range(prev.size(0)):
            logits, state = model.decode(prev[t:t + 1], state)
            steps.append(logits)
        torch.testing.assert_close(torch.cat(steps), full, rtol=1e-5, atol=1e-5)
        # two steps at a time from a cache (a T > 1 chunk after a prefix) agree too
        state = model.start_decoding(*model.encode(src, src_pad))
        chunks = [model.decode(prev[t:t + 2], state)[0] for t in range(0, prev.size(0), 2)]
        torch.testing.assert_close(torch.cat(chunks), full, rtol=1e-5, atol=1e-5)
        if sru_mode != "none":
            assert all("c" in cache for cache in state["layers"])  # the SRU state is part of the decoding state


@pytest.mark.parametrize("model_name,norm,sru_mode,leaving", [VARIANTS[0] + ([0, 2],), VARIANTS[3] + ([2, 1],)])
def test_beam_state_keeps_the_encoder_once_per_sentence_with_the_same_outputs(model_name, norm, sru_mode, leaving):
    """start_decoding(beam=K) (encoder side once per sentence, K query rows attending to it together, the
    hypotheses' keys kept per sentence) gives every hypothesis row the logits of the encoder output copied K
    times, through reordering, through dropping the key columns no hypothesis reads any more, and through
    finished sentences leaving the batch (``leaving``: the sentences
    that stay, in their new order; [2, 1] moves the last one into the place of the first, in place)."""
    with torch.no_grad():  # as in beam search: the keys live in buffers, reordered in place
        model = tiny_model(model_name, norm, sru_mode)
        src, src_pad = source_batch()
        K, B = 4, src.size(1)
        enc, enc_pad = model.encode(src, src_pad)
        expand = torch.arange(B).repeat_interleave(K)
        grouped = model.start_decoding(enc, enc_pad, beam=K)
        copied = model.start_decoding(enc.index_select(1, expand), enc_pad.index_select(1, expand))
        g = torch.Generator().manual_seed(4)
        widths = []
        for step in range(6):
            prev = torch.randint(4, V, (1, B * K), generator=g)
            a, grouped = model.decode(prev, grouped)
            b, copied = model.decode(prev, copied)
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
            widths.append(grouped["width"])
            rows = expand * K + torch.randint(0, K, (B * K,), generator=g)  # any hypothesis of the same sentence
            if step in (1, 3):  # all descend from one (step 1) or two (step 3): the others' columns are read no more
                rows = expand * K + torch.randint(0, 2, (B * K,), generator=g) * (step == 3)
            grouped, copied = model.reorder_state(grouped, rows), model.reorder_state(copied, rows)
        assert widths[2] < 3 * K and widths[4] < widths[3] + K  # the unread columns were dropped (compact)
        sentences = torch.tensor(leaving)  # one sentence finished: its rows leave, the others' stay comparable
        rows = sentences.repeat_interleave(K) * K + torch.randint(0, K, (2 * K,), generator=g)
        grouped, copied = model.reorder_state(grouped, rows, sentences), model.reorder_state(copied, rows)
        prev = torch.randint(4, V, (1, 2 * K), generator=g)
        torch.testing.assert_close(model.decode(prev, grouped)[0], model.decode(prev, copied)[0], rtol=1e-5, atol=1e-5)
        prev = torch.randint(4, V, (2, 2 * K), generator=g)  # two positions at once: causal within the chunk
        torch.testing.assert_close(model.decode(prev, grouped)[0], model.decode(prev, copied)[0], rtol=1e-5, atol=1e-5)
        with pytest.raises(ValueError, match="within their sentence"):
            model.reorder_state(grouped, torch.arange(B * K).flip(0))


@pytest.mark.parametrize("model_name,norm,sru_mode", VARIANTS[1:3])
def test_decoder_is_causal_and_padding_does_not_leak(model_name, norm, sru_mode):
    model = tiny_model(model_name, norm, sru_mode)
    src, src_pad = source_batch()
    prev = torch.randint(4, V, (6, 3), generator=torch.Generator().manual_seed(3))
    changed = prev.clone()
    changed[4:] = 5  # the future must not change earlier positions' outputs
    torch.testing.assert_close(model(src, src_pad, prev)[:4], model(src, src_pad, changed)[:4])
    other_pad = src.masked_fill(src_pad, 9)  # what sits under the padding must not matter
    torch.testing.assert_close(model(src, src_pad, prev), model(other_pad, src_pad, prev))


def test_finished_sentences_leave_by_moving_the_fewest():
    """Beam search's order of the sentences that stay: those already within the new count keep their places."""
    assert fill_from_the_end([0, 2, 3, 5], 6) == [0, 5, 2, 3]
    assert fill_from_the_end([1, 2], 3) == [2, 1]
    assert fill_from_the_end([0, 1], 4) == [0, 1]
    assert fill_from_the_end([], 3) == []


@pytest.mark.parametrize("n,K,V", [(5, 6, 4000), (3, 4, 64), (2, 3, 37), (1, 2, 32)])
def test_best_continuations_rank_only_the_best_runs_with_the_same_result(n, K, V):
    """Beam search's two-stage top-k equals ranking every continuation: the same values, and the same indices
    wherever the value is finite (-inf ones tie); with first-step -inf beams, a forced row (only one word
    finite), a vocabulary that no run length divides (37) and fewer runs than k (1 x 32)."""
    g = torch.Generator().manual_seed(n * K + V)
    lp = torch.log_softmax(torch.randn(n * K, V, generator=g) * 3, -1)
    scores = torch.randn(n, K, generator=g)
    scores[0, 1:] = float("-inf")  # the first step: one live beam
    if n > 1:
        lp[K] = float("-inf")
        lp[K, 3] = -0.5  # a forced row: only </s> allowed
    k = min(2 * K, K * V)
    want = (scores.view(-1, 1) + lp).view(n, K * V).topk(k, dim=1)
    got = best_continuations(lp, scores, k)
    assert torch.equal(got[0], want[0])
    finite = torch.isfinite(want[0])
    assert torch.equal(got[1][finite], want[1][finite])


@pytest.mark.slow
@pytest.mark.parametrize("model_name,norm,sru_mode", VARIANTS[::2])
def test_beam_one_equals_greedy_and_beams_are_valid(model_name, norm, sru_mode):
    model = tiny_model(model_name, norm, sru_mode, seed=4)
    src, src_pad = source_batch(5)
    greedy = greedy_search(model, src, src_pad, BOS, EOS, PAD, max_len_a=1.0, max_len_b=4)
    assert greedy == beam_search(model, src, src_pad, BOS, EOS, PAD, beam_size=1, max_len_a=1.0, max_len_b=4)
    lengths = (~src_pad).sum(0).tolist()
    assert all(len(seq) < n + 4 for seq, n in zip(greedy, lengths))  # the max_len rule (</s> counted)
    beams = beam_search(model, src, src_pad, BOS, EOS, PAD, beam_size=4, length_penalty=1.0, max_len_a=1.0, max_len_b=4)
    assert len(beams) == 3 and all(PAD not in s and BOS not in s and EOS not in s for s in beams)
    # batched == one sentence at a time (padding and beam bookkeeping do not mix sentences)
    for b, n in enumerate(lengths):
        alone = beam_search(model, src[:n, b:b + 1], src_pad[:n, b:b + 1], BOS, EOS, PAD, beam_size=4,
                            max_len_a=1.0, max_len_b=4)
        assert alone[0] == beams[b]


def test_beam_search_finds_a_better_scoring_hypothesis_than_greedy():
    """Beam search optimises the (normalised) model score: it is never worse than greedy's."""
    model = tiny_model("transformer", "pre", "none", seed=6)
    src, src_pad = source_batch(7)

    def score(seq, b):
        n = int((~src_pad[:, b]).sum())
        prev = torch.tensor([BOS] + seq).unsqueeze(1)
        with torch.no_grad():
            lp = torch.log_softmax(model(src[:n, b:b + 1], src_pad[:n, b:b + 1], prev)[:, 0].float(), -1)
        return float(lp.gather(1, torch.tensor(seq + [EOS]).unsqueeze(1)).sum()) / (len(seq) + 1)

    greedy = greedy_search(model, src, src_pad, BOS, EOS, PAD, max_len_a=2.0, max_len_b=30)
    beams = beam_search(model, src, src_pad, BOS, EOS, PAD, beam_size=5, max_len_a=2.0, max_len_b=30)
    for b in range(3):
        assert score(beams[b], b) >= score(greedy[b], b) - 1e-5


@pytest.mark.parametrize("override,message", [
    ("model.norm=middle", "model.norm: expected one of"),
    ("model.sru.mode=everywhere", "model.sru.mode: expected one of"),
    ("model.attention_heads=5", "divisible"),
    ("+model.hidden_size=3", "model.hidden_size: not a key of model"),
    ("model.dropout=1.5", "model.dropout"),
])
def test_bad_model_config_fails_with_the_key(override, message):
    from tasks.engine.base import build_task
    with pytest.raises(ValueError, match=message):
        build_task(compose(["task=translation", "model=transformer_sru", override])).check_config()


def test_tied_embeddings_share_one_parameter():
    cfg = OmegaConf.to_container(compose(["task=translation", "model.d_model=16", "model.attention_heads=2"]).model)
    model = Seq2SeqTransformer(V, PAD, cfg)
    assert model.src_embed.weight is model.tgt_embed.weight is model.output.weight


def test_bf16_training_attends_in_fp32_and_matches_bf16_attention(monkeypatch):
    """trainer.precision=bf16 on CPU: the attention of a training step runs in fp32 (its bf16 backward was 4.4x
    slower than fp32's), the projections in bf16; outputs and gradients stay within bf16's tolerance of fp32."""
    from tasks.translation import model as model_module
    torch.manual_seed(0)
    attention = model_module.Attention(24, 3, 0.0).train()
    x = torch.randn(5, 2, 24)
    mask = torch.ones(5, 5, dtype=torch.bool).tril()
    seen = []
    real = model_module.F.scaled_dot_product_attention

    def recording(q, k, v, **kwargs):
        seen.append((q.dtype, torch.is_autocast_enabled("cpu")))
        return real(q, k, v, **kwargs)
    monkeypatch.setattr(model_module.F, "scaled_dot_product_attention", recording)

    def run(bf16: bool, requires_grad: bool = True):
        xi = x.clone().requires_grad_(requires_grad)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            out = attention(xi, *attention.keys_values(xi), mask)
        if requires_grad:
            out.float().square().sum().backward()
        return out.float(), xi.grad
    out32, grad32 = run(False)
    out16, grad16 = run(True)
    assert seen == [(torch.float32, False), (torch.float32, False)]  # fp32 operands, autocast off inside
    assert torch.allclose(out16, out32, atol=0.05, rtol=0.05) and torch.allclose(grad16, grad32, atol=0.1, rtol=0.1)
    seen.clear()
    with torch.no_grad():  # inference keeps bf16 attention (its forward costs the same as fp32's)
        run(True, requires_grad=False)
    assert seen == [(torch.bfloat16, True)]
