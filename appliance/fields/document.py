"""A document's fields: read from its pages' trees, checked, and put in the form the
store, the JSON output and routing use.

Each field becomes::

    {"name": "gross", "kind": "money", "required": true,
     "raw": "1.234,50", "value": "1234.50", "currency": "EUR",   # null when not found
     "confidence": 0.87, "evidence": [{"page": 1, "box": [x0, y0, x1, y1], "text": ...}],
     "checks": [{"layer": "logic", "ok": false, "message": "..."}],
     "valid": false, "read_by": "model", "corrected_by": null}

``value`` is the normal form (``kinds``): an ISO date, an amount as a decimal string,
an IBAN or VAT id without spaces. A field that was not found has ``value`` null and,
when required, a failed format check. ``read_by`` says who read the value: a vision
model (``fields.model``), the rules extractor (``fields.extract``) or a person.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass, replace

from appliance.fields.extract import Found, extract
from appliance.fields.items import ItemSum, item_sum
from appliance.fields.kinds import Money, Parsed, Problem, written_currency
from appliance.fields.lines import read_lines
from appliance.fields.model import model_found
from appliance.fields.qr import FapiaoQr, fapiao_qr
from appliance.fields.schema import FieldSpec
from appliance.fields.validate import (
    Seen, identity, reasons, validate, value_text, values,
)
from appliance.outputs.tree import PageTree, page_tree, page_trees
from appliance.store import Database, queries, transitions
from appliance.store.models import FieldSet, PageResult


@dataclass
class FieldsReading:
    fields: list[dict]
    reasons: list[str]  # routing reasons: missing_field / field_invalid
    identity: str | None  # the document's identity key for later business checks


def read_fields(trees: list[PageTree], specs: tuple[FieldSpec, ...],
                seen: Callable[[str], list[Seen]],
                today: datetime.date | None = None) -> FieldsReading:
    """Extract and check the fields of a document whose accepted pages are ``trees``;
    ``seen(identity)`` gives the earlier documents with the same identity. A value a
    vision model read stands before the rules extractor's."""
    found = {**extract(trees, specs), **model_found(trees, specs)}
    text = _text(trees)
    # an amount printed without its currency is in the one the document's others name
    # ("TOTAL 15.70" on a receipt whose items say "RM 4.50")
    currency = written_currency(text)
    found = {name: replace(item, parsed=_in_currency(item.parsed, currency))
             for name, item in found.items()}
    return _checked(specs, found, text, seen, today, frozenset(),
                    item_sum(read_lines(trees)),
                    fapiao_qr([code for tree in trees for code in tree.barcodes]))


def corrected_fields(specs: tuple[FieldSpec, ...], previous: list[dict],
                     corrections: dict[str, str], seen: Callable[[str], list[Seen]],
                     actor: str, today: datetime.date | None = None) -> FieldsReading:
    """A person's values over the ``previous`` reading, checked again as a reading is;
    an empty value removes the field, and an amount typed without a currency keeps the
    one read. A corrected field's confidence is 1 and its evidence is kept, or
    ``corrected_by`` says who set it. ValueError for a name the document type does not
    have."""
    names = {spec.name for spec in specs}
    unknown = sorted(set(corrections) - names)
    if unknown:
        raise ValueError(f"no field named {', '.join(unknown)}; this type has "
                         f"{', '.join(sorted(names))}")
    before = {f["name"]: f for f in previous}
    found: dict[str, Found] = {}
    for spec in specs:
        if spec.name in corrections:
            raw = corrections[spec.name].strip()
            if raw:
                parsed = _in_currency(_parsed(spec, raw), before.get(spec.name, {}).get("currency"))
                found[spec.name] = Found(spec, parsed, 1.0, [], by="person")
        elif (item := before.get(spec.name)) and item.get("raw") is not None:
            found[spec.name] = Found(spec, _parsed(spec, item["raw"]), item["confidence"], [],
                                     by=item.get("read_by", "rules"))
    # a person is the evidence of what they set; the rest was found in the text when read
    reading = _checked(specs, found, "", seen, today, frozenset(found))
    for field in reading.fields:
        old = before.get(field["name"], {})
        field["evidence"] = old.get("evidence", []) if field["raw"] == old.get("raw") else []
        field["corrected_by"] = actor if field["name"] in corrections else old.get("corrected_by")
    return reading


def _parsed(spec: FieldSpec, raw: str) -> Parsed:
    """A value read as its kind; one that is not of its kind at all keeps its text and
    fails the format check."""
    parsed = spec.parse(raw)
    return parsed or Parsed(raw, raw, Problem("not_kind", kind=spec.kind))


def _in_currency(parsed: Parsed, currency: str | None) -> Parsed:
    """An amount written without a currency in ``currency`` (the one it was read in)."""
    value = parsed.value
    if isinstance(value, Money) and value.currency is None and currency:
        return replace(parsed, value=replace(value, currency=currency))
    return parsed


def _text(trees: list[PageTree]) -> str:
    return "\n".join(line.text for tree in trees if tree.status == "done"
                     for block in tree.blocks for line in block.lines)


def _checked(specs: tuple[FieldSpec, ...], found: dict[str, Found], text: str,
             seen: Callable[[str], list[Seen]], today: datetime.date | None,
             attested: frozenset[str], items: ItemSum | None = None,
             qr: FapiaoQr | None = None) -> FieldsReading:
    key = identity(values(found))
    key = None if key is None else "|".join(key)
    checks = validate(specs, found, text=text, history=seen(key) if key else [], today=today,
                      attested=attested, items=items, qr=qr)
    fields = []
    for spec in specs:
        item = found.get(spec.name)
        value = item.parsed.value if item else None
        results = checks[spec.name]
        fields.append({
            "name": spec.name, "kind": spec.kind, "required": spec.required,
            "raw": item.parsed.raw if item else None,
            "value": None if value is None else value_text(value),
            "currency": value.currency if isinstance(value, Money) else None,
            "confidence": item.confidence if item else None,
            "evidence": [e.as_dict() for e in item.evidence] if item else [],
            "checks": [c.as_dict() for c in results],
            # an optional field that is not there is neither valid nor invalid
            "valid": all(c.ok for c in results) if item or spec.required else None,
            "read_by": item.by if item else None,
            "corrected_by": None,
        })
    return FieldsReading(fields, reasons(checks), key)


def field_values(fields: list[dict]) -> dict[str, str]:
    """The found fields' normal values by name (for business checks and evaluation)."""
    return {f["name"]: f["value"] for f in fields if f.get("value") is not None}


def read_document_fields(db: Database, document_id: str, doc_type: str,
                         specs: tuple[FieldSpec, ...],
                         unstored: tuple[int, PageResult] | None = None) -> FieldSet:
    """The document's fields from its accepted pages, as a row to store; ``unstored``
    is a page (0-based index) whose result is being accepted in the same transaction."""
    # each page as stored: fields are found by their words, whatever the furniture, and
    # this runs as each page is accepted (reading the pages together would be paid again)
    trees = page_trees(db, queries.accepted_results(db, document_id))
    if unstored is not None:
        index, result = unstored
        trees[index] = page_tree(index + 1, result)

    reading = read_fields(trees, specs, _history(db, document_id, doc_type))
    return FieldSet(document_id=document_id, doc_type=doc_type, identity=reading.identity,
                    fields=reading.fields, reasons=reading.reasons)


def correct_document_fields(db: Database, document_id: str, doc_type: str,
                            specs: tuple[FieldSpec, ...], corrections: dict[str, str],
                            actor: str) -> FieldSet:
    """A person's field values stored over the newest reading, checked again and
    audited (``corrected_fields``). ValueError for a field the type does not have."""
    latest = queries.latest_fields(db, document_id)
    previous = latest.fields if latest else []
    reading = corrected_fields(specs, previous, corrections, _history(db, document_id, doc_type),
                               actor)
    before = {f["name"]: f["raw"] for f in previous}
    row = FieldSet(document_id=document_id, doc_type=doc_type, identity=reading.identity,
                   fields=reading.fields, reasons=reading.reasons, source="corrected",
                   actor=actor)
    transitions.record_fields(db, row, {name: [before.get(name), value or None]
                                        for name, value in corrections.items()})
    return row


def _history(db: Database, document_id: str, doc_type: str) -> Callable[[str], list[Seen]]:
    def seen(key: str) -> list[Seen]:
        return [Seen(row.document_id, field_values(row.fields))
                for row in queries.field_history(db, doc_type, key, exclude=document_id)]
    return seen


def refresh_after_review(db: Database, document_id: str, doc_type: str,
                         specs: tuple[FieldSpec, ...]) -> bool:
    """Read the fields again when a reviewer corrected a page's text after they were
    read, so that the document's outputs carry the accepted values. True if read."""
    latest = queries.latest_fields(db, document_id)
    corrected_at = queries.newest_correction_at(db, document_id)
    if latest is None or latest.source == "corrected" or corrected_at is None \
            or corrected_at <= latest.created_at:
        return False  # a person's field values are not read over
    transitions.record_fields(db, read_document_fields(db, document_id, doc_type, specs))
    return True
