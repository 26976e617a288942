"""The review console's "Key fields" form: a typed document's fields (``fields.document``
dicts) as one input per field, the values a reviewer changed, and what saving said.

One ``gr.Textbox`` per field, from a pool as large as the largest configured field
schema (hidden slots carry nothing): real text inputs, so Tab and Shift-Tab move
between them, Enter saves, and the console's single-key shortcuts stay quiet while
one has the focus. Each input's label is the field's name, its validity mark
(✓ valid, ✗ invalid, – optional and not there) and why (``why``): the failed checks'
words, or where every check passed, theirs ("total 9.00 = paid 10.00 - change 1.00",
"no check applies to this field"); its info line says on which page its evidence is.

Field values and check messages come from OCR text. They only travel as input values
and labels, which Gradio shows as text, or through ``escape_markdown_text`` into
Markdown. Never into an input's ``info``: Gradio formats it with its own small
Markdown-like rules (``_x_``, ``**x**``, backticks) that ignore backslash escapes, so
it holds our words and page numbers only.
"""

from __future__ import annotations

import gradio as gr

from ui.components import escape_markdown_text
from ui.i18n import EN, check_text, plural, text, texts

FORM_ID = "review-fields"
SAVE_ID = "review-fields-save"
FIELD_HEADER_KEYS = ["field_field", "field_value", "field_valid", "field_why", "field_page"]
FIELD_HEADERS = texts(FIELD_HEADER_KEYS)
MARKS = {True: "✓", False: "✗", None: "–"}
NO_FIELDS_TEXT = text("fields_none")


def form_size(field_specs: dict) -> int:
    """How many field inputs the form needs: the most fields a configured type has."""
    return max((len(specs) for specs in field_specs.values()), default=0)


def shown_value(field: dict) -> str:
    """The value as the input shows it: the normal form (an amount with its currency),
    or the text as read when it is not of its kind at all; "" when not found."""
    value = field.get("value")
    if value is None:
        value = field.get("raw")
    if value is None:
        return ""
    value = str(value)
    currency = field.get("currency")
    return f"{value} {currency}" if currency else value


def failed_checks(field: dict) -> list[str]:
    return [str(c.get("message", "")) for c in field.get("checks") or [] if not c.get("ok")]


def why(field: dict, lang: str = EN) -> str:
    """Why a field passed or failed, in its checks' own words (translated by their
    codes): the failed checks where one failed, else every check, which all passed."""
    checks = field.get("checks") or []
    shown = [c for c in checks if not c.get("ok")] or checks
    return "; ".join(check_text(c, lang) for c in shown)


def evidence_pages(field: dict) -> list[int]:
    return sorted({e["page"] for e in field.get("evidence") or [] if e.get("page") is not None})


def field_rows(fields: list[dict], lang: str = EN) -> list[list[str]]:
    """The fields as a table (``FIELD_HEADERS``) of plain, unescaped strings."""
    return [[str(f["name"]), shown_value(f), MARKS.get(f.get("valid"), "–"), why(f, lang),
             ", ".join(str(p) for p in evidence_pages(f))]
            for f in fields]


def field_label(row: list[str], required: bool = False, lang: str = EN) -> str:
    """An input's label, plain text (Gradio shows it as text): name, required, validity
    mark and why (``why``)."""
    name, _value, mark, reason, _pages = row
    label = f"{name}{text('field_required', lang) if required else ''} {mark}"
    return f"{label} {reason}" if reason else label


def field_info(row: list[str], lang: str = EN) -> str:
    """An input's info line: where its evidence is, in our words only (see above)."""
    _name, value, _mark, _failed, pages = row
    if pages:
        return text("field_on_page_other" if "," in pages else "field_on_page_one", lang,
                    pages=pages)
    return text("field_no_box" if value else "field_not_found", lang)


def input_updates(fields: list[dict] | None, size: int, lang: str = EN) -> list:
    """The pool's ``size`` inputs showing ``fields`` (the rest hidden and empty)."""
    shown = (fields or [])[:size]
    updates = [gr.Textbox(value=row[1], label=field_label(row, bool(f.get("required")), lang),
                          info=field_info(row, lang), visible=True, interactive=True)
               for f, row in zip(shown, field_rows(shown, lang))]
    return updates + [gr.Textbox(value="", label="", info=None, visible=False)
                      for _ in range(size - len(updates))]


def _same(a: str, b: str) -> bool:
    return " ".join(a.split()) == " ".join(b.split())


def changed_values(fields: list[dict], values: list[str | None]) -> dict[str, str]:
    """The inputs whose value differs from the field as shown, by field name: what
    ``Appliance.correct_fields`` takes ("" for an emptied input removes the field).
    Inputs beyond the fields (the pool's hidden slots) are ignored."""
    changes = {}
    for field, value in zip(fields, values):
        typed = (value or "").strip()
        if not _same(typed, shown_value(field)):
            changes[str(field["name"])] = typed
    return changes


def saved_text(changes: dict[str, str], fields: list[dict], lang: str = EN) -> str:
    """One Markdown line after a save, e.g. "saved: gross; 1 check still fails (gross)"."""
    names = ", ".join(escape_markdown_text(name) for name in changes)
    failing = [(f["name"], message) for f in fields for message in failed_checks(f)]
    if not failing:
        return text("fields_saved_ok", lang, names=names)
    where = ", ".join(dict.fromkeys(escape_markdown_text(str(name)) for name, _ in failing))
    return plural("fields_saved_fail", len(failing), lang, names=names, where=where)


def field_highlights(fields: list[dict] | None, page_number: int,
                     to_image: tuple[float, ...] | None = None) -> list[dict]:
    """The evidence boxes on page ``page_number`` as ``annotate_page`` highlights,
    labelled with the field's name; ``ok`` False draws a failing field like a
    low-confidence line. Evidence lies on the page as rendered: ``to_image`` (an affine,
    ``ReviewPage.to_image``) takes each box's corners onto the image shown."""
    return [{"text": str(f["name"]), "label": str(f["name"]),
             "box": _on_image(e["box"], to_image), "ok": f.get("valid") is not False}
            for f in fields or [] for e in f.get("evidence") or []
            if e.get("page") == page_number and e.get("box")]


def _on_image(box, affine: tuple[float, ...] | None):
    """[x0, y0, x1, y1] through ``affine``: its four corners (a polygon, which a turn
    or a deskew leaves), or the box as it is when there is nothing to map."""
    if affine is None or len(box) != 4 or not all(isinstance(v, (int, float)) for v in box):
        return box
    a, b, c, d, e, f = affine
    x0, y0, x1, y1 = box
    return [[a * x + b * y + c, d * x + e * y + f]
            for x, y in ((x0, y0), (x1, y0), (x1, y1), (x0, y1))]


def form_note(fields: list[dict] | None, size: int, lang: str = EN) -> str:
    """The form's status line when a page opens: "" unless something is not shown."""
    if fields is not None and not fields:
        return text("fields_none", lang)
    hidden = len(fields or []) - size
    return plural("fields_hidden", hidden, lang) if hidden > 0 else ""
