"""Export file names fit the file system's limit, which counts bytes, and an export
that can never be written ends `output_failed` instead of failing every 30 s."""

from __future__ import annotations

import os

import pytest

from appliance.daemon import Appliance
from appliance.export import NAME_MAX_BYTES, Exporter, document_json, fit_name, safe_stem
from appliance.intake.spool import Spool
from appliance.store import Database, queries, transitions
from appliance.store.models import Document
from tests.conftest import make_settings
from tests.fixtures.results import page_done

CJK_NAME = "增值税电子普通发票" * 12 + ".pdf"  # 108 characters, 324 bytes in UTF-8


@pytest.fixture
def store(tmp_path):
    settings = make_settings(tmp_path, output={"upload_formats": ["md", "json", "txt", "hocr",
                                                                  "alto"]})
    db = Database(settings.paths.data_dir / "appliance.db")
    yield settings, db
    db.close()


def read_document(db, name: str) -> Document:
    doc = Document(name=name, sha256=os.urandom(32).hex(), kind="png", size_bytes=10,
                   source="api")
    transitions.submit_document(db, doc, 1)
    claim = transitions.claim_next_page(db, "w1", lease_s=60)
    transitions.complete_page(db, claim, page_done("发票号码 12345678"))
    return doc


def test_a_long_cjk_name_is_cut_in_bytes_at_a_character(store):
    """About 77 CJK characters filled NAME_MAX with `.alto.xml` and the temporary
    file's suffix: the export failed every 30 s for ever."""
    settings, db = store
    exporter = Exporter(db, Spool(settings.paths.spool), lambda: settings)
    first, second = read_document(db, CJK_NAME), read_document(db, CJK_NAME)
    for doc in (first, second):  # the second gets the first's name and its id
        exporter.export(doc.id)
    names = sorted(p.name for p in settings.paths.output_dir.iterdir())
    assert len(names) == 10
    for name in names:
        assert len(os.fsencode(name)) <= NAME_MAX_BYTES
        assert name.startswith("增值税电子普通发票")
    stem = safe_stem(CJK_NAME)
    assert stem in {n.removesuffix(".alto.xml") for n in names}
    assert stem.encode().decode() == stem  # never half a character


def test_fit_name_keeps_names_that_fit_and_counts_the_tail():
    assert fit_name("invoice", ".md") == "invoice"
    cut = fit_name("é" * 200, ".alto.xml")
    assert len(os.fsencode(cut + ".alto.xml")) + len(".") + len(".XXXXXXXX.tmp") \
        <= NAME_MAX_BYTES
    assert set(cut) == {"é"}


def test_an_export_that_can_never_be_written_ends_output_failed(tmp_path):
    """A name the file system refuses for good (here folders where the .md would go,
    under its own name and under the name with its id): the document is final
    without its files, says why, and the sweep leaves it."""
    appliance = Appliance(make_settings(tmp_path, output={"upload_formats": ["md", "txt"]}))
    try:
        doc = read_document(appliance.db, "report.png")
        for stem in ("report", f"report-{doc.id[:8]}"):
            (appliance.settings.paths.output_dir / f"{stem}.md").mkdir()
        appliance.finish_steps(doc.id, False)
        view = queries.get_document(appliance.db, doc.id)
        assert view.doc.exported_at is None and "cannot be written" in view.doc.output_error
        assert doc.id not in queries.final_unexported_documents(appliance.db)
        assert document_json(view)["output_error"]["code"] == "output_failed"
    finally:
        appliance.db.close()
