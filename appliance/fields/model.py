"""The vision path's field reader: the question a vision model is asked about a typed
page, and its answers turned into found fields.

Two stages, as production systems do it: the page's OCR lines, their boxes normalised
to the page (0-1), go to the model beside the page image, and it is told to find each
field's label, take the value printed after or below it and answer with one JSON
object. The answer's schema (per field a string of bounded length without quotes,
backslashes or control characters, or null) goes to the engine, which constrains the
model's output to it: the answer is valid JSON whatever the weights, and its longest
form fits a known number of tokens.

The model writes values as printed. They are parsed and normalised by the same kinds
as the rules extractor's; a value's evidence is the OCR line(s) it stands on. A field
the model left null, or wrote as something that is not of its kind, is taken from the
rules extractor.
"""

from __future__ import annotations

import json
import re

from appliance.engines.base import Question
from appliance.fields.extract import Found
from appliance.fields.lines import ReadLine, read_lines
from appliance.fields.schema import FieldSpec
from appliance.fields.validate import squash
from appliance.outputs.tree import PageTree
from appliance.page import Line

QUESTION_VERSION = "fields/v1"
MAX_LINES = 150  # OCR lines put in the question: more than a dense invoice page holds
MAX_LINE_CHARS = 160
# the longest value the model may write, by kind (an address runs over lines)
_MAX_CHARS = {"text": 120, "date": 32, "money": 32, "number": 32, "iban": 42, "vat_id": 32,
              "enum": 32, "regex": 64}
# any character but a quote, a backslash or a control character: with no escapes a
# character is at most four bytes, so at most four tokens
VALUE_CHARS = '[^"\\\\\\x00-\\x1f\\x7f]'
# how much a value is worth that the model read and the OCR lines show (times the
# lines' confidence), and one they do not show
SEEN, UNSEEN = 0.95, 0.3

_HINTS = {"date": "a date", "money": "an amount, with its currency where printed",
          "number": "a number", "iban": "an IBAN", "vat_id": "a VAT or tax id",
          "text": "text"}
_WHERE = {"header": "the issuer's name at the head of the page",
          "below_header": "the issuer's address, under its name"}


def max_chars(spec: FieldSpec) -> int:
    return _MAX_CHARS[spec.kind]


def answer_schema(specs: tuple[FieldSpec, ...]) -> dict:
    """One key per field: the value as printed, or null."""
    return {"type": "object",
            "properties": {spec.name: {"anyOf": [
                {"type": "string", "pattern": f"^{VALUE_CHARS}{{0,{max_chars(spec)}}}$"},
                {"type": "null"}]} for spec in specs},
            "required": [spec.name for spec in specs], "additionalProperties": False}


def answer_bound(specs: tuple[FieldSpec, ...]) -> int:
    """The tokens the longest answer the schema allows can take, the end of turn
    included: a token is at least one byte. Per field its quoted key, a colon with a
    space either side, its quoted value (four bytes a character) or null, and a space;
    a comma and a space between fields; the braces, each with a space, around them."""
    per_field = sum(len(spec.name.encode()) + 2 + 3 + max(4 * max_chars(spec) + 2, 4) + 1
                    for spec in specs)
    return 4 + per_field + 2 * (len(specs) - 1) + 1


def question(doc_type: str, specs: tuple[FieldSpec, ...], lines: list[Line],
             width: int, height: int) -> Question:
    """The question about a page of ``doc_type`` whose OCR lines (boxes in pixels of a
    ``width`` x ``height`` page) are ``lines``."""
    fields = "\n".join(f'- "{spec.name}": {_hint(spec)}' for spec in specs)
    ocr = "\n".join(
        f"[{line.box[0] / width:.3f}, {line.box[1] / height:.3f}, "
        f"{line.box[2] / width:.3f}, {line.box[3] / height:.3f}] "
        f"{' '.join(line.text.split())[:MAX_LINE_CHARS]}"
        for line in lines[:MAX_LINES])
    text = (f"This page is a {doc_type.replace('_', ' ')}. Read its key fields, step by step:\n"
            "1. find each field's label on the page (the words printed before or above "
            "its value);\n"
            "2. take the value printed after that label, or below it;\n"
            "3. write the value exactly as printed: do not reformat dates or amounts, and "
            "do not translate.\n"
            "Write null for a field the page does not show.\n\n"
            f"The fields:\n{fields}\n\n"
            "The page's OCR lines, each with its box as [left, top, right, bottom] "
            "fractions of the page's width and height:\n"
            f"{ocr or '(none)'}\n\n"
            "Answer with one JSON object whose keys are the field names.")
    return Question(text, answer_schema(specs), answer_bound(specs), QUESTION_VERSION)


def _hint(spec: FieldSpec) -> str:
    if spec.locate in _WHERE:
        return _WHERE[spec.locate]
    if spec.kind == "enum":
        hint = "one of " + ", ".join(spec.choices)
    else:
        hint = _HINTS.get(spec.kind, spec.kind)
    if spec.labels:
        hint += " (labels such as " + ", ".join(spec.labels[:4]) + ")"
    return hint


def parse_answer(text: str, specs: tuple[FieldSpec, ...]) -> dict[str, str | None]:
    """The model's answer as field name -> value as printed (None: not on the page).
    ValueError when it is not an answer of the question's schema."""
    answer = json.loads(text)
    names = [spec.name for spec in specs]
    if not isinstance(answer, dict) or sorted(answer) != sorted(names):
        raise ValueError(f"the answer's keys are not the fields {', '.join(names)}")
    values = {}
    for spec in specs:
        value = answer[spec.name]
        if value is not None and not (isinstance(value, str) and len(value) <= max_chars(spec)):
            raise ValueError(f"the answer's {spec.name} is not a string of at most "
                             f"{max_chars(spec)} characters")
        values[spec.name] = value.strip() or None if value is not None else None
    return values


def model_found(pages: list[PageTree], specs: tuple[FieldSpec, ...]) -> dict[str, Found]:
    """The fields a vision model read on the document's pages, by name: a field the
    model read on several pages is taken as the spec picks (the first page's, the
    last's, the largest amount); one it did not read, or not as its kind, is absent."""
    lines = read_lines(pages)
    found: dict[str, Found] = {}
    for spec in specs:
        readings = []
        for page in pages:
            raw = (page.field_answer or {}).get(spec.name) if page.status == "done" else None
            parsed = spec.parse(raw) if raw else None
            if parsed is not None:
                readings.append((page, parsed))
        if not readings:
            continue
        if spec.pick == "largest" and spec.kind == "money":
            page, parsed = max(readings, key=lambda r: r[1].value.amount)
        else:
            page, parsed = readings[-1] if spec.pick == "last" else readings[0]
        evidence = _evidence(parsed.raw, [line for line in lines if line.page is page])
        confidence = (SEEN * sum(line.confidence for line, _ in evidence) / len(evidence)
                      if evidence else UNSEEN)
        found[spec.name] = Found(spec, parsed, round(confidence, 4),
                                 [line.evidence(span) for line, span in evidence], by="model")
    return found


def _evidence(raw: str, lines: list[ReadLine]) -> list[tuple[ReadLine, tuple[int, int] | None]]:
    """The OCR line that holds the value (with the value's characters in it), else the
    lines that together hold it (an address over several lines), else none."""
    squashed = squash(raw)
    if not squashed:
        return []
    pattern = r"\W*".join(re.escape(ch) for ch in squashed)
    for line in lines:
        if match := re.search(pattern, line.text, re.IGNORECASE):
            return [(line, match.span())]
    parts = [line for line in lines if len(squash(line.text)) >= 3
             and squash(line.text) in squashed]
    return [(line, None) for line in parts]
