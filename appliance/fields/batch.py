"""`appliance fields export`: a batch of documents' key fields for the systems that take
them on (accounting, ERP): CSV, a row per document and a column per field's normal
value and one for whether it passed its checks; or JSON Lines, a record per document
with every field as the JSON output has it."""

from __future__ import annotations

import csv
import json
import re
from typing import TextIO

from appliance.fields.schema import FieldSpec
from appliance.store.models import Document, FieldSet

FIXED = ("document_id", "name", "created_at", "valid", "reasons")
# A cell starting so is a formula to a spreadsheet (OWASP's CSV injection): a file name
# or a read value such as =HYPERLINK(...) would run when the CSV is opened.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# a plain number is read as a number, never a formula: a negative amount stays a number
PLAIN_NUMBER = re.compile(r"[+-]?\d+(\.\d+)?")


def inert(cell):
    """``cell`` as a spreadsheet shows it as text: a leading ' where it could be a formula."""
    if isinstance(cell, str) and cell.startswith(FORMULA_START) \
            and not PLAIN_NUMBER.fullmatch(cell):
        return "'" + cell
    return cell


def write_csv(rows: list[tuple[Document, FieldSet]], specs: tuple[FieldSpec, ...],
              out: TextIO) -> int:
    names = [spec.name for spec in specs]
    writer = csv.writer(out)  # quotes a cell with a comma, a quote or a line break

    def write(cells) -> None:
        writer.writerow([inert(cell) for cell in cells])

    write([*FIXED, *(column for name in names for column in (name, f"{name}_valid"))])
    for doc, field_set in rows:
        by_name = {f["name"]: f for f in field_set.fields}
        cells = [doc.id, doc.name, doc.created_at, not field_set.reasons,
                 "; ".join(field_set.reasons)]
        for name in names:
            item = by_name.get(name, {})
            cells += [item.get("value") or "", "" if item.get("valid") is None else item["valid"]]
        write(cells)
    return len(rows)


def write_jsonl(rows: list[tuple[Document, FieldSet]], out: TextIO) -> int:
    for doc, field_set in rows:
        out.write(json.dumps({"document_id": doc.id, "name": doc.name,
                              "doc_type": doc.doc_type, "created_at": doc.created_at,
                              "tags": doc.tags, "reasons": field_set.reasons,
                              "fields": field_set.fields}, ensure_ascii=False) + "\n")
    return len(rows)
