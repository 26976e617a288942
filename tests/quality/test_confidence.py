from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from appliance.config import DOC_TYPES
from appliance.page import Line, Recognition
from appliance.quality.confidence import (
    CLASSIC_CHECK,
    CONFIRMABLE_BASE,
    EXPECTED_CHARS,
    VISION_CHECK,
    needs_second_opinion,
    score_page,
    text_agreement,
    weighted_percentile,
)
from appliance.quality.postprocess import postprocess
from appliance.quality.text_checks import bad_chars, implausible_figures, script_mix

CLEAN_LINES = [
    "INVOICE 2024-0117",
    "Acme Office Supplies Ltd, 12 Market Street, Springfield",
    "Bill to: Northwind Traders, 4 Harbour Road",
    "Item Qty Price",
    "Printer paper A4 10 42.50",
    "Toner cartridge black 2 118.00",
    "Total due 160.50 EUR",
]
CLEAN_TEXT = "\n".join(CLEAN_LINES)


def classic(texts=CLEAN_LINES, score=0.99, **fields) -> Recognition:
    lines = [Line(text=t, box=[0, 40 * i, 400, 40 * i + 30], score=score)
             for i, t in enumerate(texts)]
    return Recognition(text="\n".join(texts), markdown="\n".join(texts), lines=lines, **fields)


def vlm(text=CLEAN_TEXT, logprob=-0.01, low=None, **fields) -> Recognition:
    """A VLM reading of ``text``, one token per word; every tenth token at ``low``."""
    words = text.split()
    tokens = [{"t": w, "lp": low if low is not None and i % 10 == 0 else logprob, "h": 0.1}
              for i, w in enumerate(words)]
    return Recognition(text=text, markdown=text, tokens=tokens,
                       provenance={"rung": "greedy", **fields.pop("provenance", {})}, **fields)


def test_expected_lengths_cover_every_doc_type():
    assert set(EXPECTED_CHARS) == set(DOC_TYPES)
    assert all(0 < low < high for low, high in EXPECTED_CHARS.values())


def test_perfect_classic_page_scores_high_without_penalties():
    conf = score_page(classic(), doc_type="invoice")
    assert conf.score >= 0.85
    assert conf.penalties == []
    assert conf.signals["source"] == "lines"
    assert conf.signals["line_score_mean"] == pytest.approx(0.99)
    json.dumps(conf.signals)  # stored with the page


def test_confident_vlm_page_scores_high_without_penalties():
    conf = score_page(vlm(), doc_type="invoice")
    assert conf.score >= 0.95
    assert conf.penalties == []
    assert conf.signals["source"] == "tokens"
    assert conf.signals["logprob_mean"] == pytest.approx(-0.01)


def test_unsure_tokens_score_lower_than_confident_ones():
    sure = score_page(vlm(), doc_type="invoice")
    shaky = score_page(vlm(logprob=-0.3), doc_type="invoice")
    few_unsure = score_page(vlm(low=-3.0), doc_type="invoice")
    assert shaky.score < sure.score
    # a fluent page with a few very unsure words: the low percentile catches it
    assert few_unsure.score < sure.score
    assert few_unsure.signals["logprob_p10"] < -1
    very_unsure = score_page(vlm(logprob=-1.5), doc_type="invoice")
    assert very_unsure.score < 0.5
    assert "low_token_probability" in very_unsure.penalties


def test_low_classic_line_scores_score_lower():
    assert (score_page(classic(score=0.8), doc_type="invoice").score
            < score_page(classic(score=0.95), doc_type="invoice").score
            < score_page(classic(score=0.99), doc_type="invoice").score)
    low = score_page(classic(score=0.8), doc_type="invoice")
    assert "low_line_score" in low.penalties


def test_a_short_unsure_line_weighs_by_its_characters():
    lines = [*CLEAN_LINES, "("]
    scores = [0.99] * len(CLEAN_LINES) + [0.5]
    rec = classic(lines)
    rec = replace(rec, lines=[replace(line, score=score)
                              for line, score in zip(rec.lines, scores)])
    # one character in ~250 at 0.5: a hair lower, not sunk by the p10
    assert score_page(rec, doc_type="invoice").score == pytest.approx(
        score_page(classic(), doc_type="invoice").score, abs=0.02)
    assert weighted_percentile([(0.5, 1), (0.9, 99)], 10) == 0.9
    assert weighted_percentile([(0.5, 20), (0.9, 80)], 10) == 0.5


# each penalty lowers the score of an otherwise perfect page and names itself
PENALISED = {
    "truncated": lambda: vlm(flags=["tiled", "truncated"], finish_reason="length"),
    "fallback": lambda: classic(flags=["fallback"]),
    "degraded": lambda: classic(flags=["degraded"], provenance={"repair": {"level": 2}}),
    "repaired": lambda: classic(flags=["repaired"], provenance={"repair": {"level": 1}}),
    "retried": lambda: vlm(provenance={"rung": "sampled"}),
    "length_anomaly": lambda: classic(["Total 1.00"]),
    "charset_anomaly": lambda: classic([*CLEAN_LINES[:-1], "Total due 160.50 \ufffd"]),
    "repetition": lambda: vlm("\n".join([*CLEAN_LINES, *["Toner cartridge black 2 118.00"] * 6])),
    "empty_output": lambda: vlm(""),
}


@pytest.mark.parametrize("penalty", PENALISED)
def test_each_penalty_lowers_the_score_and_names_itself(penalty):
    clean = score_page(vlm() if PENALISED[penalty]().tokens else classic(), doc_type="invoice")
    conf = score_page(PENALISED[penalty](), doc_type="invoice")
    assert conf.score < clean.score
    assert penalty in conf.penalties
    assert 0.0 <= conf.score <= 1.0


def test_penalty_sizes_follow_the_routing_bands():
    # text known to be missing: review, however sure the engine was
    assert score_page(PENALISED["truncated"](), doc_type="invoice").score < 0.5
    assert score_page(PENALISED["empty_output"](), doc_type="invoice").score < 0.5
    # never auto-accepted
    for name in ("fallback", "degraded", "length_anomaly"):
        assert score_page(PENALISED[name](), doc_type="invoice").score < 0.75, name
    perfect_but_long = vlm("x" * 2000, logprob=0.0)
    assert score_page(perfect_but_long, doc_type="id_card").score < 0.75
    # a level-1 repair keeps every word: still accepted
    assert score_page(PENALISED["repaired"](), doc_type="invoice").score >= 0.75


def test_penalties_multiply():
    one = score_page(classic(flags=["fallback"]), doc_type="invoice")
    two = score_page(classic(flags=["fallback", "truncated"]), doc_type="invoice")
    assert two.score < one.score
    assert two.penalties == ["truncated", "fallback"]
    # a fallback comes from the ladder's last rung: it is not also "retried"
    fallback = classic(flags=["fallback"], provenance={"rung": "tiled"})
    assert score_page(fallback, doc_type="invoice").penalties == ["fallback"]


def test_repair_level_is_read_from_postprocess():
    rec = vlm("| a | b |\n| 1 | 2 | 3 |\nTotal due 160.50 EUR, paid in full by transfer")
    rec = postprocess(rec)
    conf = score_page(rec, doc_type="invoice")
    assert conf.signals["repair_level"] == rec.provenance["repair"]["level"]
    assert ("repaired" in conf.penalties) == (conf.signals["repair_level"] == 1)


def test_repeated_lines_count_only_in_generated_text():
    form = [*CLEAN_LINES, *["Signature: ________ Date: ________"] * 6]
    assert "repetition" not in score_page(classic(form), doc_type="invoice").penalties
    # two identical panels on one page are a real document, even generated
    twice = vlm("\n".join(CLEAN_LINES * 2))
    assert "repetition" not in score_page(twice, doc_type="invoice").penalties
    flagged = vlm(flags=["degenerate"])
    assert "repetition" in score_page(flagged, doc_type="invoice").penalties


def test_length_anomaly_long_and_short():
    long = score_page(classic(["x" * 2000]), doc_type="id_card")
    assert long.signals["length_anomaly"] == "long"
    short = score_page(classic(["Total"]), doc_type="contract")
    assert short.signals["length_anomaly"] == "short"
    assert score_page(classic(), doc_type="invoice").signals["length_anomaly"] is None


def test_unknown_doc_type_is_refused():
    with pytest.raises(ValueError, match="unknown document type"):
        score_page(classic(), doc_type="poem")


def test_charset_anomalies():
    assert bad_chars("ok\n\ttab\r\n") == 0
    assert bad_chars("a\ufffdb\x00c\x85") == 3
    assert script_mix("Hello мир") == ("LATIN", 3, 8)
    assert script_mix("東京タワー ひらがな")[0:2] == ("CJK", 0)  # kana count as CJK
    assert script_mix("ＡＢＣ abc")[1] == 0  # fullwidth Latin is Latin
    assert script_mix("12 + 3") == (None, 0, 0)

    control = score_page(classic([*CLEAN_LINES[:-1], "Total\x07 due 160.50"]), doc_type="invoice")
    assert control.signals["bad_chars"] == 1
    assert "charset_anomaly" in control.penalties
    # a recogniser inventing CJK glyphs on a Latin page
    stray = score_page(classic([*CLEAN_LINES, "口田日" * 8]), doc_type="invoice")
    assert stray.signals["dominant_script"] == "LATIN"
    assert stray.signals["foreign_script_ratio"] > 0.05
    assert "charset_anomaly" in stray.penalties
    # a Greek mu or two in a Latin page is not an anomaly
    mu = score_page(classic([*CLEAN_LINES, "Dose 5 μg"]), doc_type="invoice")
    assert "charset_anomaly" not in mu.penalties


def test_agreement_and_disagreement():
    reading = vlm(logprob=-0.15)
    alone = score_page(reading, doc_type="invoice")
    assert alone.signals["agreement"] is None
    agree = score_page(reading, doc_type="invoice", second_opinion=classic())
    assert agree.signals["agreement"] >= VISION_CHECK[0]
    assert agree.score > alone.score
    assert agree.penalties == []
    # a confirmed reading is no longer named unsure
    unsure = vlm(logprob=-0.5)
    assert "low_token_probability" in score_page(unsure, doc_type="invoice").penalties
    confirmed = score_page(unsure, doc_type="invoice", second_opinion=classic())
    assert confirmed.signals["base"] >= 0.75 and confirmed.penalties == []
    other = classic(["Quarterly report", "Revenue grew in the northern region",
                     "See appendix B for the figures"])
    disagree = score_page(reading, doc_type="invoice", second_opinion=other)
    assert disagree.signals["agreement"] < 0.5
    assert "disagreement" in disagree.penalties
    assert disagree.score < alone.score


def test_tesseract_confirms_a_classic_reading_but_its_disagreement_is_no_penalty():
    reading = classic(score=0.97)  # in doubt: below auto-accept on its own
    alone = score_page(reading, doc_type="invoice")
    assert alone.score < 0.75
    # Tesseract misreads a few words of a page it reads: still confirms
    words = CLEAN_TEXT.replace("Acme Office Supplies Ltd, 12 Market Street",
                               "Acrne 0ffice Suppl1es Ltd, I2 Markct Strect"
                               ).replace("cartridge", "cartrldgc")
    confirmed = score_page(reading, doc_type="invoice", second_opinion=Recognition(words, words))
    assert CLASSIC_CHECK[0] <= confirmed.signals["agreement"] < 0.95
    assert confirmed.score > alone.score
    # it reads nothing of a poor scan the classic engine read: no verdict either way
    unread = score_page(reading, doc_type="invoice", second_opinion=Recognition("", ""))
    assert unread.signals["agreement"] == 0.0
    assert unread.score == alone.score and "disagreement" not in unread.penalties


def test_agreement_ignores_reading_order_markup_and_case():
    vlm_text = "| Item | Price |\n| Toner | 118.00 |\nTOTAL 118.00"
    classic_text = "Total 118.00\nItem Price\nToner 118.00"
    assert text_agreement(vlm_text, classic_text) == 1.0
    assert text_agreement("", "") == 1.0
    assert text_agreement("abc", "") == 0.0


def test_chinese_readings_agree_by_their_characters():
    """Tesseract spaces Chinese characters apart, RapidOCR reads a line's run whole: as
    runs, two readings of the same Chinese page agreed at 0.22 (median of 55 pages), so
    none could be confirmed; character by character at 0.93. A character read
    otherwise costs what it is, not its whole run."""
    rapid = "几周以来我第一次独处，又拾起了我真正的生活。"
    assert text_agreement(rapid, "几 周 以 来 我 第 一 次 独 处 ， 又 拾 起 了 我 真 正 的 生 活 。") == 1.0
    assert 0.9 < text_agreement(rapid, "几周以来我第一次独处，又拾起了我真正的生话。") < 1.0


def test_empty_output():
    empty = score_page(Recognition(text="", markdown=""), doc_type="generic")
    assert "empty_output" in empty.penalties
    assert empty.score < 0.5
    # the VLM read nothing where the classic engine finds text
    missed = score_page(vlm(""), doc_type="generic", second_opinion=classic())
    assert "empty_output" in missed.penalties and "disagreement" in missed.penalties


def test_a_blank_page_read_as_blank_is_not_empty_output():
    provenance = {"preprocess": [{"step": "crop", "ms": 1.0,
                                  "detail": {"skipped": "blank page"}}]}
    blank = score_page(Recognition(text="", markdown="", provenance=provenance),
                       doc_type="generic")
    assert blank.signals["blank_page"] is True
    assert blank.penalties == []
    assert blank.score >= 0.75


def test_no_evidence_samples_but_never_accepts():
    conf = score_page(Recognition(text=CLEAN_TEXT, markdown=CLEAN_TEXT), doc_type="invoice")
    assert conf.signals["source"] == "none"
    assert 0.5 <= conf.score < 0.75
    assert "no_evidence" in conf.penalties


def test_score_stays_in_unit_interval():
    worst = vlm("\ufffd\x00" * 30 + "\n" + "same line again here\n" * 40, logprob=-50.0,
                flags=["truncated", "fallback", "degraded"], finish_reason="length",
                provenance={"rung": "tiled"})
    assert 0.0 <= score_page(worst, doc_type="id_card").score <= 1.0
    forced = vlm(logprob=-math.inf)
    assert 0.0 <= score_page(forced, doc_type="invoice").score <= 1.0
    best = vlm(logprob=0.0)
    assert score_page(best, doc_type="invoice").score == 1.0


BANDS = (0.5, 0.75)  # review below, accept from


def asks(recognition: Recognition, bands=BANDS, made_anyway=False, **scored) -> bool:
    confidence = score_page(recognition, doc_type="invoice", **scored)
    return needs_second_opinion(recognition, confidence, doc_type="invoice", bands=bands,
                                made_anyway=made_anyway)


def test_needs_second_opinion():
    assert asks(vlm(logprob=-0.3))
    assert not asks(vlm())
    # a classic reading in doubt is read again too (by Tesseract), a sure one is not
    assert asks(classic(score=0.97))
    assert not asks(classic())
    # already compared, a fallback, no evidence: nothing to compare against
    assert not asks(vlm(logprob=-0.3), bands=(0.5, 1.0), second_opinion=classic())
    assert not asks(classic(score=0.97, flags=["fallback"]))
    assert not asks(Recognition(text="", markdown=""))
    # text without evidence (a server that sends no logprobs): agreement is its evidence
    assert asks(Recognition(text=CLEAN_TEXT, markdown=CLEAN_TEXT))


def test_a_second_opinion_is_asked_only_where_it_could_change_the_route():
    # Tesseract's agreement lifts a classic page at most halfway to 1 and never lowers
    # it: a page that would stay under review_below even if confirmed is not read again
    hopeless = classic(score=0.97, flags=["truncated"])
    confirmed = score_page(hopeless, doc_type="invoice", second_opinion=hopeless).score
    assert score_page(hopeless, doc_type="invoice").score < confirmed < BANDS[0]
    assert not asks(hopeless)
    # the same page with a lower review threshold: confirmation would carry it across
    assert asks(hopeless, bands=(confirmed - 0.01, 0.75))
    # a second reading made anyway (a vision page's word boxes) is always compared
    assert asks(hopeless, made_anyway=True)
    # a vision reading in the sample band that the classic engine could contradict (a
    # penalty) is read again though no agreement could carry it to auto-accept
    assert asks(vlm(logprob=-0.3))


def test_a_classic_reading_tesseract_would_not_confirm_is_not_read_again():
    # its own base under CONFIRMABLE_BASE: the recogniser misread enough for no second
    # reader to share nine words in ten, though a confirmation would change its band
    unsure = classic(score=0.94)
    alone = score_page(unsure, doc_type="invoice")
    assert alone.signals["base"] < CONFIRMABLE_BASE and alone.score < BANDS[0]
    assert score_page(unsure, doc_type="invoice", second_opinion=unsure).score >= BANDS[0]
    assert not asks(unsure)
    # the same base behind a penalty is asked: Tesseract may confirm its words
    assert asks(classic(score=0.97, flags=["truncated"]), bands=(0.4, 0.75))
    # and a vision reading that unsure is compared: the classic engine may contradict it
    assert asks(vlm(logprob=-0.8))



def test_a_misread_figure_keeps_a_receipt_from_auto_accept():
    sure = [*CLEAN_LINES[:-1]]
    clean = score_page(classic([*sure, "Total due 160.50 EUR", "Date 31/12/2024"]),
                       doc_type="receipt")
    assert clean.signals["misread_amounts"] == clean.signals["impossible_dates"] == 0
    assert "implausible_figures" not in clean.penalties and clean.score >= 0.75
    for last, signal in (("Total due 16O.50 EUR", "misread_amounts"),
                         ("Total due (S.00)", "misread_amounts"),
                         ("Date 31/13/2024", "impossible_dates")):
        page = score_page(classic([*sure, last]), doc_type="receipt")
        assert page.signals[signal] == 1, last
        assert "implausible_figures" in page.penalties and page.score < 0.75, last
        # a letter that only looks like a digit is common in other pages' codes: counted,
        # not penalised
        other = score_page(classic([*sure, last]), doc_type="generic")
        assert other.signals[signal] == 1 and "implausible_figures" not in other.penalties


def test_dates_either_way_round_and_codes_are_plausible():
    assert implausible_figures("12/31/2024 31/12/24 1/2/2020 code 4B0-17 3O0 RM 118.50") == (0, 0)
    assert implausible_figures("00/12/2020 and 1,5O and 12.5O.") == (2, 1)


def test_selection_marks_found_on_the_page_are_not_scored_as_read_text():
    """A check box's token (raster.marks) is found, not read: a page scores the same with
    its marks as without, however sure the finder was of them."""
    plain = classic(["Delivery", "Assembly"])
    marked = replace(plain, text=":selected: Delivery\n:unselected: Assembly",
                     lines=[*plain.lines, Line(":selected:", [0, 0, 30, 30], 0.6),
                            Line(":unselected:", [0, 40, 30, 70], 0.6)])
    assert score_page(marked, doc_type="generic") == score_page(plain, doc_type="generic")
