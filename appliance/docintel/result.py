"""An analysis's state and its AnalyzeResult, from the store.

Everything comes from what the appliance keeps of the document: its pages' accepted
text or Markdown (``content``), its page trees (words and lines with their boxes and
confidences, blocks in reading order, ``outputs.tree``), the structure of its Markdown
(tables, ``quality.blocks``) and its key fields; the languages of the content are found
when asked for (``docintel.languages``). Positions are the trees' boxes on the
page as rendered: in pixels for an image, in inches for a PDF (at the page's dpi),
each box a polygon of its four corners through the tree's ``to_page``, so the words of
a page that preprocessing straightened or turned lie on their ink. Offsets count
Unicode code points, then as the client asked (``docintel.offsets``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import datetime, timezone

from appliance.config import Settings
from appliance.docintel import API_VERSION
from appliance.docintel.catalogue import Model, model
from appliance.docintel.errors import service_error
from appliance.docintel.languages import LANGUAGES, languages
from appliance.docintel.offsets import CODE_POINTS, counted_as
from appliance.errors import InvalidRequest
from appliance.export import document_error
from appliance.outputs.tree import Box, PageTree, page_trees
from appliance.page import Furniture, Structure, Word, is_mark, unspaced
from appliance.pipeline.document import document_pages
from appliance.quality.blocks import MarkdownBlock, parse_blocks
from appliance.quality.html_tables import Cell, placed
from appliance.quality.markdown import escape_markdown
from appliance.store import Database, queries
from appliance.store.models import Analysis, DocStatus, PageResult, PageStatus
from appliance.store.queries import DocumentView

PAGE_BREAK = "\n\n<!-- PageBreak -->\n\n"  # between the pages of Markdown content
# a key field that failed a check: no surer than a value the appliance found on no line
INVALID_CONFIDENCE = 0.3
# the reading's furniture roles (reading.furniture) as the service names them
_FURNITURE = {Furniture.HEADER: "pageHeader", Furniture.FOOTER: "pageFooter",
              Furniture.PAGE_NUMBER: "pageNumber"}
_OWN_RUN = (Structure.HEADING, *_FURNITURE)
BARCODES = "barcodes"  # the add-on feature, and the page's list of them
# zxing-cpp's names (engines.barcodes) that the service spells otherwise
_BARCODE_KINDS = {"DataBarExp": "DataBarExpanded"}
# the ``pages`` query: page numbers and ranges, "1-3,5"
PAGES_PATTERN = r"^\s*\d+\s*(-\s*\d+\s*)?(,\s*\d+\s*(-\s*\d+\s*)?)*$"


def page_numbers(spec: str | None, page_count: int) -> set[int] | None:
    """The pages of a document of ``page_count`` pages that a ``pages`` query names
    ("1-3,5"); None: all. A range is clipped to the document, so its size costs nothing
    ("1-99999999999" is every page). InvalidRequest when it is not such a list."""
    if not spec:
        return None
    if not re.match(PAGES_PATTERN, spec):
        raise InvalidRequest(f"pages must be page numbers and ranges such as 1-3,5, got "
                             f"{spec[:100]!r}")
    numbers: set[int] = set()
    for part in spec.split(","):
        first, _, last = part.partition("-")
        numbers.update(range(int(first), min(int(last or first), page_count) + 1))
    return numbers


def iso(at: float) -> str:
    return datetime.fromtimestamp(at, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def status(view: DocumentView, review: str) -> str:
    """``notStarted``, ``running``, ``succeeded`` or ``failed``. A page waiting for review
    keeps the analysis running, unless ``[di] review = "skip"``."""
    counts = view.page_counts
    if view.status in (DocStatus.DONE, DocStatus.PARTIAL):
        return "succeeded"
    if view.status == DocStatus.FAILED:
        return "failed"
    if counts[PageStatus.QUEUED] == sum(counts.values()):
        return "notStarted"
    if counts[PageStatus.QUEUED] or counts[PageStatus.RUNNING] or review == "wait":
        return "running"
    return "succeeded"


def operation(db: Database, view: DocumentView, analysis: Analysis,
              settings: Settings) -> dict:
    """The body of ``GET .../analyzeResults/{resultId}``."""
    state = status(view, settings.di.review)
    updated = max([view.doc.created_at, *(p.updated_at for p in view.pages)])
    body = {"status": state, "createdDateTime": iso(view.doc.created_at),
            "lastUpdatedDateTime": iso(updated)}
    if state == "failed":
        error = document_error(view)
        body["error"] = service_error(error["code"], error["message"])
    elif state == "succeeded":
        body["analyzeResult"] = analyze_result(db, view, analysis, settings)
    return body


@dataclass
class Located:
    """A word of a page tree found in the content, at ``start`` to ``end``."""

    word: Word
    start: int
    end: int


@dataclass
class PageReading:
    number: int
    tree: PageTree
    result: PageResult | None
    status: str
    start: int  # the page's text's offset in the content
    text: str
    scale: float  # pixels to the page's unit
    words: list[Located] = field(default_factory=list)
    by_line: dict[int, list[Located]] = field(default_factory=dict)  # id(line) -> words
    # the selection marks' tokens found in the content, by their boxes: not words
    marks: dict[Box, Located] = field(default_factory=dict)

    def polygon(self, box: Box) -> list[float]:
        """A box of the tree (the engine's frame) as the polygon of its corners on the page."""
        x0, y0, x1, y1 = box
        return self.corners([(x0, y0), (x1, y0), (x1, y1), (x0, y1)])

    def corners(self, points) -> list[float]:
        """Points of the tree (the engine's frame) on the page, as a polygon."""
        return self._scaled([self.tree.matrix[:2] @ (x, y, 1.0) for x, y in points])

    def rectangle(self, box) -> list[float]:
        """A box already on the page as rendered (a key field's evidence), as a polygon."""
        x0, y0, x1, y1 = box
        return self._scaled([(x0, y0), (x1, y0), (x1, y1), (x0, y1)])

    def _scaled(self, points) -> list[float]:
        return [round(float(v) * self.scale, 4) for point in points for v in point]

    def region(self, box: Box) -> dict:
        return {"pageNumber": self.number, "polygon": self.polygon(box)}


def _union(boxes: list[Box]) -> Box:
    return (min(b[0] for b in boxes), min(b[1] for b in boxes),
            max(b[2] for b in boxes), max(b[3] for b in boxes))


def _span(words: list[Located]) -> list[dict]:
    if not words:
        return []
    return [{"offset": words[0].start, "length": words[-1].end - words[0].start}]


def _locate(reading: PageReading, markdown: bool, review_cap: float | None) -> None:
    """Find each word of the page's tree in its text, in reading order; a word the text
    does not hold where expected is looked for from the page's start."""
    cursor = 0
    default = reading.result.confidence if reading.result else None
    for block in reading.tree.blocks:
        for line in block.lines:
            found = reading.by_line.setdefault(id(line), [])
            for word in (piece for whole in line.words for piece in _characters(whole)):
                forms = (word.text, escape_markdown(word.text)) if markdown else (word.text,)
                hit = next(((at, form) for start in (cursor, 0) for form in forms
                            if (at := reading.text.find(form, start)) >= 0), None)
                if hit is None:
                    continue
                at, form = hit
                confidence = word.score if word.score is not None else default
                if review_cap is not None:
                    confidence = min(confidence if confidence is not None else 1.0, review_cap)
                located = Located(Word(word.text, word.box, confidence),
                                  reading.start + at, reading.start + at + len(form))
                cursor = at + len(form)
                if is_mark(word.text):
                    reading.marks[tuple(word.box)] = located
                    continue
                reading.words.append(located)
                found.append(located)


def _characters(word: Word) -> list[Word]:
    """``word`` as the service gives it: each character of a script written without
    spaces (Chinese, Japanese) a word of its own, a run of other characters ("12",
    "2024") one; its box shared out along the word, a full-width character taking
    twice a half-width one's share (the engines give a word's box, not its
    characters')."""
    pieces: list[str] = []
    for ch in word.text:
        if unspaced(ch) or not pieces or unspaced(pieces[-1][-1]):
            pieces.append(ch)
        else:
            pieces[-1] += ch
    if len(pieces) < 2:
        return [word]
    shares = [sum(2 if unspaced(ch) else 1 for ch in piece) for piece in pieces]
    x0, y0, x1, y1 = word.box
    along = 0 if x1 - x0 >= y1 - y0 else 1  # a column of vertical text shares its height
    start, length = word.box[along], word.box[along + 2] - word.box[along]
    words, done = [], 0
    for piece, share in zip(pieces, shares):
        box = list(word.box)
        box[along] = start + length * done / sum(shares)
        done += share
        box[along + 2] = start + length * done / sum(shares)
        words.append(Word(piece, tuple(box), word.score))
    return words


def _joined(words: list[str]) -> str:
    """A line's words as its text: a space between two words, none beside a character
    of a script written without spaces ("第", "12", "页" are "第12页")."""
    text = words[0]
    for word in words[1:]:
        text += word if unspaced(text[-1]) or unspaced(word[0]) else " " + word
    return text


def _selection_marks(reading: PageReading) -> list[dict]:
    """The page's check boxes as the service gives them: each with the span of its token
    in the content, where the content holds it (a vision model's reading does not: the
    span is then empty at the page's end, as a barcode's)."""
    end = {"offset": reading.start + len(reading.text), "length": 0}
    marks = []
    for mark in reading.tree.selection_marks:
        token = reading.marks.get(tuple(mark["box"]))
        marks.append({"state": mark["state"], "polygon": reading.polygon(mark["box"]),
                      "confidence": mark["confidence"],
                      "span": ({"offset": token.start, "length": token.end - token.start}
                               if token else end)})
    return marks


def _page_json(reading: PageReading, unit: str, barcodes: bool) -> dict:
    tree = reading.tree
    dx, dy = tree.matrix[:2, :2] @ (1.0, 0.0)
    lines = []
    for block in tree.blocks:
        for line in block.lines:
            if words := reading.by_line[id(line)]:
                lines.append({"content": _joined([w.word.text for w in words]),
                              "polygon": reading.polygon(line.box), "spans": _span(words)})
    return {
        "pageNumber": reading.number,
        "angle": round(math.degrees(math.atan2(dy, dx)), 4),  # clockwise: y grows down
        "width": round(tree.width * reading.scale, 4),
        "height": round(tree.height * reading.scale, 4),
        "unit": unit,
        "spans": [{"offset": reading.start, "length": len(reading.text)}],
        "words": [{"content": w.word.text, "polygon": reading.polygon(w.word.box),
                   "confidence": round(w.word.score if w.word.score is not None
                                       else 1.0, 4),
                   "span": {"offset": w.start, "length": w.end - w.start}}
                  for w in reading.words],
        "lines": lines,
        "selectionMarks": _selection_marks(reading),
        # asked for (features=barcodes): each code, its span empty at the page's end
        # (the content does not hold them)
        **({BARCODES: [{"kind": _BARCODE_KINDS.get(code["format"], code["format"]),
                        "value": code["value"], "polygon": reading.corners(code["polygon"]),
                        "span": {"offset": reading.start + len(reading.text), "length": 0},
                        "confidence": 1.0}  # a code decodes whole, its checks passed
                       for code in tree.barcodes]} if barcodes else {}),
    }


@dataclass
class Run:
    """Lines of one block with one role, in order: a paragraph."""

    reading: PageReading
    role: str | None
    lines: list


def _runs(reading: PageReading) -> list[Run]:
    """The page's paragraphs: in each block, a heading line stands alone from the rest,
    and so does the page's furniture (its header, footer, page number), a run of each."""
    runs: list[Run] = []
    for block in reading.tree.blocks:
        current: Run | None = None
        for line in block.lines:
            role = line.role if line.role in _OWN_RUN else None
            if current is not None and current.role == role and role != Structure.HEADING:
                current.lines.append(line)
            else:
                current = Run(reading, role, [line])
                runs.append(current)
    return [run for run in runs if any(reading.by_line[id(line)] for line in run.lines)]


def _paragraphs(readings: list[PageReading], layout: bool) -> list[dict]:
    """The pages' paragraphs; with ``layout``, each with the role its lines have in the
    stored page model: the furniture the reading found (``reading.furniture``), a
    heading (the first one the document's title)."""
    paragraphs, titled = [], False
    for run in (run for reading in readings for run in _runs(reading)):
        words = [w for line in run.lines for w in run.reading.by_line[id(line)]]
        paragraph = {"content": "\n".join(line.text for line in run.lines),
                     "spans": _span(words), "boundingRegions": [
                         run.reading.region(_union([line.box for line in run.lines]))]}
        if layout:
            if run.role in _FURNITURE:
                paragraph["role"] = _FURNITURE[run.role]
            elif run.role == Structure.HEADING:
                paragraph["role"] = "sectionHeading" if titled else "title"
                titled = True
        paragraphs.append(paragraph)
    return paragraphs


def _find_run(words: list[Located], tokens: list[str], start: int) -> tuple[int, int] | None:
    for i in range(start, len(words) - len(tokens) + 1):
        if [w.word.text for w in words[i:i + len(tokens)]] == tokens:
            return i, i + len(tokens)
    return None


def _tables(readings: list[PageReading]) -> list[dict]:
    """The tables of the pages' Markdown, each cell placed on the words it holds."""
    tables = []
    for reading in readings:
        cursor = 0
        markdown = reading.result.markdown if reading.result else ""
        for block in parse_blocks(markdown or ""):
            if block.kind != "table" or not block.rows:
                continue
            header = bool(block.spans or any(block.rows[0]))
            cells, held = [], []
            grid = _table_cells(block)
            for r, c, text, row_span, column_span in grid:
                cell = {"rowIndex": r, "columnIndex": c, "content": text, "spans": []}
                if row_span > 1:
                    cell["rowSpan"] = row_span
                if column_span > 1:
                    cell["columnSpan"] = column_span
                if r == 0 and header:
                    cell["kind"] = "columnHeader"
                if text.split() and (run := _find_run(reading.words, text.split(), cursor)):
                    words = reading.words[run[0]:run[1]]
                    cursor = run[1]
                    held.extend(words)
                    cell["spans"] = _span(words)
                    cell["boundingRegions"] = [reading.region(_union(
                        [w.word.box for w in words]))]
                cells.append(cell)
            table = {"rowCount": max((r + n for r, _, _, n, _ in grid), default=0),
                     "columnCount": max((c + n for _, c, _, _, n in grid), default=0),
                     "cells": cells, "spans": _span(sorted(held, key=lambda w: w.start))}
            if held:
                table["boundingRegions"] = [reading.region(_union([w.word.box for w in held]))]
            tables.append(table)
    return tables


def _table_cells(block: MarkdownBlock) -> list[tuple[int, int, str, int, int]]:
    """(row, column, text, rows spanned, columns spanned) of each cell of a table block:
    an HTML table's as a browser lays them out, a pipe table's without its empty header
    row."""
    if block.spans:
        rows = [[Cell(text, *span) for text, span in zip(texts, spans)]
                for texts, spans in zip(block.rows, block.spans)]
        return [(r, c, cell.text, cell.rowspan, cell.colspan) for r, c, cell in placed(rows)]
    rows = block.rows if any(block.rows[0]) else block.rows[1:]
    return [(r, c, text, 1, 1) for r, row in enumerate(rows) for c, text in enumerate(row)]


def _sections(paragraphs: list[dict], tables: list[dict]) -> list[dict]:
    """A section from each title or heading to the next, of the elements in content order."""
    elements = sorted([(p["spans"][0]["offset"] if p["spans"] else 0, f"/paragraphs/{i}",
                        p.get("role") in ("title", "sectionHeading"), p["spans"])
                       for i, p in enumerate(paragraphs)]
                      + [(t["spans"][0]["offset"] if t["spans"] else 0, f"/tables/{i}", False,
                          t["spans"]) for i, t in enumerate(tables)])
    sections: list[dict] = []
    for _offset, pointer, heading, spans in elements:
        if heading or not sections:
            sections.append({"elements": [], "spans": []})
        sections[-1]["elements"].append(pointer)
        sections[-1]["spans"].extend(spans)
    for section in sections:
        if spans := section["spans"]:
            end = max(s["offset"] + s["length"] for s in spans)
            section["spans"] = [{"offset": spans[0]["offset"], "length": end - spans[0]["offset"]}]
    return sections


def _field(service_type: str, item: dict | None, currency: str | None,
           readings: dict[int, PageReading], content: str) -> dict:
    body = {"type": service_type}
    if item is None or item.get("value") is None:
        return body
    value = item["value"]
    if service_type == "currency":
        body["valueCurrency"] = {"amount": float(value),
                                 **({"currencyCode": item.get("currency") or currency}
                                    if item.get("currency") or currency else {})}
    elif service_type == "date":
        body["valueDate"] = value
    elif service_type == "number":
        body["valueNumber"] = float(value)
    else:
        body["valueString"] = value
    confidence = item.get("confidence") if item.get("confidence") is not None else 1.0
    if item.get("valid") is False:
        confidence = min(confidence, INVALID_CONFIDENCE)
    raw = item.get("raw") or value
    regions, spans = [], []
    for evidence in item.get("evidence") or []:
        if (reading := readings.get(evidence["page"])) is None:
            continue
        regions.append({"pageNumber": reading.number,
                        "polygon": reading.rectangle(evidence["box"])})
        if (at := content.find(raw, reading.start, reading.start + len(reading.text))) >= 0:
            spans.append({"offset": at, "length": len(raw)})
    body.update({"content": raw, "confidence": round(confidence, 4),
                 "boundingRegions": regions, "spans": spans})
    # the extension property: what the appliance's checks found (README, "Key fields")
    body["applianceValidation"] = {
        "valid": item.get("valid"),
        "failed": [f"{c['layer']}: {c['message']}" for c in item.get("checks") or []
                   if not c["ok"]]}
    return body


def _documents(db: Database, document_id: str, spec: Model, readings: list[PageReading],
               content: str) -> list[dict]:
    field_set = queries.latest_fields(db, document_id)
    items = {f["name"]: f for f in (field_set.fields if field_set else [])}
    currency = (items.get("currency") or {}).get("value")
    by_number = {reading.number: reading for reading in readings}
    fields = {f.name: _field(f.type, items.get(f.source), currency, by_number, content)
              for f in spec.fields}
    found = [f["confidence"] for f in fields.values() if "confidence" in f]
    return [{"docType": spec.service_doc_type,
             "boundingRegions": [reading.region((0, 0, reading.tree.width, reading.tree.height))
                                 for reading in readings if reading.tree.width],
             "spans": [{"offset": 0, "length": len(content)}], "fields": fields,
             "confidence": round(sum(found) / len(found), 4) if found else 0.0}]


def analyze_result(db: Database, view: DocumentView, analysis: Analysis,
                   settings: Settings) -> dict:
    """The AnalyzeResult of a document whose analysis has succeeded."""
    spec = model(analysis.model_id)
    options = analysis.options
    markdown = options.get("outputContentFormat") == "markdown"
    wanted = page_numbers(options.get("pages"), view.doc.page_count)
    unit = "inch" if view.doc.kind == "pdf" else "pixel"
    warnings = [{"code": "FeatureNotSupported", "target": feature,
                 "message": f"the appliance does not offer {feature}; it was ignored"}
                for feature in options.get("ignored") or []]
    readings: list[PageReading] = []
    parts: list[str] = []
    offset = 0
    pages = document_pages(db, view.doc.id, settings.output.page_furniture)
    for (page, result), tree in zip(pages, page_trees(db, pages)):
        number = page.index + 1
        if wanted is not None and number not in wanted:
            continue
        if parts:
            separator = PAGE_BREAK if markdown else "\n"
            parts.append(separator)
            offset += len(separator)
        failed = page.status == PageStatus.FAILED
        text = "" if failed else ((result.markdown if markdown else result.text) or "")
        reading = PageReading(number, tree, None if failed else result, page.status, offset,
                              text, 1.0 / tree.dpi if unit == "inch" else 1.0)
        review_cap = None
        if page.status == PageStatus.REVIEW:
            review_cap = settings.review.review_below
            warnings.append({"code": "PageAwaitingReview", "target": str(number),
                             "message": f"page {number} waits for a reviewer; this is the "
                                        f"machine's reading, each word at confidence "
                                        f"{review_cap:g} at most"})
        if failed:
            warnings.append({"code": "PageNotRead", "target": str(number),
                             "message": f"page {number} could not be read "
                                        f"({page.error_code}): {page.error_message}"})
        _locate(reading, markdown, review_cap)
        readings.append(reading)
        parts.append(text)
        offset += len(text)
    content = "".join(parts)
    paragraphs = _paragraphs(readings, spec.layout)
    body = {"apiVersion": API_VERSION, "modelId": spec.model_id,
            "stringIndexType": CODE_POINTS,
            "contentFormat": "markdown" if markdown else "text", "content": content,
            "pages": [_page_json(reading, unit, BARCODES in options.get("features", []))
                      for reading in readings],
            "paragraphs": paragraphs, "styles": []}
    if LANGUAGES in options.get("features", []):
        body[LANGUAGES] = languages(content, [(r.start, len(r.text)) for r in readings],
                                    tuple(settings.di.languages))
    if spec.layout:
        body["tables"] = tables = _tables(readings)
        body["sections"] = _sections(paragraphs, tables)
        body["figures"] = []  # the appliance does not find figures
    if spec.fields:
        body["documents"] = _documents(db, view.doc.id, spec, readings, content)
    if warnings:
        body["warnings"] = warnings
    return counted_as(body, content, options.get("stringIndexType", CODE_POINTS))
