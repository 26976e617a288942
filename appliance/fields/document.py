"""A document's fields: read from its pages' trees, checked, and put in the form the
store, the JSON output and routing use.

Each field becomes::

    {"name": "gross", "kind": "money", "required": true,
     "raw": "1.234,50", "value": "1234.50", "currency": "EUR",   # null when not found
     "confidence": 0.87, "evidence": [{"page": 1, "box": [x0, y0, x1, y1], "text": ...}],
     "checks": [{"layer": "logic", "ok": false, "message": "..."}],
     "valid": false, "corrected_by": null}

``value`` is the normal form (``kinds``): an ISO date, an amount as a decimal string,
an IBAN or VAT id without spaces. A field that was not found has ``value`` null and,
when required, a failed format check.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass

from appliance.fields.extract import extract
from appliance.fields.kinds import Money
from appliance.fields.schema import FieldSpec
from appliance.fields.validate import Seen, identity, reasons, validate, values
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
    ``seen(identity)`` gives the earlier documents with the same identity."""
    found = extract(trees, specs)
    text = "\n".join(line.text for tree in trees if tree.status == "done"
                     for block in tree.blocks for line in block.lines)
    key = identity(values(found))
    key = None if key is None else "|".join(key)
    checks = validate(specs, found, text=text, history=seen(key) if key else [], today=today)
    fields = []
    for spec in specs:
        item = found.get(spec.name)
        value = item.parsed.value if item else None
        results = checks[spec.name]
        fields.append({
            "name": spec.name, "kind": spec.kind, "required": spec.required,
            "raw": item.parsed.raw if item else None,
            "value": None if value is None else str(value.amount if isinstance(value, Money)
                                                    else value),
            "currency": value.currency if isinstance(value, Money) else None,
            "confidence": item.confidence if item else None,
            "evidence": [e.as_dict() for e in item.evidence] if item else [],
            "checks": [c.as_dict() for c in results],
            # an optional field that is not there is neither valid nor invalid
            "valid": all(c.ok for c in results) if item or spec.required else None,
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
    trees = page_trees(db, document_id)
    if unstored is not None:
        index, result = unstored
        trees[index] = page_tree(index + 1, result)

    def seen(key: str) -> list[Seen]:
        return [Seen(row.document_id, field_values(row.fields))
                for row in queries.field_history(db, doc_type, key, exclude=document_id)]

    reading = read_fields(trees, specs, seen)
    return FieldSet(document_id=document_id, doc_type=doc_type, identity=reading.identity,
                    fields=reading.fields, reasons=reading.reasons)


def refresh_after_review(db: Database, document_id: str, doc_type: str,
                         specs: tuple[FieldSpec, ...]) -> bool:
    """Read the fields again when a reviewer corrected a page's text after they were
    read, so that the document's outputs carry the accepted values. True if read."""
    latest = queries.latest_fields(db, document_id)
    corrected_at = queries.newest_correction_at(db, document_id)
    if latest is None or corrected_at is None or corrected_at <= latest.created_at:
        return False
    transitions.record_fields(db, read_document_fields(db, document_id, doc_type, specs))
    return True
