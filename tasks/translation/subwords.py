"""Subword vocabulary: a joint sentencepiece model (unigram or BPE) trained on the training pairs.

Byte fallback is on: characters unseen in training are encoded as their UTF-8 bytes, never as
``<unk>``, so decoding gives back the input text exactly. One model for both languages, so source and target share ids and the embeddings can be tied three
ways (encoder input, decoder input, decoder output), as in the Transformer base setup. Ids 0..3 are
fixed to ``<pad> <unk> <s> </s>``: the same specials, in the same order, as ``tasks.common.text``'s translation
vocabulary, so ``Subwords.vocabulary`` is a ``tasks.common.text.Vocabulary`` whose ids ARE the model's ids.

The trained model is cached under the data cache (keyed by the training text and the settings) and
its serialized proto travels with the run: in the checkpoint's task state and as ``spm.model`` in the
run directory, so decoding a checkpoint never depends on the cache.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import re
from pathlib import Path
from typing import Iterable, List, Sequence

from tasks.common.text import BOS, EOS, PAD, UNK, Vocabulary
from tasks.engine.errors import ConfigError
from tasks.translation.schema import SubwordConfig

MODEL_TYPES = ("unigram", "bpe")


class Subwords:
    def __init__(self, model_proto: bytes):
        import sentencepiece as spm

        self.model_proto = bytes(model_proto)
        self.sp = spm.SentencePieceProcessor(model_proto=self.model_proto)
        pieces = [self.sp.id_to_piece(i) for i in range(self.sp.get_piece_size())]
        if pieces[:4] != [PAD, UNK, BOS, EOS]:
            raise ValueError(f"subword model: expected ids 0..3 to be {[PAD, UNK, BOS, EOS]}, found {pieces[:4]}")
        self.vocabulary = Vocabulary(pieces[4:], specials=(PAD, UNK, BOS, EOS))

    @property
    def has_placeholders(self) -> bool:
        """Whether the model holds the number placeholders (``numbers.PLACEHOLDERS``) as pieces of their own:
        a model trained before them (an older checkpoint) translates numbers as text."""
        from tasks.translation.numbers import PLACEHOLDERS

        return all(self.sp.piece_to_id(p) != self.vocabulary.unk_id for p in PLACEHOLDERS)

    def __len__(self) -> int:
        return len(self.vocabulary)

    def encode(self, text: str) -> List[int]:
        return self.sp.encode(text, out_type=int)

    def decode(self, ids: Iterable[int]) -> str:
        """Ids -> detokenised text; stops at the first </s> and skips the other specials."""
        out = []
        for i in ids:
            i = int(i)
            if i == self.vocabulary.eos_id:
                break
            if i not in (self.vocabulary.pad_id, self.vocabulary.bos_id):
                out.append(i)
        return self.sp.decode(out)

    def save(self, path: Path) -> None:
        Path(path).write_bytes(self.model_proto)

    @classmethod
    def load(cls, path: Path) -> "Subwords":
        return cls(Path(path).read_bytes())


def train_subwords(sentences: Sequence[str], cfg: SubwordConfig, cache_dir: Path,
                   symbols: Sequence[str] = ()) -> Subwords:
    """Train (or load from the cache) a joint sentencepiece model on ``sentences``; ``cfg``: task.subwords,
    typed (the task's ``task_cfg.subwords``: vocab_size >= 300, 256 byte-fallback pieces, specials, chars);
    ``symbols``: strings that are always one piece each (the number placeholders)."""
    import sentencepiece as spm

    digest = hashlib.sha1()
    for s in sentences:
        digest.update(s.encode("utf-8") + b"\n")
    settings = f"{cfg.model_type}-{cfg.vocab_size}-{cfg.character_coverage}" + (f"-sym{len(symbols)}" if symbols else "")
    digest.update("\t".join(symbols).encode())
    digest.update(settings.encode())
    path = Path(cache_dir).expanduser() / f"spm-{settings}-{digest.hexdigest()[:12]}.model"
    if path.is_file():
        return Subwords.load(path)
    print(f"[translation] training a {cfg.model_type} subword model ({cfg.vocab_size} pieces) on "
          f"{len(sentences):,} sentences; cached in {path}", flush=True)
    proto = io.BytesIO()
    with smallest_vocabulary_named():
        _train_sentencepiece(spm, sentences, cfg, proto, symbols)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(proto.getvalue())
    tmp.replace(path)
    return Subwords(proto.getvalue())


@contextlib.contextmanager
def smallest_vocabulary_named():
    """sentencepiece needs a piece per character the corpus uses (at character_coverage) plus the specials and
    256 byte pieces; only the corpus says how many: turn its RuntimeError into one line with the number."""
    try:
        yield
    except RuntimeError as err:
        found = re.search(r"Vocabulary size is smaller than required_chars\. (\d+) vs (\d+)", str(err))
        if not found:
            raise
        raise ConfigError(f"task.subwords.vocab_size={found.group(1)} is too small for this corpus: its characters, "
                          f"the 4 specials and 256 byte pieces need {found.group(2)}. Use "
                          f"task.subwords.vocab_size={found.group(2)} or more (or a lower "
                          f"task.subwords.character_coverage)") from None


def _train_sentencepiece(spm, sentences: Sequence[str], cfg: SubwordConfig, proto: io.BytesIO,
                         symbols: Sequence[str] = ()) -> None:
    extra = {"user_defined_symbols": list(symbols)} if symbols else {}
    spm.SentencePieceTrainer.train(**extra,
        sentence_iterator=iter(sentences), model_writer=proto, model_type=cfg.model_type,
        vocab_size=int(cfg.vocab_size), character_coverage=float(cfg.character_coverage),
        # byte fallback: characters never seen in training become UTF-8 byte pieces instead of <unk>, so
        # decode(encode(text)) == text for any text (a test sentence with a rare letter survives)
        byte_fallback=True, pad_id=0, unk_id=1, bos_id=2, eos_id=3, pad_piece=PAD, unk_piece=UNK, bos_piece=BOS, eos_piece=EOS,
        # a vocabulary a little too large for a small corpus is not worth failing a run over
        hard_vocab_limit=False, num_threads=1, minloglevel=2, input_sentence_size=int(cfg.max_sentences),
        shuffle_input_sentence=True, seed_sentencepiece_size=200000)
