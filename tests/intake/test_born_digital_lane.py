"""Intake marks a PDF's born-digital pages (``raster.born_digital_pages``), which go ahead
of scans in the queue (``transitions.Priority``): text of their own and no scan under
it, as the worker's text-layer reader will read them."""

from __future__ import annotations

import random

import pytest
from sqlmodel import select

from appliance.intake import Intake, SubmitOptions
from appliance.intake.spool import Spool
from appliance.measure import born_digital
from appliance.store import Database, transitions
from appliance.store.models import Page
from tests.conftest import make_settings
from tests.fixtures.documents import write_png, write_report_pdf


@pytest.fixture
def intake(tmp_path):
    settings = make_settings(tmp_path)
    db = Database(settings.paths.data_dir / "appliance.db")
    yield Intake(settings, db, Spool(settings.paths.data_dir / "spool"))
    db.close()


def _marked(intake: Intake, path, **options) -> list[bool]:
    with path.open("rb") as fh:
        doc = intake.submit(fh, path.name, SubmitOptions(source="api", **options))
    with intake.db.read() as session:
        pages = session.exec(select(Page).where(Page.document_id == doc.id)
                             .order_by(Page.index)).all()
    return [page.born_digital for page in pages]


def _pdf(tmp_path, maker, name: str):
    path = tmp_path / f"{name}.pdf"
    path.write_bytes(maker(random.Random(name))[0])
    return path


def test_born_digital_pages_are_marked_and_scans_are_not(intake, tmp_path):
    assert _marked(intake, write_report_pdf(tmp_path / "report.pdf", pages=3)) == [True] * 3
    # a scan under a scanner's invisible OCR layer is read as an image
    assert _marked(intake, _pdf(tmp_path, born_digital.ocr_layer, "ocr-layer")) == [False]
    # a page of text with a small picture (a stamp) is still born digital
    assert _marked(intake, _pdf(tmp_path, born_digital.stamped, "stamped")) == [True]
    assert _marked(intake, write_png(tmp_path / "scan.png", ["A scanned page"])) == [False]


def test_a_document_read_by_ocr_alone_has_no_born_digital_page(intake, tmp_path):
    path = write_report_pdf(tmp_path / "report.pdf", pages=2)
    assert _marked(intake, path, text_layer="ignore") == [False, False]


def test_the_born_digital_report_is_claimed_before_the_scans_before_it(intake, tmp_path):
    scans = [write_png(tmp_path / f"scan{i}.png", [f"Scanned page {i}"]) for i in range(3)]
    for path in scans:
        _marked(intake, path)
    _marked(intake, write_report_pdf(tmp_path / "report.pdf", pages=2))
    claimed = [transitions.claim_next_page(intake.db, "w", 60) for _ in range(5)]
    assert [claim.kind for claim in claimed] == ["pdf", "pdf", "png", "png", "png"]
