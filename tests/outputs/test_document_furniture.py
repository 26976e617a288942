"""A document's pages read together (``pipeline.document``): the running header that only
its repetition from page to page shows is placed as the page furniture in every output,
the stored readings stay as the worker made them, and a reviewer's correction stands as
it was saved."""

from __future__ import annotations

import json
import time

from appliance.intake import SubmitOptions
from appliance.page import Line
from appliance.pipeline.document import read_together
from appliance.pipeline.read import READ_BY
from appliance.reading import RECIPE, read_lines
from appliance.reading.markdown import FURNITURE_HEADING
from appliance.store import queries, reviews
from appliance.store.models import Page, PageResult
from appliance.measure.synthetic_chinese import PROSE as PROSE_ZH
from tests.fixtures.documents import CONTRACT_HEADER, write_contract_pdf
from tests.ui.test_ui_handlers import make_appliance, wait_final

PAGES = 4


def _header_place(markdown: str) -> str:
    """Where the contract's header stands in a page's Markdown: in its body, or under
    its furniture heading."""
    body, _, furniture = markdown.partition(FURNITURE_HEADING)
    if CONTRACT_HEADER in furniture:
        return "furniture"
    return "body" if CONTRACT_HEADER in body else ""


def test_a_running_header_only_the_document_shows_is_each_page_s_furniture(tmp_path):
    appliance = make_appliance(tmp_path, review={"enabled": False})
    appliance.start()
    try:
        doc = appliance.submit_path(write_contract_pdf(tmp_path / "contract.pdf", PAGES),
                                    SubmitOptions(source="api"))
        wait_final(appliance, [doc.id])
        stored = [result.markdown for _, result in queries.accepted_results(appliance.db, doc.id)]
        rendered = appliance.exporter.rendered(doc.id, ["md", "json", "hocr"])
        # the document view shows a page as the results render it, read with its neighbours
        shown = [appliance.library.page(doc.id, index).result.markdown for index in range(PAGES)]
    finally:
        appliance.stop()
    # each page alone reads the header as the first line of its body; the store keeps that
    assert [_header_place(markdown) for markdown in stored] == ["body"] * PAGES
    pages = json.loads(rendered["json"])["pages"]
    assert [_header_place(page["markdown"]) for page in pages] == ["furniture"] * PAGES
    assert shown == [page["markdown"] for page in pages]
    assert [[line["role"] for line in page["lines"] if line["text"] == CONTRACT_HEADER]
            for page in pages] == [["header"]] * PAGES
    assert rendered["md"].count(f"{FURNITURE_HEADING}\n\n{CONTRACT_HEADER}") == PAGES
    assert rendered["hocr"].count('class="ocr_header"') == PAGES  # the trees read the roles too


def test_a_reviewer_s_correction_stands_as_saved_beside_pages_read_together(tmp_path):
    appliance = make_appliance(tmp_path, review={"always_review": ["contract"]})
    appliance.start()
    try:
        doc = appliance.submit_path(write_contract_pdf(tmp_path / "contract.pdf", PAGES),
                                    SubmitOptions(source="api", doc_type="contract"))
        deadline = time.monotonic() + 180
        while (waiting := [page.status for page, _ in
                           queries.accepted_results(appliance.db, doc.id)]) != ["review"] * PAGES:
            assert time.monotonic() < deadline, f"pages not all in review: {waiting}"
            time.sleep(0.2)
        settled, shown = [], {}
        while len(settled) < PAGES:
            page_id = reviews.claim_review(appliance.db, "anna", 60)
            index = next(page.index for page, _ in queries.accepted_results(appliance.db, doc.id)
                         if page.id == page_id)
            # the console shows the page as the results will: the header as furniture
            shown[index] = _header_place(appliance.review.open_page(page_id).markdown)
            if index == 1:  # the reviewer keeps the header at the top of page 2's body
                corrected = f"{CONTRACT_HEADER}\n\n第二页由审核人校对。"
                reviews.correct(appliance.db, page_id, "anna", corrected, corrected)
            else:
                reviews.approve(appliance.db, page_id, "anna")
            settled.append(index)
        wait_final(appliance, [doc.id])
        pages = json.loads(appliance.exporter.rendered(doc.id, ["json"])["json"])["pages"]
    finally:
        appliance.stop()
    assert shown == {index: "furniture" for index in range(PAGES)}
    assert pages[1]["markdown"] == corrected
    assert [_header_place(page["markdown"]) for page in pages] == [
        "furniture", "body", "furniture", "furniture"]


def _stored(number: int, provenance: dict, top: float = 0) -> tuple[Page, PageResult]:
    """Page ``number`` of a contract read alone, its lines ``top`` px lower, as stored
    with ``provenance``; a vision model's reading (no layout rules named) has its own
    Markdown."""
    clauses = [(PROSE_ZH * 2)[(number * 20 + row) * 7:][:30] for row in range(20)]
    lines = [Line(CONTRACT_HEADER, [100, 60 + top, 700, 90 + top], 0.99),
             *(Line(text, [100, 100 + top + 40 * row, 1000, 130 + top + 40 * row], 0.99)
               for row, text in enumerate(clauses))]
    read = read_lines(lines, page_height=1400)
    assert _header_place(read.markdown) == "body"  # the page alone shows no header
    return Page(document_id="d", index=number), PageResult(
        page_id=number, attempt=1, outcome="ok", text=read.text,
        markdown=read.markdown if READ_BY in provenance else "the model's own Markdown",
        lines=[line.to_dict() for line in read.lines], provenance=provenance)


def test_only_the_layout_rules_readings_are_read_again():
    """Pages the rules read take the header their repetition shows; a vision model's
    pages, whose words were placed on the classic engine's lines (blocks and roles
    too), keep the model's own Markdown."""
    ruled = [_stored(number, {READ_BY: RECIPE}) for number in range(3)]
    assert [_header_place(r.markdown) for _, r in read_together(ruled)] == ["furniture"] * 3
    placed = [_stored(number, {}) for number in range(3)]
    assert [r for _, r in read_together(placed)] == [r for _, r in placed]


def test_scans_cropped_apart_are_compared_on_the_page_as_rendered():
    """Preprocessing crops each scan to its content: the same header stands 50 px
    higher in one page's image than in another's, and at one place on the page."""
    def cropped(number: int, dy: float) -> tuple[Page, PageResult]:
        crop = {"name": "crop", "detail": {"transform": [1, 0, 0, 0, 1, -dy]}}
        return _stored(number, {READ_BY: RECIPE, "preprocess": [crop],
                                "image_size": [1100, 1400 - dy],
                                "rendered": {"size": [1100, 1400]}}, top=-dy)
    pages = [cropped(0, 0), cropped(1, 50), cropped(2, 30)]
    assert [_header_place(r.markdown) for _, r in read_together(pages)] == ["furniture"] * 3
