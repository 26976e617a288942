"""What a symbol font draws at its codes, by font family (``engines.pdf_text``).

Word gives a glyph of Symbol or Wingdings as a private-use character, U+F000 plus its
code (its list bullets: "•", "▪", "➢", "✓"), and other producers give the code itself
as if it were Latin ("b" for Symbol's β): read as the character drawn, so that a list
reads as one, a formula's Greek as Greek, and no private-use character reaches the
text. Symbol's letters and marks (its encoding, Adobe's), Wingdings' marks a document
uses (``drawn``).
"""

from __future__ import annotations

import re

_SYMBOL = {**dict(zip(map(ord, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"), "ΑΒΧΔΕΦΓΗΙϑΚΛΜΝΟΠΘΡΣΤΥςΩΞΨΖ")),
           **dict(zip(map(ord, "abcdefghijklmnopqrstuvwxyz"), "αβχδεφγηιϕκλμνοπθρστυϖωξψζ")),
           0x22: "∀", 0x24: "∃", 0x27: "∋", 0x2A: "∗", 0x2D: "−", 0x40: "≅", 0x5C: "∴",
           0x5E: "⊥", 0x7E: "∼", 0xA2: "′", 0xA3: "≤", 0xA5: "∞", 0xA7: "♣", 0xA8: "♦",
           0xA9: "♥", 0xAA: "♠", 0xAC: "←", 0xAD: "↑", 0xAE: "→", 0xAF: "↓", 0xB0: "°",
           0xB1: "±", 0xB2: "″", 0xB3: "≥", 0xB4: "×", 0xB6: "∂", 0xB7: "•", 0xB8: "÷",
           0xB9: "≠", 0xBA: "≡", 0xBB: "≈", 0xC6: "∅", 0xC7: "∩", 0xC8: "∪", 0xCE: "∈",
           0xCF: "∉", 0xD5: "∏", 0xD6: "√", 0xD7: "⋅", 0xD9: "∧", 0xDA: "∨", 0xDB: "⇔",
           0xDE: "⇒", 0xE0: "◊", 0xE5: "∑", 0xF2: "∫"}
_WINGDINGS = {0x6C: "●", 0x6E: "■", 0x6F: "□", 0x71: "❑", 0x76: "❖", 0x77: "⬥", 0x9F: "•",
              0xA1: "○", 0xA7: "▪", 0xA8: "◻", 0xD8: "➢", 0xE0: "➔", 0xFB: "✗", 0xFC: "✓",
              0xFD: "☒", 0xFE: "☑"}
_SYMBOL_FONTS = {"symbol": _SYMBOL, "symbolmt": _SYMBOL, "wingdings": _WINGDINGS}
_PRIVATE_SYMBOLS = range(0xF020, 0xF100)


def symbol_marks(obj) -> dict[int, str] | None:
    """The marks of a text object's font, where it is a symbol font of ``_SYMBOL_FONTS``
    ("ABCDEF+Wingdings-Regular", "SymbolMT", "Symbol,Bold"; Wingdings 2 and 3 draw
    other marks at those codes)."""
    import ctypes

    import pypdfium2.raw as pdfium_c

    font = pdfium_c.FPDFTextObj_GetFont(obj)
    name = ctypes.create_string_buffer(128)
    if not font or not pdfium_c.FPDFFont_GetBaseFontName(font, name, len(name)):
        return None
    family = re.split(r"[-,]", name.value.decode("latin-1").split("+")[-1])[0].casefold()
    return _SYMBOL_FONTS.get(family)


def drawn(marks: dict[int, str], code: int) -> str | None:
    """The mark a symbol font draws for the character pdfium gives as ``code``: a
    private-use one, or a Latin letter standing for its code; None for any other (a
    digit, or a character its ToUnicode maps right: Symbol's "×" is U+00D7, which as a
    code is Symbol's "⋅")."""
    if code in _PRIVATE_SYMBOLS:
        return marks.get(code - 0xF000)
    return marks.get(code) if code < 0x80 and chr(code).isalpha() else None
