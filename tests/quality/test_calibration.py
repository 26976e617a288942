from __future__ import annotations

import random

import pytest

from appliance.quality.calibration import (
    accepted_error_rates,
    auroc,
    calibration_report,
    suggest_thresholds,
)


def test_auroc_perfect_inverse_and_random():
    # bad pages (positives) all below every good page: perfect
    assert auroc([0.1, 0.2, 0.8, 0.9], [True, True, False, False]) == 1.0
    assert auroc([0.1, 0.2, 0.8, 0.9], [False, False, True, True]) == 0.0
    rng = random.Random(7)
    scores = [rng.random() for _ in range(4000)]
    positives = [rng.random() < 0.3 for _ in scores]
    assert auroc(scores, positives) == pytest.approx(0.5, abs=0.03)


def test_auroc_ties_count_half():
    assert auroc([0.5, 0.5], [True, False]) == 0.5
    assert auroc([0.5] * 6, [True, False, True, False, False, False]) == 0.5
    # bad: 0.2, 0.6; good: 0.6, 0.9 -> pairs (0.2<0.6) 1, (0.2<0.9) 1, (0.6=0.6) 0.5, (0.6<0.9) 1
    assert auroc([0.2, 0.6, 0.6, 0.9], [True, True, False, False]) == pytest.approx(3.5 / 4)


def test_auroc_is_none_with_one_class():
    assert auroc([0.1, 0.9], [False, False]) is None
    assert auroc([0.1, 0.9], [True, True]) is None
    assert auroc([], []) is None


def test_lists_of_different_lengths_are_refused():
    with pytest.raises(ValueError, match="one value per page"):
        auroc([0.1], [True, False])


# ten pages: confidences 0.05 .. 0.95; the three lowest and the one at 0.65 are bad
CONF = [0.05, 0.15, 0.25, 0.35, 0.45, 0.55, 0.65, 0.75, 0.85, 0.95]
CERS = [0.40, 0.30, 0.10, 0.01, 0.00, 0.02, 0.20, 0.00, 0.03, 0.00]


def test_accepted_error_rates():
    rows = accepted_error_rates(CONF, CERS, thresholds=(0.0, 0.5, 0.7, 0.99))
    assert [r["accepted"] for r in rows] == [10, 5, 3, 0]
    assert [r["accepted_share"] for r in rows] == [1.0, 0.5, 0.3, 0.0]
    assert [r["errors"] for r in rows] == [4, 1, 0, 0]
    assert rows[0]["error_rate"] == pytest.approx(0.4)
    assert rows[1]["error_rate"] == pytest.approx(0.2)
    assert rows[2]["error_rate"] == 0.0
    assert rows[3]["error_rate"] is None
    # bad_cer moves the line: at 0.25 only two pages are bad
    assert accepted_error_rates(CONF, CERS, bad_cer=0.25, thresholds=(0.0,))[0]["errors"] == 2


def test_suggest_accept_from_is_the_lowest_meeting_the_target():
    strict = suggest_thresholds(CONF, CERS, target_error_rate=0.0, sample_rate=0.0)
    # 0.66 .. 0.75 all accept the same three pages; the suggestion does not reach
    # below the lowest of them into confidences no page showed
    assert strict["accept_from"] == pytest.approx(0.75)
    assert strict["accepted_share"] == pytest.approx(0.3)
    assert strict["accepted_error_rate"] == 0.0
    assert strict["review_below"] == strict["accept_from"]  # no budget left for a band
    loose = suggest_thresholds(CONF, CERS, target_error_rate=0.2, sample_rate=0.0)
    assert loose["accept_from"] == pytest.approx(0.35)  # 0.35 .. 0.95: 1 bad in 7 (14 %)
    assert loose["accepted_error_rate"] == pytest.approx(1 / 7)
    # without sampling a band page is as good as accepted: 0.25 (bad) would make 2 in 8
    assert loose["review_below"] == loose["accept_from"]


def test_suggest_review_below_spends_the_remaining_budget_on_the_band():
    # accept_from 0.35 accepts 7 pages with 1 error; at a 50 % sample rate a band page
    # passes unreviewed with weight 0.5. A band from 0.25 adds the bad 0.25: 1.5 errors
    # in 7.5 pages, 20 %; from 0.15 it adds the bad 0.15 too: 2 in 8, 25 %: too many.
    mixed = suggest_thresholds(CONF, CERS, target_error_rate=0.2, sample_rate=0.5)
    assert mixed["accept_from"] == pytest.approx(0.35)
    assert mixed["review_below"] == pytest.approx(0.25)
    assert mixed["unreviewed_error_rate"] == pytest.approx(0.2)
    assert mixed["unreviewed_share"] == pytest.approx(0.75)
    assert mixed["review_share"] == pytest.approx(0.25)
    # no error budget left: no band, whatever the sample rate
    strict = suggest_thresholds(CONF, CERS, target_error_rate=0.0, sample_rate=0.5)
    assert strict["review_below"] == strict["accept_from"] == pytest.approx(0.75)


def test_suggest_when_nothing_meets_the_target():
    result = suggest_thresholds([0.9, 0.8], [0.5, 0.5], target_error_rate=0.02)
    assert result["accept_from"] is None and result["review_below"] is None
    assert result["review_share"] == 1.0
    assert suggest_thresholds([], [])["accept_from"] is None


def test_calibration_report():
    report = calibration_report(CONF, CERS, target_error_rate=0.2)
    assert report["pages"] == 10 and report["bad_pages"] == 4
    assert report["bad_rate"] == pytest.approx(0.4)
    # bad at 0.05, 0.15, 0.25, 0.65; good pages: six. Pairs with bad below good:
    # the three low bad pages beat all 6 goods (18), 0.65 beats 3 of them (0.75+)
    assert report["auroc"] == pytest.approx(21 / 24)
    assert [r["threshold"] for r in report["thresholds"]] == [0.5, 0.6, 0.7, 0.75, 0.8, 0.9]
    assert report["suggestion"]["accept_from"] == pytest.approx(0.35)
    empty = calibration_report([], [])
    assert empty["auroc"] is None and empty["bad_rate"] is None
