"""How well page confidence predicts page errors, and which thresholds to use.

Pure maths over reviewed pages: each page brings its confidence (what routing saw)
and its CER (between the machine text and the reviewer's final text). A page is
**bad** when its CER is above ``bad_cer``. ``appliance calibrate`` gathers the pages
from the store and prints ``calibration_report``.

- ``auroc``: how well low confidence finds bad pages (1.0 perfect, 0.5 chance).
- ``accepted_error_rates``: for each candidate ``accept_from``, the share of pages it
  accepts and the share of bad pages among them.
- ``suggest_thresholds``: the lowest ``accept_from`` that meets a target
  accepted-error rate, and a ``review_below`` for the sample band (rule below).

Reviewed pages are the evidence, and routing decides which pages get reviewed: pages
above ``accept_from`` reach it only through sampling, so keep a sample rate above
zero for the calibration to see them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["accepted_error_rates", "auroc", "calibration_report", "suggest_thresholds"]

DEFAULT_THRESHOLDS = (0.5, 0.6, 0.7, 0.75, 0.8, 0.9)
# Suggested thresholds are multiples of this: config-friendly values, and a page's
# exact confidence is not a meaningful boundary.
GRID_STEP = 0.01
_EPSILON = 1e-9  # float slack when an error rate equals the target exactly


def auroc(scores: Sequence[float], positives: Sequence[bool]) -> float | None:
    """Area under the ROC curve of ``1 - score`` for finding the positives.

    Here the positives are the bad pages and the scores their confidences, so this is
    the probability that a random bad page has a LOWER confidence than a random good
    page, a tie counting one half (the Mann-Whitney U statistic over the pairs).
    None when either class is empty.
    """
    _same_length(scores, positives)
    bad = sum(1 for p in positives if p)
    good = len(positives) - bad
    if not bad or not good:
        return None
    # mid-ranks by ascending confidence; U(good above bad) from the good pages' ranks
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    ranks = [0.0] * len(scores)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and scores[order[end + 1]] == scores[order[start]]:
            end += 1
        for k in range(start, end + 1):
            ranks[order[k]] = (start + end) / 2 + 1
        start = end + 1
    good_ranks = sum(rank for rank, positive in zip(ranks, positives) if not positive)
    return (good_ranks - good * (good + 1) / 2) / (good * bad)


def accepted_error_rates(confidences: Sequence[float], cers: Sequence[float], *,
                         bad_cer: float = 0.05,
                         thresholds: Sequence[float] = DEFAULT_THRESHOLDS) -> list[dict]:
    """Per threshold (accept when confidence >= threshold): ``threshold``,
    ``accepted`` (pages), ``accepted_share`` (of all pages), ``errors`` (bad accepted
    pages) and ``error_rate`` (errors / accepted; None when nothing is accepted)."""
    _same_length(confidences, cers)
    return [_pool(confidences, cers, threshold, bad_cer) for threshold in thresholds]


def suggest_thresholds(confidences: Sequence[float], cers: Sequence[float], *,
                       target_error_rate: float = 0.02, bad_cer: float = 0.05,
                       sample_rate: float = 0.1) -> dict:
    """Thresholds that keep the accepted-error rate at or below ``target_error_rate``.

    ``accept_from``: the lowest threshold whose accepted pages (confidence >= it) hold
    at most ``target_error_rate`` bad pages; the lowest, because it accepts the most.
    Thresholds are multiples of GRID_STEP. Every threshold between the highest
    confidence left out and the lowest one accepted accepts the same pages; the
    suggestion is the highest of them (the lowest accepted confidence, rounded down to
    the grid), so it never extends acceptance into a stretch of confidence no
    reviewed page has been seen in. None when no non-empty pool meets the target:
    accept nothing automatically.

    ``review_below``: pages in the sample band [review_below, accept_from) are
    accepted too unless sampled (at ``sample_rate``), so they count against the same
    target. It is the lowest multiple of GRID_STEP (at most ``accept_from``) for
    which all pages that pass unreviewed, the accepted ones plus the unsampled
    share ``1 - sample_rate`` of the band, still hold at most ``target_error_rate``
    bad pages in expectation (rounded up to the lowest band page, as above). When
    ``accept_from`` spends the whole error budget, the band is empty
    (``review_below == accept_from``).

    Also returned: the ``accepted_share`` and ``accepted_error_rate`` of
    ``accept_from`` alone, the ``unreviewed_share`` and ``unreviewed_error_rate`` of
    both thresholds together, and the expected ``review_share``.
    """
    _same_length(confidences, cers)
    if not 0.0 <= sample_rate <= 1.0:
        raise ValueError(f"sample_rate must lie in [0, 1], got {sample_rate}")
    total = len(confidences)
    result = {"target_error_rate": target_error_rate, "bad_cer": bad_cer,
              "sample_rate": sample_rate, "pages": total, "accept_from": None,
              "review_below": None, "accepted_share": 0.0, "accepted_error_rate": None,
              "unreviewed_share": 0.0, "unreviewed_error_rate": None, "review_share": 1.0}
    grid = [round(k * GRID_STEP, 10) for k in range(round(1 / GRID_STEP) + 1)]
    lowest = next((t for t in grid
                   if (pool := _pool(confidences, cers, t, bad_cer))["accepted"]
                   and pool["errors"] <= target_error_rate * pool["accepted"] + _EPSILON), None)
    if lowest is None:
        return result
    accept_from = _snug(min(c for c in confidences if c >= lowest))
    pool = _pool(confidences, cers, accept_from, bad_cer)
    unsampled = 1.0 - sample_rate
    review_below, passed, errors = accept_from, float(pool["accepted"]), float(pool["errors"])
    for t in grid:
        if t >= accept_from:
            break
        band = [cer for conf, cer in zip(confidences, cers) if t <= conf < accept_from]
        band_passed = pool["accepted"] + unsampled * len(band)
        band_errors = pool["errors"] + unsampled * sum(1 for cer in band if cer > bad_cer)
        if band_errors <= target_error_rate * band_passed + _EPSILON:
            if band:
                review_below = _snug(min(c for c in confidences if t <= c < accept_from))
                passed, errors = band_passed, band_errors
            break
    result.update(accept_from=accept_from, review_below=review_below,
                  accepted_share=pool["accepted_share"], accepted_error_rate=pool["error_rate"],
                  unreviewed_share=passed / total, unreviewed_error_rate=errors / passed,
                  review_share=1.0 - passed / total)
    return result


def calibration_report(confidences: Sequence[float], cers: Sequence[float], *,
                       bad_cer: float = 0.05, target_error_rate: float = 0.02,
                       sample_rate: float = 0.1) -> dict:
    """Everything together: ``pages``, ``bad_pages``, ``bad_rate``, ``bad_cer``,
    ``auroc``, ``thresholds`` (``accepted_error_rates``) and ``suggestion``
    (``suggest_thresholds``)."""
    _same_length(confidences, cers)
    positives = [cer > bad_cer for cer in cers]
    bad = sum(positives)
    return {
        "pages": len(cers),
        "bad_cer": bad_cer,
        "bad_pages": bad,
        "bad_rate": bad / len(cers) if cers else None,
        "auroc": auroc(confidences, positives),
        "thresholds": accepted_error_rates(confidences, cers, bad_cer=bad_cer),
        "suggestion": suggest_thresholds(confidences, cers, target_error_rate=target_error_rate,
                                         bad_cer=bad_cer, sample_rate=sample_rate),
    }


def _snug(confidence: float) -> float:
    """The grid value at or just below ``confidence``."""
    return round(math.floor(confidence / GRID_STEP + _EPSILON) * GRID_STEP, 10)


def _pool(confidences: Sequence[float], cers: Sequence[float], threshold: float,
          bad_cer: float) -> dict:
    accepted = [cer for conf, cer in zip(confidences, cers) if conf >= threshold]
    errors = sum(1 for cer in accepted if cer > bad_cer)
    return {"threshold": threshold, "accepted": len(accepted),
            "accepted_share": len(accepted) / len(cers) if cers else 0.0,
            "errors": errors, "error_rate": errors / len(accepted) if accepted else None}


def _same_length(first: Sequence, second: Sequence) -> None:
    if len(first) != len(second):
        raise ValueError(f"need one value per page in both lists, got {len(first)} and "
                         f"{len(second)}")
    for value in (*first, *second):
        if isinstance(value, float) and math.isnan(value):
            raise ValueError("a confidence or CER is NaN")
