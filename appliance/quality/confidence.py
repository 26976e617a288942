"""Page confidence: one number in [0, 1] from the signals a reading carries with it.

Every input signal is kept in ``Confidence.signals`` (JSON-serialisable), and every
signal that lowered the score is named in ``Confidence.penalties``, so the review
console, ``appliance calibrate`` and ``appliance eval`` read the same facts and
nobody has to re-derive why a page is poor.

The combination, in three steps (each constant below says why it has its size):

1. **Base: how sure the recogniser was of its own text** (0..1).

   - VLM (``Recognition.tokens``): ``0.5 * exp(mean logprob) + 0.5 * exp(p10 logprob)``
     over the chosen tokens. The mean is the typical token's probability; the 10th
     percentile catches a page that is fluent overall but unsure of a handful of
     words, which is where a transcription's errors are (a wrong digit in an amount).
   - Classic (``Recognition.lines``, RapidOCR's per-line scores, each the mean of the
     line's character probabilities): the same blend of the character-weighted mean
     and the character-weighted 10th-percentile line score, then stretched as
     ``1 - CLASSIC_STRETCH * (1 - blend)``: RapidOCR's scores sit in a narrow band
     just under 1 (a line with a wrong character still scores ~0.9), so a few points
     of score are many points of error. The stretch was set on FUNSD scans and two
     clean prints (see ``CLASSIC_STRETCH``).
   - Neither (an old cache entry, say): ``NO_EVIDENCE_BASE``, which samples but never
     auto-accepts.
   - Empty text: see ``EMPTY_OUTPUT_FACTOR`` and ``BLANK_PAGE_BASE``.

2. **Second opinion** (only when the caller passes another engine's reading of the
   page: the classic engine's of a VLM page, Tesseract's of a classic one): the
   normalised similarity of the two texts' words. Two independent recognisers that
   agree almost word for word move the base halfway to 1 (``VISION_CHECK``,
   ``CLASSIC_CHECK``,
   ``AGREEMENT_LIFT``); clear disagreement with the classic engine is a penalty.

3. **Penalties**: the base is multiplied by one factor per problem found. A factor
   is in (0, 1), so every penalty lowers the score and none can raise it, and the
   score is monotone in each signal. The factors' sizes follow the routing bands
   (review below 0.5, accept from 0.75): a problem that means text is known to be
   missing (truncated, empty) takes even a perfect page below 0.5; a problem that
   rules out auto-accept (fallback, degraded, length anomaly, a misread figure on a
   receipt, invoice or table) takes a perfect page below 0.75; a cosmetic one (a level-1 repair) costs a few points.

The signals (``Confidence.signals``): ``source`` ("tokens" | "lines" | "none"),
``tokens``, ``logprob_mean``, ``logprob_p10``, ``lines``, ``line_score_mean``,
``line_score_p10``, ``base``, ``chars`` (non-whitespace characters of the text),
``expected_min_chars``, ``expected_max_chars``, ``length_anomaly`` ("short" | "long"
| None), ``blank_page`` (the preprocessor found no ink), ``repair_level``,
``repeated_line_ratio``, ``degenerate`` (an engine flagged a loop), ``rung`` (the
retry-ladder rung that produced the reading), ``misread_amounts``,
``impossible_dates``, ``bad_chars``, ``dominant_script``,
``foreign_script_ratio``, ``truncated``, ``truncated_retry``, ``fallback``,
``cached``, ``agreement`` (None without a second opinion).
"""

from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass, field

from rapidfuzz import fuzz

from appliance.config import DOC_TYPES
from appliance.engines.pdf_text import TEXT
from appliance.page import UNSPACED, Recognition, is_mark, without_marks
from appliance.quality.text_checks import (
    bad_chars, implausible_figures, repeated_lines, script_mix,
)
from appliance.reading.doubt import LAYOUT_DOUBT

__all__ = ["Confidence", "EXPECTED_CHARS", "classic_scale", "needs_second_opinion", "score_page"]

# --- base -------------------------------------------------------------------------------

# Weight of the mean in the mean/p10 blend (the p10 gets the rest). Equal weights: a
# page is as wrong for one unsure amount as for generally shaky text.
MEAN_WEIGHT = 0.5
LOW_PERCENTILE = 10
# RapidOCR's line scores are overconfident and live in ~[0.85, 1.0]: clean prints
# blend at ~0.988 (CER < 1 %), noisy 100-dpi form scans (FUNSD) at 0.90-0.99 with a
# median CER of ~10 %. Stretching the distance from 1 by 10 means: auto-accept (0.75)
# needs a blend of at least 0.975, review (below 0.5) starts under 0.95; clean prints
# score ~0.88. A stretch of 4 auto-accepted 93 % of FUNSD pages, three quarters of them
# with CER > 5 %; at 10 about half, and every page under 0.5 had CER > 5 %. The
# stretch does not change the ranking (AUROC); it only places the bands.
CLASSIC_STRETCH = 10.0
# No recorded evidence at all (no tokens, no lines) but text: enough to land in the
# sample band, never enough to auto-accept.
NO_EVIDENCE_BASE = 0.6
# The preprocessor found no ink and the engine read nothing: two independent checks
# agree the page is blank. Not 1: the preprocessor's blank test is a contrast test
# and a very faint page passes it.
BLANK_PAGE_BASE = 0.9
# A base below this is named as a penalty ("low_token_probability" or
# "low_line_score"): the recogniser alone was not sure enough to auto-accept.
LOW_BASE = 0.75

# A word whose least sure character the recogniser gave less than this is shaky.
SHAKY_WORD = 0.8
# A figure with a letter that looks like a digit inside it ("1l8.50", "3O0", "S5"), or
# a word with a digit that looks like a letter inside it ("C0DE", "te5t"): the
# classic misreadings of amounts and codes.
_ODD_TOKEN = re.compile(r"\d[OoIlSBZ]+\d|\d[OoIlSBZ][.,]\d|[a-z][015][a-z]")

# --- second opinion ---------------------------------------------------------------------

# The word-level similarity of the two texts at or above which they confirm each
# other, and below which they disagree. The similarity is order-free (readers order a
# page's blocks differently), so 0.95 means nearly the same words.
# - A vision reading checked by the classic engine.
# - A classic reading (source "lines") checked by Tesseract. Tesseract is the weaker reader of
#   poor scans (order-free CER 27 % on FUNSD against the classic engine's 11 %; on the
#   synthetic degraded set it read nothing of pages the classic engine read without an
#   error), so its disagreement says little about the classic reading and is no
#   penalty, and 0.9 already confirms: on FUNSD that threshold lifted the AUROC from
#   0.66 to 0.71 and lowered the accepted pages' CER (0.95: 0.67; 0.97: no change).
VISION_CHECK = (0.95, 0.8)
CLASSIC_CHECK = (0.9, 0.0)
# A classic reading whose base is below this is not read again: Tesseract's reading can
# only confirm it (CLASSIC_CHECK), and confirmed none such, 0 of 23 against 25 of 84
# above it (149 FUNSD forms, 80 SROIE receipts, 2026-12-06). At that base RapidOCR's
# pages read with more than 5 % of characters wrong (CLASSIC_STRETCH), and few of
# their words are another reader's too.
CONFIRMABLE_BASE = 0.5
# Confirmation moves the base this share of the way to 1: two readers agreeing is
# strong evidence, but both can misread the same smudge.
AGREEMENT_LIFT = 0.5
DISAGREEMENT_FACTOR = 0.7  # a perfect page that disagrees lands in the sample band

# --- penalties --------------------------------------------------------------------------

# Text is known to be missing: even a perfect page goes to review (< 0.5).
TRUNCATED_FACTOR = 0.5
EMPTY_OUTPUT_FACTOR = 0.3
# The VLM degenerated on every rung and the classic engine read the page: it loses the
# layout and the page was hard; never auto-accept (0.6 x base < 0.75).
FALLBACK_FACTOR = 0.6
# Repair level 2: the Markdown could not be mended and the page became plain text;
# the structure (tables) is lost. Never auto-accept.
DEGRADED_FACTOR = 0.7
# Repair level 1 keeps every word; a malformed answer is still a sign of a shaky
# reading, so a few points.
REPAIRED_FACTOR = 0.92
# The first rung of the retry ladder failed on this page (degenerated, crashed or
# timed out) and a later one produced the reading: the page is hard. A fallback
# (every rung failed) carries its own, larger factor instead.
RETRIED_FACTOR = 0.9
FIRST_RUNG = "greedy"
# Too little or too much text for the document type (EXPECTED_CHARS): a missed
# region or hallucinated or duplicated text. The table is generous, so an anomaly
# is rare and worth a look: never auto-accept (0.7 x a perfect 1.0 < 0.75).
LENGTH_ANOMALY_FACTOR = 0.7
# Repeated content lines in a generated reading: a loop the repetition guard does not
# stop (a paragraph-long unit, written until the token cap). A guard trip recorded as
# a flag counts the same. Only generated text: the classic engine cannot loop, and
# real pages repeat lines (a form with two identical panels repeats a third of its
# lines twice), so it takes one line written at least 4 times, and repeats making up
# a quarter of the content lines.
REPETITION_FACTOR = 0.6
REPEATED_LINE_RATIO = 0.25  # share of content lines that repeat an earlier one
REPEATED_LINE_MIN = 4  # times the most repeated line is written
# U+FFFD or control characters: a broken byte sequence or a decoding fault, never
# on a real page.
BAD_CHARS_FACTOR = 0.7
# Letters outside the page's dominant script: a recogniser inventing CJK glyphs on a
# Latin page, say. Bilingual pages are real, so only a share above 5 % of at least 3
# letters, and only a mild factor.
FOREIGN_SCRIPT_RATIO = 0.05
FOREIGN_SCRIPT_MIN = 3
FOREIGN_SCRIPT_FACTOR = 0.85

# The figures of a receipt, an invoice or a table are what the page is for: a figure
# read with a letter in it, or a date no calendar has, means a reviewer must look, so
# such a page is never auto-accepted (0.7 x a perfect 1.0 < 0.75). Other types record
# the counts without a penalty: their figures are not what the page is for.
FIGURE_TYPES = ("receipt", "invoice", "table", "fapiao")
IMPLAUSIBLE_FACTOR = 0.7
# The reading order is in doubt (``reading.doubt``: running text read across a
# gutter): every character may be right and the text still unreadable, so the page is
# never auto-accepted (0.7 x a perfect 1.0 < 0.75).
LAYOUT_DOUBT_FACTOR = 0.7

# Expected page length per document type, in non-whitespace characters: generous
# bounds (about a third of a sparse page's length, about twice a dense page's), so
# only a clear anomaly trips them.
EXPECTED_CHARS: dict[str, tuple[int, int]] = {
    "generic": (20, 12000),
    "receipt": (20, 4000),
    "invoice": (40, 8000),
    "contract": (100, 12000),
    "report": (50, 12000),
    "table": (20, 15000),
    "handwriting": (5, 5000),
    "id_card": (15, 1500),
    "fapiao": (40, 8000),
}

# a word of the readings compared: a character of a script written without spaces
# (which readers part differently: Tesseract spaces Chinese characters apart, RapidOCR
# reads a line's run whole), else a run of word characters
_WORD = re.compile(rf"{UNSPACED.pattern}|(?:(?!{UNSPACED.pattern})\w)+")


def classic_scale(score: float) -> float:
    """A score of RapidOCR's (a line's, or the blend of a page's) on the page confidence's
    scale: stretched from 1 by CLASSIC_STRETCH, so that a line and the page it is on are
    told in one measure."""
    return min(1.0, max(0.0, 1.0 - CLASSIC_STRETCH * (1.0 - score)))


@dataclass
class Confidence:
    score: float  # [0, 1]
    signals: dict[str, float | bool | int | str | None] = field(default_factory=dict)
    penalties: list[str] = field(default_factory=list)  # names of what lowered the score


def score_page(recognition: Recognition, *, doc_type: str,
               second_opinion: Recognition | None = None) -> Confidence:
    """The page's confidence, its signals and the penalties that lowered it.

    ``second_opinion``: another engine's reading of the same page image, when the
    caller ran one (see ``needs_second_opinion``).
    """
    if doc_type not in EXPECTED_CHARS:
        raise ValueError(f"unknown document type {doc_type!r}; known: {', '.join(DOC_TYPES)}")
    signals: dict = {}
    penalties: list[str] = []
    factor = 1.0

    def penalise(name: str, size: float) -> None:
        nonlocal factor
        factor *= size
        if name not in penalties:
            penalties.append(name)

    text = without_marks(recognition.text or "")  # the check boxes were found, not read
    flags = set(recognition.flags)
    chars = sum(1 for ch in text if not ch.isspace())
    signals["chars"] = chars

    # 1. base
    base, source = _base(recognition, signals)
    signals["blank_page"] = _preprocessor_found_blank(recognition.provenance)
    other_text = second_opinion.text if second_opinion is not None else ""
    if chars == 0:
        if signals["blank_page"] and not other_text.strip():
            base = BLANK_PAGE_BASE
        else:
            penalise("empty_output", EMPTY_OUTPUT_FACTOR)

    # 2. second opinion
    signals["agreement"] = None
    if second_opinion is not None:
        confirms, disagrees = CLASSIC_CHECK if source == "lines" else VISION_CHECK
        agreement = text_agreement(text, other_text)
        signals["agreement"] = round(agreement, 4)
        if agreement >= confirms:
            base += (1.0 - base) * AGREEMENT_LIFT
        elif agreement < disagrees:
            penalise("disagreement", DISAGREEMENT_FACTOR)
    signals["base"] = round(base, 4)
    if chars and base < LOW_BASE:
        penalties.append({"tokens": "low_token_probability", "lines": "low_line_score",
                          "none": "no_evidence"}[source])

    # 3. penalties
    signals["truncated"] = "truncated" in flags or recognition.finish_reason == "length"
    signals["truncated_retry"] = "truncated_retry" in flags
    if signals["truncated"]:
        penalise("truncated", TRUNCATED_FACTOR)
    signals["fallback"] = "fallback" in flags
    if signals["fallback"]:
        penalise("fallback", FALLBACK_FACTOR)
    signals["cached"] = "cached" in flags
    signals[LAYOUT_DOUBT] = LAYOUT_DOUBT in flags
    if signals[LAYOUT_DOUBT]:
        penalise(LAYOUT_DOUBT, LAYOUT_DOUBT_FACTOR)

    repair = recognition.provenance.get("repair") or {}
    level = repair.get("level")
    if level is None:  # a reading postprocess has not seen: the flags alone
        level = 2 if "degraded" in flags else 1 if "repaired" in flags else None
    signals["repair_level"] = level
    if level == 2 or "degraded" in flags:
        penalise("degraded", DEGRADED_FACTOR)
    elif level == 1 or "repaired" in flags:
        penalise("repaired", REPAIRED_FACTOR)

    rung = recognition.provenance.get("rung")
    signals["rung"] = rung
    if rung is not None and rung != FIRST_RUNG and not signals["fallback"]:
        penalise("retried", RETRIED_FACTOR)

    ratio, most = repeated_lines(text)
    signals["repeated_line_ratio"] = round(ratio, 4)
    signals["degenerate"] = bool(flags & {"degenerate", "repetition"})
    looped = source == "tokens" and ratio >= REPEATED_LINE_RATIO and most >= REPEATED_LINE_MIN
    if signals["degenerate"] or looped:
        penalise("repetition", REPETITION_FACTOR)

    low, high = EXPECTED_CHARS[doc_type]
    signals["expected_min_chars"], signals["expected_max_chars"] = low, high
    signals["length_anomaly"] = ("short" if 0 < chars < low else "long" if chars > high
                                 else None)
    if signals["length_anomaly"]:
        penalise("length_anomaly", LENGTH_ANOMALY_FACTOR)

    bad = bad_chars(text)
    script, foreign, letters = script_mix(text)
    signals["bad_chars"] = bad
    signals["dominant_script"] = script
    signals["foreign_script_ratio"] = round(foreign / letters, 4) if letters else 0.0
    signals["misread_amounts"], signals["impossible_dates"] = implausible_figures(text)
    if doc_type in FIGURE_TYPES and (signals["misread_amounts"] or signals["impossible_dates"]):
        penalise("implausible_figures", IMPLAUSIBLE_FACTOR)
    if bad:
        penalise("charset_anomaly", BAD_CHARS_FACTOR)
    if foreign >= FOREIGN_SCRIPT_MIN and foreign / letters > FOREIGN_SCRIPT_RATIO:
        penalise("charset_anomaly", FOREIGN_SCRIPT_FACTOR)

    score = min(1.0, max(0.0, base * factor))
    if own_text(recognition):
        # the document's own characters, which passed the text layer's checks: nothing
        # was misread, so nothing above lowers it (a short page, a date no calendar has
        # are the document's, not the reading's)
        signals["source"], signals["unapplied_penalties"] = "text_layer", penalties
        score, penalties = 1.0, []
    return Confidence(score=round(score, 4), signals=signals, penalties=penalties)


def own_text(recognition: Recognition) -> bool:
    """Whether the page was read from its PDF's own text alone (``engines.pdf_text``)."""
    return (recognition.provenance.get("text_layer") or {}).get("reader") == TEXT


def needs_second_opinion(recognition: Recognition, confidence: Confidence, *, doc_type: str,
                         bands: tuple[float, float], made_anyway: bool = False) -> bool:
    """Whether a page should also be read by another engine and scored again with that
    reading as ``second_opinion``: a reading with text or its recogniser's own evidence
    (tokens or line scores), not a fallback, whose confidence falls short of
    auto-accept, that has not been compared yet, and whose route the other reading
    could change. ``bands``: the routing thresholds (review_below, accept_from); the
    page is read again only where a reading that agreed with it word for word, or not
    at all, would score it into another band than its own (a page that stays in review
    either way is not worth a second reading), and a classic one only where Tesseract
    could agree (CONFIRMABLE_BASE), unless the other reading is ``made_anyway`` (a
    vision page's words are placed on the classic reading's boxes)."""
    signals = confidence.signals
    # a reading without its recogniser's evidence (a remote server that sends no token
    # log-probabilities) is compared too, if it has text: agreement is then its evidence
    evidence = signals.get("source") in ("tokens", "lines") or signals.get("chars")
    if (not evidence or signals.get("fallback") or signals.get("agreement") is not None
            or confidence.score >= bands[1]):
        return False
    if made_anyway:
        return True
    if signals.get("source") == "lines" and signals["base"] < CONFIRMABLE_BASE:
        return False
    own = bisect.bisect_right(bands, confidence.score)
    return any(bisect.bisect_right(bands, score_page(recognition, doc_type=doc_type,
                                                     second_opinion=other).score) != own
               for other in (recognition, Recognition(text="", markdown="")))


# --- signals ----------------------------------------------------------------------------

def _base(recognition: Recognition, signals: dict) -> tuple[float, str]:
    """The recogniser's own certainty (step 1) and where it came from."""
    logprobs = [lp for lp in (_logprob(token) for token in recognition.tokens) if lp is not None]
    lines = [line for line in recognition.lines if not is_mark(line.text)]
    scored = [(line.score, len(line.text.strip())) for line in lines if line.text.strip()]
    signals.update(tokens=len(logprobs), logprob_mean=None, logprob_p10=None,
                   lines=len(scored), line_score_mean=None, line_score_p10=None)
    if logprobs:
        mean = sum(logprobs) / len(logprobs)
        low = percentile(logprobs, LOW_PERCENTILE)
        signals.update(source="tokens", logprob_mean=round(mean, 4), logprob_p10=round(low, 4))
        return MEAN_WEIGHT * math.exp(mean) + (1 - MEAN_WEIGHT) * math.exp(low), "tokens"
    if scored:
        total = sum(weight for _, weight in scored)
        mean = sum(score * weight for score, weight in scored) / total
        low = weighted_percentile(scored, LOW_PERCENTILE)
        signals.update(source="lines", line_score_mean=round(mean, 4),
                       line_score_p10=round(low, 4), **_word_signals(lines))
        return classic_scale(MEAN_WEIGHT * mean + (1 - MEAN_WEIGHT) * low), "lines"
    signals["source"] = "none"
    return NO_EVIDENCE_BASE, "none"


def _word_signals(lines) -> dict:
    """What the words say (engines that give them): how unsure the least sure words
    are, and how many tokens look like misreadings (letters inside figures)."""
    words = [word for line in lines for word in (line.words or [])]
    if not words:
        return {"words": 0}
    scores = [word.score for word in words]
    tokens = [word.text for word in words]
    return {"words": len(words),
            "word_score_p05": round(percentile(scores, 5), 4),
            "shaky_words": round(sum(score < SHAKY_WORD for score in scores) / len(scores), 4),
            "odd_tokens": round(sum(bool(_ODD_TOKEN.search(t)) for t in tokens) / len(tokens), 4),
            "line_height": round(percentile([line.box[3] - line.box[1] for line in lines], 50), 1)}


def _logprob(token: dict) -> float | None:
    """A recorded token's log-probability (``Recognition.tokens``: ``lp``)."""
    value = token.get("lp")
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else -30.0  # -inf: the token was forced


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile of ``values`` (linear interpolation, as numpy's default)."""
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    below = math.floor(position)
    above = min(below + 1, len(ordered) - 1)
    return ordered[below] + (ordered[above] - ordered[below]) * (position - below)


def weighted_percentile(pairs: list[tuple[float, int]], q: float) -> float:
    """The ``q``-th percentile of values given as (value, weight) pairs: the smallest
    value with at least ``q`` % of the total weight at or below it. Line scores are
    weighted by their characters, so this is the score of the character at the
    percentile, as for tokens, and a lone "(" scored 0.6 does not sink a page."""
    ordered = sorted(pairs)
    total = sum(weight for _, weight in ordered)
    reached = 0.0
    for value, weight in ordered:
        reached += weight
        if reached >= total * q / 100:
            return value
    return ordered[-1][0]


def _preprocessor_found_blank(provenance: dict) -> bool:
    for step in provenance.get("preprocess") or []:
        skipped = str((step.get("detail") or {}).get("skipped", ""))
        if skipped == "blank page" or skipped.startswith("no ink"):
            return True
    return False


def text_agreement(first: str, second: str) -> float:
    """Normalised similarity in [0, 1] of two readings' words, order-free: casefolded
    word tokens (each Chinese or Japanese character one, ``_WORD``), sorted, compared by
    Indel similarity (rapidfuzz's token_sort_ratio). Markup and punctuation do not
    count; two empty texts agree fully."""
    a = " ".join(sorted(_WORD.findall(first.casefold())))
    b = " ".join(sorted(_WORD.findall(second.casefold())))
    if not a and not b:
        return 1.0
    return fuzz.ratio(a, b) / 100.0
