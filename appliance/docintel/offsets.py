"""Offsets and lengths in an AnalyzeResult counted as the client asked (``stringIndexType``).

The result is built counting Unicode code points, as Python indexes a string. The
service counts in text elements (grapheme clusters: "é" written as e and a combining
accent is one, so is a flag or an emoji with its skin tone) unless asked otherwise, and
the .NET, Java and JavaScript SDKs ask for UTF-16 code units, as their strings index.
Chinese, Japanese and Latin text count the same in all three; characters outside the
Basic Multilingual Plane (CJK Extension B, emoji) and combining marks do not.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable

import regex

TEXT_ELEMENTS = "textElements"
CODE_POINTS = "unicodeCodePoint"
UTF16_UNITS = "utf16CodeUnit"
STRING_INDEX_TYPES = (TEXT_ELEMENTS, CODE_POINTS, UTF16_UNITS)
DEFAULT = TEXT_ELEMENTS  # the service's, where a request names none

_GRAPHEME = regex.compile(r"\X")


def counted_as(body: dict, content: str, kind: str) -> dict:
    """``body`` (an AnalyzeResult whose spans count code points in ``content``) with
    every span's offset and length counted as ``kind``."""
    if kind == CODE_POINTS:
        return body
    at = _index(content, kind)

    def recount(node):
        if isinstance(node, list):
            return [recount(item) for item in node]
        if not isinstance(node, dict):
            return node
        if isinstance(node.get("offset"), int) and isinstance(node.get("length"), int):
            start, end = at(node["offset"]), at(node["offset"] + node["length"])
            return {**node, "offset": start, "length": end - start}
        return {key: recount(value) for key, value in node.items()}

    return {**recount(body), "stringIndexType": kind}


def _index(content: str, kind: str) -> Callable[[int], int]:
    """A code point offset in ``content`` as an offset counted as ``kind``."""
    if kind == UTF16_UNITS:
        units = [0, *itertools.accumulate(2 if ord(ch) > 0xFFFF else 1 for ch in content)]
        return units.__getitem__
    # the number of text elements that start before the offset: one inside an element
    # (where none of the appliance's spans starts or ends) moves to the element's end
    starts = [match.start() for match in _GRAPHEME.finditer(content)]
    return lambda offset: bisect.bisect_left(starts, offset)
