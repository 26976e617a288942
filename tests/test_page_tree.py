"""A finished document as the tree hOCR, ALTO and text layers are written from: the
classic engine's words, mapped back through preprocessing onto the page as it was
submitted, and a reviewer's correction on the machine's positions."""

from __future__ import annotations

import time

from appliance.intake import SubmitOptions
from appliance.outputs.tree import page_trees
from appliance.raster.synthetic import render_text_page, text_page_words
from appliance.store import queries, reviews
from tests.test_ui_handlers import make_appliance, running_appliance, wait_final  # noqa: F401

LINES = ["Invoice number 4711 for office chairs", "Delivered to the main office",
         "Total amount 118.50 EUR due in thirty days", "Signed by the purchasing board"]


def iou(a, b) -> float:
    width = min(a[2], b[2]) - max(a[0], b[0])
    height = min(a[3], b[3]) - max(a[1], b[1])
    if width <= 0 or height <= 0:
        return 0.0
    inter = width * height
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def turned(box, width):
    """A box on an upright page of this width, on the page turned 90° counter-clockwise."""
    x0, y0, x1, y1 = box
    return (y0, width - x1, y1, width - x0)


def test_words_land_where_they_stand_on_the_page_as_submitted(running_appliance, tmp_path):
    upright = render_text_page(LINES, font_size=36)
    truth = [(text, turned(box, upright.width)) for text, box in text_page_words(LINES, 36)]
    path = tmp_path / "turned.tif"  # a TIFF's resolution is a fraction: stored as a number
    upright.rotate(90, expand=True).save(path, dpi=(150, 150))
    doc = running_appliance.submit_path(path, SubmitOptions(source="api"))
    wait_final(running_appliance, [doc.id])

    [page] = page_trees(running_appliance.db, doc.id)
    assert (page.width, page.height, page.dpi) == (upright.height, upright.width, 150)
    words = [word for block in page.blocks for line in block.lines for word in line.words]
    found: dict[str, list] = {}  # a word's boxes in reading order (a word may recur)
    for word in words:
        found.setdefault(word.text, []).append(word.box)
    missed = [(text, box) for text, box in truth
              if not found.get(text) or iou(found[text].pop(0), box) < 0.5]
    assert len(missed) <= 0.05 * len(truth), missed
    assert all(0 < word.confidence <= 1 for word in words)


def test_a_correction_keeps_the_positions_of_the_words_it_kept(tmp_path):
    appliance = make_appliance(tmp_path, review={"enabled": True, "review_below": 1.0,
                                                 "accept_from": 1.0, "second_opinion": False})
    appliance.start()
    try:
        path = tmp_path / "page.png"
        render_text_page(LINES, font_size=36).save(path)
        doc = appliance.submit_path(path, SubmitOptions(source="api"))
        deadline = time.monotonic() + 120
        while (page_id := reviews.claim_review(appliance.db, "anna", 60)) is None:
            assert time.monotonic() < deadline, "the page never reached review"
            time.sleep(0.2)
        [(_, machine)] = queries.accepted_results(appliance.db, doc.id)
        [before] = page_trees(appliance.db, doc.id)
        corrected = (machine.text.replace("4711", "4712")
                     .replace("Signed by", "Approved and signed by"))
        reviews.correct(appliance.db, page_id, "anna", corrected, corrected)
        [after] = page_trees(appliance.db, doc.id)
    finally:
        appliance.stop()
    old, new = boxes(before), boxes(after)
    assert "4712" in corrected and new["4712"] == old["4711"]
    assert new["Invoice"] == old["Invoice"] and new["board"] == old["board"]
    # added words stand where the word they come before starts, on its line
    assert new["Approved"][0] == new["and"][0] == old["Signed"][0]
    assert new["Approved"][1] == old["Signed"][1]
    assert {w.confidence for b in after.blocks for line in b.lines for w in line.words} == {1.0}


def boxes(tree) -> dict:
    return {w.text: w.box for b in tree.blocks for line in b.lines for w in line.words}


def test_output_formats_choose_the_files_written(tmp_path):
    appliance = make_appliance(tmp_path, output={"formats": ["md", "alto"]})
    appliance.start()
    try:
        path = tmp_path / "scan.png"
        render_text_page(LINES, font_size=36).save(path)
        doc = appliance.submit_path(path, SubmitOptions(source="api"))
        wait_final(appliance, [doc.id])
        deadline = time.monotonic() + 30
        while not queries.get_document(appliance.db, doc.id).doc.exported_at:
            assert time.monotonic() < deadline, "never exported"
            time.sleep(0.2)
    finally:
        appliance.stop()
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert written == ["scan.alto.xml", "scan.md"]
    assert 'CONTENT="4711"' in (tmp_path / "out" / "scan.alto.xml").read_text()
