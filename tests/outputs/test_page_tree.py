"""A finished document as the tree hOCR, ALTO and text layers are written from: the
classic engine's words, mapped back through preprocessing onto the page as it was
submitted, and a reviewer's correction on the machine's positions."""

from __future__ import annotations

import time

import numpy as np
from PIL import Image, ImageDraw

from appliance.intake import SubmitOptions
from appliance.outputs.tree import page_trees
from appliance.pipeline.document import document_pages
from appliance.raster.synthetic import render_text_page, text_page_words
from appliance.store import queries, reviews
from tests.outputs.test_outputs_pdf import extracted_boxes, page_texts, text_lines
from tests.ui import test_ui_handlers
from tests.ui.test_ui_handlers import make_appliance, wait_final

running_appliance = test_ui_handlers.running_appliance  # the fixture, shared

LINES = ["Invoice number 4711 for office chairs", "Delivered to the main office",
         "Total amount 118.50 EUR due in thirty days", "Signed by the purchasing board"]


def iou(a, b) -> float:
    width = min(a[2], b[2]) - max(a[0], b[0])
    height = min(a[3], b[3]) - max(a[1], b[1])
    if width <= 0 or height <= 0:
        return 0.0
    inter = width * height
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def submitted_askew(image: Image.Image, fill) -> Image.Image:
    """The page as a careless scan gives it: 2.5° askew, and on its side."""
    return (image.rotate(2.5, Image.Resampling.NEAREST, expand=True, fillcolor=fill)
            .rotate(90, expand=True))


def ink_boxes(words, size) -> list[tuple[str, tuple]]:
    """Each word's box on the page as submitted: its box on the upright page painted
    in its own number on a label image that is turned like the page."""
    labels = Image.new("I", size, 0)
    draw = ImageDraw.Draw(labels)
    for number, (_, box) in enumerate(words, start=1):
        draw.rectangle(box, fill=number)
    turned = np.asarray(submitted_askew(labels, 0))
    truth = []
    for number, (text, _) in enumerate(words, start=1):
        ys, xs = np.nonzero(turned == number)
        truth.append((text, (xs.min(), ys.min(), xs.max() + 1, ys.max() + 1)))
    return truth


def missed(found: list[tuple[str, tuple | None]], truth) -> list:
    """The true words not found, in reading order, with IoU >= 0.5 (a word may recur)."""
    boxes: dict[str, list] = {}
    for text, box in found:
        if box is not None:
            boxes.setdefault(text, []).append(box)
    return [(text, box) for text, box in truth
            if not boxes.get(text) or iou(boxes[text].pop(0), box) < 0.5]


def test_words_land_where_they_stand_on_a_page_submitted_turned_and_askew(running_appliance,
                                                                         tmp_path):
    """Preprocessing turns the page a quarter and straightens it; in the page's tree
    and in its PDF text layer, each word stands where its ink is on the page as
    submitted."""
    upright = render_text_page(LINES, font_size=36)
    truth = ink_boxes(text_page_words(LINES, 36), upright.size)
    path = tmp_path / "turned.tif"  # a TIFF's resolution is a fraction: stored as a number
    page_image = submitted_askew(upright, "white")
    page_image.save(path, dpi=(150, 150))
    doc = running_appliance.submit_path(path, SubmitOptions(source="api"))
    wait_final(running_appliance, [doc.id])

    [page] = page_trees(running_appliance.db, document_pages(running_appliance.db, doc.id))
    assert (page.width, page.height, page.dpi) == (*page_image.size, 150)
    assert page.text_angle == 90  # the text runs up the page
    words = [word for block in page.blocks for line in block.lines for word in line.words]
    assert len(missed([(w.text, page.on_page(w.box)) for w in words], truth)) <= 0.05 * len(truth)
    assert all(0 < word.score <= 1 for word in words)

    data = running_appliance.exporter.pdf(doc.id)
    assert text_lines(page_texts(data)[0]) == [line.text for b in page.blocks for line in b.lines]
    lost = missed(extracted_boxes(data, 0, page), truth)
    assert len(lost) <= 0.05 * len(truth), lost


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
        [before] = page_trees(appliance.db, document_pages(appliance.db, doc.id))
        corrected = (machine.text.replace("4711", "4712")
                     .replace("Signed by", "Approved and signed by"))
        reviews.correct(appliance.db, page_id, "anna", corrected, corrected)
        [after] = page_trees(appliance.db, document_pages(appliance.db, doc.id))
    finally:
        appliance.stop()
    old, new = boxes(before), boxes(after)
    assert "4712" in corrected and new["4712"] == old["4711"]
    assert new["Invoice"] == old["Invoice"] and new["board"] == old["board"]
    # added words stand where the word they come before starts, on its line
    assert new["Approved"][0] == new["and"][0] == old["Signed"][0]
    assert new["Approved"][1] == old["Signed"][1]
    assert {w.score for b in after.blocks for line in b.lines for w in line.words} == {1.0}


def boxes(tree) -> dict:
    return {w.text: w.box for b in tree.blocks for line in b.lines for w in line.words}


def test_output_formats_choose_the_files_written(tmp_path):
    appliance = make_appliance(tmp_path, output={"upload_formats": ["md", "alto"]})
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
