"""Encoder-decoder Transformer (Vaswani et al. 2017) and the paper's Transformer+SRU variant.

Time-major like the rest of the framework: tokens (L, B), features (L, B, d_model).

    model = Seq2SeqTransformer(vocab_size, pad_id, cfg.model)
    logits = model(src, src_pad, prev_tokens)                # teacher forcing: (T, B, V)
    state = model.start_decoding(*model.encode(src, src_pad))
    logits, state = model.decode(prev_tokens[t:t + 1], state) # one step, cached keys/values + SRU state
    state = model.start_decoding(enc, src_pad, beam=K)      # beam search: K hypothesis rows per sentence
    state = model.reorder_state(state, index)                # keep / repeat hypotheses within a sentence

Sublayers (``norm``): ``post`` is the original Transformer, LayerNorm(x + Dropout(f(x))); ``pre`` is
x + Dropout(f(LayerNorm(x))) with a final LayerNorm on the encoder and decoder outputs (more stable
without a long warm-up). Positions are sinusoidal, added to embeddings scaled by sqrt(d_model).
Embeddings: one joint subword vocabulary, so ``share_all_embeddings`` ties encoder input, decoder
input and decoder output; ``share_decoder_input_output_embed`` ties only the decoder's two.

Transformer+SRU (``sru.mode``): an SRU sublayer x -> SRU(x) in every encoder and decoder layer, after
the attention sublayers, in place of the feed-forward sublayer (``replace_ffn``) or before it
(``before_ffn``). The encoder's SRU may be bidirectional (hidden d_model/2 per direction, padding
through ``mask_pad``); the decoder's runs left to right and its cell state ``c`` is part of the
incremental decoding state, so step-by-step decoding equals decoding the whole prefix at once.
"""
from __future__ import annotations

import contextlib
import math
from typing import Any, Dict, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from sru.linear import dispatch_linears
from sru.ops.backends import cpu_decoding
from sru.ops.precision import of_autocast, without_autocast
from tasks.engine.errors import ConfigError
from tasks.engine.config.schema import typed
from tasks.translation.schema import SRUSublayerConfig, TransformerConfig
from tasks.translation.shared_keys import (additive, append_keys, compact, hypothesis_mask, new_columns,
                                           select_sentences)

NORMS = ("pre", "post")
SRU_MODES = ("none", "replace_ffn", "before_ffn")
State = Dict[str, Any]


def sinusoidal_positions(n: int, d: int) -> Tensor:
    """(n, d): sin on even, cos on odd channels, wavelengths 2pi .. 10000 * 2pi (Vaswani et al. 3.5)."""
    pos = torch.arange(n, dtype=torch.float32).unsqueeze(1)
    inv = torch.exp(torch.arange(0, d, 2, dtype=torch.float32) * (-math.log(10000.0) / d))
    table = torch.zeros(n, d)
    table[:, 0::2] = torch.sin(pos * inv)
    table[:, 1::2] = torch.cos(pos * inv)[:, : d // 2]
    return table


class Attention(nn.Module):
    """Multi-head scaled dot-product attention; keys/values may come from a cache."""

    def __init__(self, d_model: int, heads: int, dropout: float):
        super().__init__()
        if d_model % heads:
            raise ValueError(f"model.d_model={d_model} must be divisible by model.attention_heads={heads}")
        self.heads, self.dropout = heads, dropout
        self.q, self.k, self.v, self.out = (nn.Linear(d_model, d_model) for _ in range(4))

    def split(self, x: Tensor) -> Tensor:  # (L, B, D) -> (B, H, L, D/H)
        L, B, D = x.shape
        return x.view(L, B, self.heads, D // self.heads).permute(1, 2, 0, 3)

    def keys_values(self, x: Tensor) -> Tuple[Tensor, Tensor]:
        return self.split(self.k(x)), self.split(self.v(x))

    def forward(self, x: Tensor, k: Tensor, v: Tensor, mask: Optional[Tensor], group: int = 1) -> Tensor:
        """x (T, B, D) queries; k, v (B / group, H, S, D/H); mask broadcastable to (B / group, H, T, S), boolean
        (true = may attend) or additive (0 / -inf, ``additive``). ``group``: each run of ``group`` query rows
        shares one key/value row (beam search's hypotheses of one sentence and its encoder output), attended as
        one row of ``group * T`` queries."""
        T, B, D = x.shape
        q = self.split(self.q(x))
        if group > 1:  # (B, H, T, d) -> (B / group, H, group * T, d): keys read once per sentence, not per beam
            q = q.view(B // group, group, self.heads, T, -1).transpose(1, 2)
            q = q.reshape(B // group, self.heads, group * T, -1)
        p = self.dropout if self.training else 0.0
        device = q.device.type
        # bf16 training on CPU (trainer.precision=bf16): the flash kernel's backward in bf16 took 4.4x its fp32 time
        # on the Zen 4 (362 vs 82 ms over 6 steps of the default, most of what the bf16 products saved;
        # python -m bench.precision.task_step), so attention is computed in fp32, its projections stay bf16
        in_fp32 = q.requires_grad and of_autocast(device).attends_in_fp32(device)
        if in_fp32:
            q, k, v = q.float(), k.float(), v.float()
        if mask is not None and mask.is_floating_point() and mask.dtype != q.dtype:  # under autocast: its dtype
            mask = mask.to(q.dtype)
        h = cpu_decoding.attend(q, k, v, mask) if p == 0.0 else None  # decoding: the C kernel where it applies
        if h is None:
            with without_autocast(device) if in_fp32 else contextlib.nullcontext():  # else it casts them back
                h = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p)
        if group > 1:
            h = h.view(B // group, self.heads, group, T, -1).transpose(1, 2).reshape(B, self.heads, T, -1)
        return self.out(h.permute(2, 0, 1, 3).reshape(T, B, D))


class FeedForward(nn.Sequential):
    def __init__(self, d_model: int, ffn_dim: int, dropout: float):
        super().__init__(nn.Linear(d_model, ffn_dim), nn.ReLU(), nn.Dropout(dropout), nn.Linear(ffn_dim, d_model))


class SRUSublayer(nn.Module):
    """sru.SRU with d_model in and out (k = 3: the input itself is the highway path)."""

    def __init__(self, d_model: int, cfg: SRUSublayerConfig, bidirectional: bool):
        super().__init__()
        from sru import SRU

        if bidirectional and d_model % 2:
            raise ValueError(f"model.sru.encoder_bidirectional=true needs an even model.d_model, received {d_model}")
        self.rnn = SRU(d_model, d_model // 2 if bidirectional else d_model, num_layers=int(cfg.num_layers),
                       dropout=float(cfg.dropout), rnn_dropout=float(cfg.rnn_dropout),
                       bidirectional=bidirectional, highway_bias=float(cfg.highway_bias),
                       rescale=bool(cfg.rescale), projection_size=int(cfg.projection_size))

    def forward(self, x: Tensor, c0: Optional[Tensor] = None, mask_pad: Optional[Tensor] = None):
        return self.rnn(x, c0, mask_pad=mask_pad)


class Layer(nn.Module):
    """One encoder layer (self-attention [, SRU] [, FFN]) or decoder layer (+ cross-attention)."""

    def __init__(self, cfg: TransformerConfig, decoder: bool):
        super().__init__()
        d, heads, sru_mode = int(cfg.d_model), int(cfg.attention_heads), cfg.sru.mode
        self.pre_norm = cfg.norm == "pre"
        self.drop = nn.Dropout(float(cfg.dropout))
        self.self_attn = Attention(d, heads, float(cfg.attention_dropout))
        self.cross_attn = Attention(d, heads, float(cfg.attention_dropout)) if decoder else None
        self.sru = (SRUSublayer(d, cfg.sru, bidirectional=not decoder and bool(cfg.sru.encoder_bidirectional))
                    if sru_mode != "none" else None)
        self.ffn = (FeedForward(d, int(cfg.ffn_dim), float(cfg.activation_dropout))
                    if sru_mode != "replace_ffn" else None)
        n_norms = 1 + (decoder) + (self.sru is not None) + (self.ffn is not None)
        self.norms = nn.ModuleList(nn.LayerNorm(d) for _ in range(n_norms))

    def sublayer(self, x: Tensor, i: int, f) -> Tensor:
        if self.pre_norm:
            return x + self.drop(f(self.norms[i](x)))
        return self.norms[i](x + self.drop(f(x)))

    def encode(self, x: Tensor, pad: Tensor, key_mask: Tensor) -> Tensor:
        x = self.sublayer(x, 0, lambda h: self.self_attn(h, *self.self_attn.keys_values(h), key_mask))
        i = 1
        if self.sru is not None:
            x = self.sublayer(x, i, lambda h: self.sru(h, mask_pad=pad)[0])
            i += 1
        if self.ffn is not None:
            x = self.sublayer(x, i, self.ffn)
        return x

    def decode(self, x: Tensor, cache: Dict[str, Tensor], self_mask: Optional[Tensor], enc: Tensor,
               enc_mask: Tensor, beam: int = 1) -> Tensor:
        """x: the new positions (T, B, D); ``cache`` (updated in place) holds this layer's past keys/values,
        the encoder's projected keys/values and the SRU state; ``enc`` / ``enc_mask`` have one row per
        ``beam`` rows of x, and each sentence's ``beam`` hypotheses share their self-attention keys
        (shared_keys.py)."""
        def self_attention(h):
            k, v = self.self_attn.keys_values(h)
            append_keys(cache, "k", k, beam)
            append_keys(cache, "v", v, beam)
            return self.self_attn(h, cache["k"], cache["v"], self_mask, group=beam)

        def cross_attention(h):
            if "enc_k" not in cache:  # the encoder output is fixed: project it once per sentence
                cache["enc_k"], cache["enc_v"] = self.cross_attn.keys_values(enc)
            return self.cross_attn(h, cache["enc_k"], cache["enc_v"], enc_mask, group=beam)

        def recurrence(h):
            out, c = self.sru(h, cache.get("c"))
            cache["c"] = c
            return out

        x = self.sublayer(x, 0, self_attention)
        x = self.sublayer(x, 1, cross_attention)
        i = 2
        if self.sru is not None:
            x = self.sublayer(x, i, recurrence)
            i += 1
        if self.ffn is not None:
            x = self.sublayer(x, i, self.ffn)
        return x


class Seq2SeqTransformer(nn.Module):
    def __init__(self, vocab_size: int, pad_id: int, cfg: Any):
        """``cfg``: the model section, typed (``check_model_config``) or composed (typed here)."""
        super().__init__()
        cfg = check_model_config(cfg)
        d = int(cfg.d_model)
        self.pad_id, self.d_model = pad_id, d
        self.max_positions = int(cfg.max_positions)
        self.embed_scale = math.sqrt(d)
        self.src_embed = nn.Embedding(vocab_size, d, padding_idx=pad_id)
        self.tgt_embed = self.src_embed if cfg.share_all_embeddings else nn.Embedding(vocab_size, d, padding_idx=pad_id)
        for emb in {id(self.src_embed): self.src_embed, id(self.tgt_embed): self.tgt_embed}.values():
            nn.init.normal_(emb.weight, 0.0, d ** -0.5)  # fairseq's init: unit-variance inputs after the scale
            nn.init.zeros_(emb.weight[pad_id])
        self.output = nn.Linear(d, vocab_size, bias=False)
        if cfg.share_all_embeddings or cfg.share_decoder_input_output_embed:
            self.output.weight = self.tgt_embed.weight
        self.register_buffer("positions", sinusoidal_positions(self.max_positions, d), persistent=False)
        self.drop = nn.Dropout(float(cfg.dropout))
        self.encoder = nn.ModuleList(Layer(cfg, decoder=False) for _ in range(int(cfg.encoder_layers)))
        self.decoder = nn.ModuleList(Layer(cfg, decoder=True) for _ in range(int(cfg.decoder_layers)))
        pre = cfg.norm == "pre"
        self.encoder_norm = nn.LayerNorm(d) if pre else nn.Identity()
        self.decoder_norm = nn.LayerNorm(d) if pre else nn.Identity()
        dispatch_linears(self)  # every Linear through sru's CPU GEMM dispatch (docs/ops.md)

    def embed(self, table: nn.Embedding, tokens: Tensor, offset: int) -> Tensor:
        end = offset + tokens.size(0)
        if end > self.max_positions:
            raise ValueError(f"sequence of {end} positions exceeds model.max_positions={self.max_positions}; "
                             f"raise it or lower task.max_subwords / task.decoding.max_len_b")
        return self.drop(table(tokens) * self.embed_scale + self.positions[offset:end].unsqueeze(1))

    def encode(self, src: Tensor, src_pad: Tensor) -> Tuple[Tensor, Tensor]:
        """src (S, B), src_pad (S, B) true = pad -> encoder output (S, B, D) and src_pad."""
        key_mask = (~src_pad).T[:, None, None, :]  # (B, 1, 1, S)
        x = self.embed(self.src_embed, src, 0)
        for layer in self.encoder:
            x = layer.encode(x, src_pad, key_mask)
        return self.encoder_norm(x), src_pad

    def start_decoding(self, enc: Tensor, src_pad: Tensor, beam: int = 1) -> State:
        """The decoding state of ``beam`` hypotheses per sentence (rows b * beam ... b * beam + beam - 1 of every
        step's input are sentence b's); the encoder side is kept once per sentence."""
        columns = torch.zeros(enc.size(1) * int(beam), 0, dtype=torch.long, device=enc.device)
        return {"enc": enc, "enc_mask": additive((~src_pad).T[:, None, None, :]), "offset": 0, "beam": int(beam),
                "columns": columns, "width": 0, "layers": [{} for _ in self.decoder]}

    def decode(self, prev: Tensor, state: State) -> Tuple[Tensor, State]:
        """prev (T, B): the next T target-side inputs after the ``state["offset"]`` already decoded."""
        T, P, beam = prev.size(0), state["offset"], state["beam"]
        self_mask = None
        if beam > 1:  # hypotheses share their sentence's key columns, each reading its own (shared_keys.py)
            compacted = compact(state["columns"], beam, state["width"], state["layers"])
            if compacted is not None:
                state["columns"], state["width"] = compacted
            new = new_columns(state["width"], prev.size(1), beam, T, prev.device)
            state["columns"] = torch.cat([state["columns"], new], 1)
            state["width"] += T * beam
            self_mask = hypothesis_mask(state["columns"], beam, T, state["width"])
        elif T > 1:  # query i (absolute P + i) sees keys 0 .. P + i; one new step sees every cached key
            self_mask = torch.ones(T, P + T, dtype=torch.bool, device=prev.device).tril(P)
        x = self.embed(self.tgt_embed, prev, P)
        for layer, cache in zip(self.decoder, state["layers"]):
            x = layer.decode(x, cache, self_mask, state["enc"], state["enc_mask"], state["beam"])
        state["offset"] = P + T
        return self.output(self.decoder_norm(x)), state

    def forward(self, src: Tensor, src_pad: Tensor, prev: Tensor) -> Tensor:
        logits, _ = self.decode(prev, self.start_decoding(*self.encode(src, src_pad)))
        return logits

    @staticmethod
    def reorder_state(state: State, index: Tensor, sentences: Optional[Tensor] = None) -> State:
        """Keep/repeat hypothesis rows ``index`` of every cached per-hypothesis tensor (beam search). With
        ``beam`` > 1 every row must come from a row of its own sentence; ``sentences`` (when some leave): the
        old sentence of each new one, which selects the encoder side, kept once per sentence. Like ``decode``,
        it consumes ``state`` (its key buffers are reused)."""
        beam = state["beam"]
        if beam > 1:
            old = (torch.arange(index.numel() // beam, device=index.device) if sentences is None else sentences)
            if index.numel() != old.numel() * beam or not torch.equal(index // beam, old.repeat_interleave(beam)):
                raise ValueError(f"reorder_state: with beam={beam}, hypotheses can only move within their sentence")

        def reorder(cache: Dict[str, Tensor]) -> Dict[str, Tensor]:
            out = {}
            # per sentence: the self-attention keys / values (hypotheses only change columns) and the projected
            # encoder output
            for key in ("k", "v", "enc_k", "enc_v"):
                if key in cache:
                    out.update(select_sentences(cache, key, by_sentence) if by_sentence is not None else
                               {k: cache[k] for k in (key, key + "_buf") if k in cache})
            if "c" in cache:      # SRU state (layers, B, D)
                out["c"] = cache["c"].index_select(1, index)
            return out

        by_sentence = index if beam == 1 else sentences  # None: every sentence stays where it is
        enc, enc_mask = state["enc"], state["enc_mask"]
        if by_sentence is not None:
            enc, enc_mask = enc.index_select(1, by_sentence), enc_mask.index_select(0, by_sentence)
        return {"enc": enc, "enc_mask": enc_mask, "offset": state["offset"], "beam": beam,
                "columns": state["columns"].index_select(0, index), "width": state["width"],
                "layers": [reorder(cache) for cache in state["layers"]]}


def check_model_config(cfg: Any) -> TransformerConfig:
    """Model keys of model=transformer / transformer_sru (the schema), before any data is loaded; returns
    them typed (``Seq2SeqTransformer`` is built from the typed section). ``cfg``: composed or typed."""
    name = cfg.name if isinstance(cfg, TransformerConfig) else cfg.get("name")
    model = typed(cfg, TransformerConfig, "model", see=f"conf/model/{name}.yaml")
    if model.d_model % model.attention_heads:
        raise ConfigError(f"model.d_model={model.d_model} must be divisible by "
                          f"model.attention_heads={model.attention_heads}")
    return model


