"""A document's pages read together: what no page shows alone, its running header or
footer printed at the same edge of page after page (``reading.repeated``), placed in
the pages' readings as they are rendered (``export.render``, the hOCR and ALTO trees,
the Document Intelligence result). Each page is read by itself in the worker, maybe on
another worker and before its neighbours are read; the stored readings stay as the
worker made them, and this runs on them whenever the document is rendered.
"""

from __future__ import annotations

from dataclasses import replace

from appliance.page import Line
from appliance.pipeline.read import READ_BY, reordered
from appliance.raster.preprocess import mapped_box, to_original
from appliance.reading.repeated import NEIGHBOURS, Repeated, repeated_furniture
from appliance.store import Database, queries
from appliance.store.models import Page, PageResult

# the provenance entry of a reading the document's other pages changed: how many of its
# lines they showed to be running furniture
DOCUMENT_FURNITURE = "document_furniture"


def document_pages(db: Database, document_id: str,
                   page_furniture: str = "separate") -> list[tuple[Page, PageResult | None]]:
    """Each page of the document with its accepted result (None for a failed page), read
    together (``read_together``)."""
    return read_together(queries.accepted_results(db, document_id), page_furniture)


def document_page(db: Database, document_id: str, index: int,
                  page_furniture: str = "separate") -> tuple[Page, PageResult | None] | None:
    """The document's page at ``index`` (0-based) with its accepted result, read together
    with the neighbours that decide its running furniture, as in ``document_pages``; None
    where the document has no such page."""
    near = range(max(index - NEIGHBOURS, 0), index + NEIGHBOURS + 1)
    pages = read_together(queries.accepted_results(db, document_id, near), page_furniture)
    return next(((page, result) for page, result in pages if page.index == index), None)


def read_together(pages: list[tuple[Page, PageResult | None]],
                  page_furniture: str = "separate") -> list[tuple[Page, PageResult | None]]:
    """A document's pages with their accepted results, each machine reading that
    holds running furniture only the document shows (``reading.repeated``) read again
    with it placed as ``page_furniture`` says: copies, the store is not changed. A
    person's correction is theirs and stands as they saved it; a vision model's
    reading is its own (``_read_by_rules``)."""
    machine = [result if result is not None and _read_by_rules(result) else None
               for _, result in pages]
    found = repeated_furniture([_on_page(result) if result is not None else None
                                for result in machine])
    return [(page, _with_furniture(result, running, page_furniture) if running else result)
            for (page, result), running in zip(pages, found)]


def _read_by_rules(result: PageResult) -> bool:
    """Whether the result is the layout rules' reading of a machine's lines (their
    version in its provenance): a person's correction is none, nor is a vision model's
    reading (its own Markdown, its words placed on another reading's lines)."""
    return (READ_BY in (result.provenance or {}) and bool(result.lines)
            and all(line.get("block") is not None for line in result.lines))


def _on_page(result: PageResult) -> tuple[list[Line], float]:
    """The reading's lines where they stand on the page as rendered, and its height:
    preprocessing crops each scan to its content and may enlarge it, so one page's
    image is another's page shifted and scaled. A page the engine read turned stays in
    the pixels it was read in (its rows run across the rendered page's height)."""
    provenance = result.provenance or {}
    lines = [Line.from_dict(line) for line in result.lines]
    back = to_original(provenance.get("preprocess") or [])
    rendered = (provenance.get("rendered") or {}).get("size")
    if rendered and abs(back[1, 1]) >= abs(back[1, 0]):
        return [replace(line, box=mapped_box(line.box, back)) for line in lines], rendered[1]
    size = provenance.get("image_size")
    return lines, size[1] if size else max(line.box[3] for line in lines)


def _with_furniture(result: PageResult, running: Repeated, page_furniture: str) -> PageResult:
    """``result`` read again with the lines ``running`` names as its running header and
    footer, each edge's a block of its own: the header's first, the footer's last."""
    roles = {**running.top, **running.foot}
    body = list(dict.fromkeys(line["block"] for number, line in enumerate(result.lines)
                              if number not in roles))
    header = max(line["block"] for line in result.lines) + 1
    footer = header + 1
    lines = [line if number not in roles else
             {**line, "role": roles[number].value,
              "block": header if number in running.top else footer}
             for number, line in enumerate(result.lines)]
    order = [*([header] if running.top else []), *body, *([footer] if running.foot else [])]
    page = reordered(lines, result.provenance or {}, order, page_furniture)
    return result.model_copy(update={
        "text": page.text, "markdown": page.markdown,
        "lines": [line.to_dict() for line in page.lines],
        "provenance": {**(result.provenance or {}), DOCUMENT_FURNITURE: len(roles)}})
