"""sacreBLEU BLEU and chrF from summable sufficient statistics (exact under DDP).

Corpus BLEU is not a mean of sentence scores: it is a function of corpus-wide n-gram match counts
(correct and total per order 1..4) and of the hypothesis/reference lengths. Each evaluation batch
returns those counts as logging outputs; summing them over batches and DDP ranks and computing BLEU
once gives exactly ``sacrebleu.corpus_bleu`` on the whole split (tests/test_translation_metrics.py).
Same for chrF: its corpus score is a function of summed character/word n-gram statistics.

Settings are sacreBLEU's defaults, so the command line ``sacrebleu ref_test.txt -i hyp_test.txt`` on the
files the task writes reproduces the number: 13a tokenisation, mixed case, one reference, and
``smooth_method="exp"`` (what ``corpus_bleu`` uses; ``BLEU.compute_bleu`` alone defaults to "none").
"""
from __future__ import annotations

from typing import Dict, Mapping, Sequence

from sacrebleu.metrics import BLEU, CHRF

ORDER = 4
SMOOTH = "exp"
_BLEU = BLEU(tokenize="13a", smooth_method=SMOOTH)
_CHRF = CHRF()
_CHRF_STATS = len(_CHRF._extract_corpus_statistics(["a"], [["a"]])[0])


def translation_statistics(hyps: Sequence[str], refs: Sequence[str]) -> Dict[str, float]:
    """Summable BLEU + chrF statistics of detokenised hypotheses against one reference each."""
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses for {len(refs)} references")
    out: Dict[str, float] = {"bleu_sys_len": 0, "bleu_ref_len": 0}
    for n in range(1, ORDER + 1):
        out[f"bleu_correct_{n}"] = 0
        out[f"bleu_total_{n}"] = 0
    # chrF's statistics vector has a fixed length (3 per character/word n-gram order): zeros when empty, so
    # every batch and rank returns the same keys (DDP sums them key by key)
    for i in range(_CHRF_STATS):
        out[f"chrf_{i}"] = 0
    if not hyps:
        return out
    # per sentence: [sys_len, ref_len, correct_1..4, total_1..4] (sacrebleu 2.x layout)
    for stats in _BLEU._extract_corpus_statistics(list(hyps), [list(refs)]):
        out["bleu_sys_len"] += stats[0]
        out["bleu_ref_len"] += stats[1]
        for n in range(1, ORDER + 1):
            out[f"bleu_correct_{n}"] += stats[1 + n]
            out[f"bleu_total_{n}"] += stats[1 + ORDER + n]
    for stats in _CHRF._extract_corpus_statistics(list(hyps), [list(refs)]):
        for i, value in enumerate(stats):
            out[f"chrf_{i}"] += value
    return out


def statistics_by_domain(hyps: Sequence[str], refs: Sequence[str], domains: Sequence[str],
                         all_domains: Sequence[str]) -> Dict[str, float]:
    """``<domain>/<statistic>`` for every domain of the split (zeros for those absent from this batch):
    summed like the overall statistics, they give each domain's exact corpus BLEU / chrF."""
    out: Dict[str, float] = {}
    for domain in all_domains:
        mine = [i for i, d in enumerate(domains) if d == domain]
        stats = translation_statistics([hyps[i] for i in mine], [refs[i] for i in mine])
        out.update({f"{domain}/{k}": v for k, v in stats.items()})
    return out


def domain_metrics(summed: Mapping[str, float]) -> Dict[str, float]:
    """``bleu_<domain>`` / ``chrf_<domain>`` from summed ``statistics_by_domain`` outputs."""
    domains = sorted({k.split("/", 1)[0] for k in summed if "/bleu_sys_len" in k})
    out = {}
    for domain in domains:
        mine = {k.split("/", 1)[1]: v for k, v in summed.items() if k.startswith(domain + "/")}
        if mine["bleu_ref_len"] > 0:
            out[f"bleu_{domain}"] = float(bleu_from_statistics(mine).score)
            out[f"chrf_{domain}"] = chrf_from_statistics(mine)
    return out


def bleu_from_statistics(summed: Mapping[str, float]):
    """A sacrebleu BLEUScore (``.score``, ``.precisions``, ``.bp``) from summed statistics."""
    return BLEU.compute_bleu(
        correct=[int(summed[f"bleu_correct_{n}"]) for n in range(1, ORDER + 1)],
        total=[int(summed[f"bleu_total_{n}"]) for n in range(1, ORDER + 1)],
        sys_len=int(summed["bleu_sys_len"]), ref_len=int(summed["bleu_ref_len"]), smooth_method=SMOOTH)


def chrf_from_statistics(summed: Mapping[str, float]) -> float:
    keys = sorted((k for k in summed if k.startswith("chrf_")), key=lambda k: int(k.split("_")[1]))
    if not keys:
        return 0.0
    return float(_CHRF._compute_score_from_stats([int(summed[k]) for k in keys]).score)


def signatures() -> Dict[str, str]:
    """sacreBLEU's reproducibility signatures of the two metrics, e.g. nrefs:1|case:mixed|eff:no|tok:13a|..."""
    return {"bleu": str(_BLEU.get_signature()), "chrf": str(_CHRF.get_signature())}
