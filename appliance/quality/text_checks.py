"""What a page's text says about itself, whoever read it: repeated lines, broken
characters, mixed scripts, implausible figures. Pure counts; ``confidence`` decides
what each costs."""

from __future__ import annotations

import re
import unicodedata
from collections import Counter

__all__ = ["bad_chars", "implausible_figures", "repeated_lines", "script_mix", "script_of"]

REPEATED_LINE_MIN_CHARS = 8  # shorter lines ("Date:", "$0.00") repeat on real pages
_RULE_LINE = re.compile(r"^[\s|:\-_=+.*#~]*$")
# An amount with a letter a recogniser takes for a digit: "1O.50", "12.5O", "S.00".
_MISREAD_AMOUNT = re.compile(r"^(?=.*\d)(?=.*[OoIlSB])[\dOoIlSB]+[.,][\dOoIlSB]{2}$")
_DATE = re.compile(r"(?<![\d/])(\d{1,2})/(\d{1,2})/(\d{4}|\d{2})(?![\d/])")
_TOKEN_EDGES = "()[]{}<>\"'`:;!?*|$€£¥%"
# Scripts that are one script for this purpose: Japanese mixes kanji and kana.
_SCRIPT_ALIASES = {"HIRAGANA": "CJK", "KATAKANA": "CJK", "KATAKANA-HIRAGANA": "CJK",
                   "IDEOGRAPHIC": "CJK"}
_WIDTH_PREFIXES = ("FULLWIDTH", "HALFWIDTH")
_ALLOWED_CONTROLS = "\n\t\r"


def repeated_lines(text: str) -> tuple[float, int]:
    """Share of content lines (at least REPEATED_LINE_MIN_CHARS characters, not a rule
    of dashes or pipes) that repeat an earlier line exactly, and how often the most
    repeated one is written."""
    counts = Counter(key for key in (" ".join(line.split()) for line in text.splitlines())
                     if len(key) >= REPEATED_LINE_MIN_CHARS and not _RULE_LINE.match(key))
    content = sum(counts.values())
    if not content:
        return 0.0, 0
    return (content - len(counts)) / content, max(counts.values())


def implausible_figures(text: str) -> tuple[int, int]:
    """How many amounts have a letter where a digit belongs ("1O.50"), and how many
    day/month dates are no date read either way round ("31/13/2024")."""
    amounts = 0
    for token in text.split():
        token = token.strip(_TOKEN_EDGES)
        amounts += bool(_MISREAD_AMOUNT.match(token.removesuffix(".").removesuffix(",")))
    dates = sum(1 for first, second, _year in _DATE.findall(text)
                if not (_day_month(int(first), int(second)) or _day_month(int(second), int(first))))
    return amounts, dates


def _day_month(day: int, month: int) -> bool:
    return 1 <= day <= 31 and 1 <= month <= 12


def bad_chars(text: str) -> int:
    """U+FFFD replacement characters and C0/C1 control characters other than newline,
    tab and carriage return."""
    return sum(1 for ch in text
               if ch == "\ufffd" or (unicodedata.category(ch) == "Cc"
                                     and ch not in _ALLOWED_CONTROLS))


def script_of(ch: str) -> str | None:
    """The script of a letter by its Unicode name's first word (LATIN, CYRILLIC,
    GREEK, CJK, ARABIC, HANGUL, ...), None for a non-letter. Kana count as CJK;
    fullwidth and halfwidth forms as their base script."""
    if not unicodedata.category(ch).startswith("L"):
        return None
    words = unicodedata.name(ch, "").split()
    if words and words[0] in _WIDTH_PREFIXES:
        words = words[1:]
    if not words:
        return "UNKNOWN"
    return _SCRIPT_ALIASES.get(words[0], words[0])


def script_mix(text: str) -> tuple[str | None, int, int]:
    """The dominant script of the text's letters, how many letters are in other
    scripts, and how many letters there are."""
    counts = Counter(script for script in map(script_of, text) if script is not None)
    if not counts:
        return None, 0, 0
    dominant, count = counts.most_common(1)[0]
    letters = sum(counts.values())
    return dominant, letters - count, letters
