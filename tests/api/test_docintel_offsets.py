"""Offsets counted as a Document Intelligence client asks (``docintel.offsets``): text
elements (the service's default), code points, UTF-16 code units."""

from __future__ import annotations

import pytest
import regex

from appliance.docintel.offsets import counted_as

# a decomposed "é" (e and a combining accent), an emoji with its skin tone, "𠮷" past
# U+FFFF, then plain Chinese and Latin
CONTENT = "Cafe\u0301 👍🏽 𠮷野家\n发票 total"
WORDS = ["Cafe\u0301", "👍🏽", "𠮷野家", "发票", "total"]


def _body() -> dict:
    """A result whose spans count code points, as the appliance builds it."""
    starts = [CONTENT.index(word) for word in WORDS]
    return {"content": CONTENT, "stringIndexType": "unicodeCodePoint",
            "pages": [{"spans": [{"offset": 0, "length": len(CONTENT)}],
                       "words": [{"content": word, "span": {"offset": start, "length": len(word)}}
                                 for word, start in zip(WORDS, starts)]}],
            "paragraphs": [{"spans": [{"offset": 0, "length": CONTENT.index("\n")}]}]}


def _units(kind: str, text: str) -> list[str]:
    """``text`` as a client's string indexes it: a piece for each offset."""
    if kind == "textElements":
        return regex.findall(r"\X", text)
    if kind == "utf16CodeUnit":  # a character past U+FFFF takes two places
        return [piece for ch in text for piece in ((ch, "") if ord(ch) > 0xFFFF else (ch,))]
    return list(text)


@pytest.mark.parametrize("kind", ["textElements", "unicodeCodePoint", "utf16CodeUnit"])
def test_every_span_finds_its_text_as_the_client_counts(kind):
    body = counted_as(_body(), CONTENT, kind)
    units = _units(kind, CONTENT)
    assert body["stringIndexType"] == kind
    assert body["pages"][0]["spans"] == [{"offset": 0, "length": len(units)}]
    for word in body["pages"][0]["words"]:
        span = word["span"]
        assert "".join(units[span["offset"]:span["offset"] + span["length"]]) == word["content"]
    (paragraph,) = body["paragraphs"][0]["spans"]
    assert "".join(units[:paragraph["length"]]) == CONTENT.split("\n")[0]


def test_the_counts_differ_where_the_text_does():
    lengths = {kind: counted_as(_body(), CONTENT, kind)["pages"][0]["spans"][0]["length"]
               for kind in ("textElements", "unicodeCodePoint", "utf16CodeUnit")}
    # the accent and the skin tone are code points of their own, not text elements;
    # the emoji, its tone and 𠮷 take two UTF-16 units each
    assert lengths == {"unicodeCodePoint": len(CONTENT), "textElements": len(CONTENT) - 2,
                       "utf16CodeUnit": len(CONTENT) + 3}
