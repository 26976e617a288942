"""Taking a document out of the store: one routine for a person's delete and for a
watched file's forgotten reading, leaving no row, spool file or cache entry behind,
and never the spool copy of content that something else holds."""

from __future__ import annotations

import io

import pytest
from sqlalchemy import text
from sqlmodel import select

from appliance.engines.cache import CACHE_PROVENANCE, ResultCache
from appliance.errors import DuplicateDocument
from appliance.intake import Intake, SubmitOptions
from appliance.intake.spool import Spool
from appliance.store import Database, contents, transitions
from appliance.store.models import (
    Document, FieldSet, IdempotencyKey, Page, PageResult, ReviewAction,
)
from tests.conftest import make_settings
from tests.fixtures.documents import write_pdf, write_png
from tests.fixtures.results import page_done


@pytest.fixture
def store(tmp_path):
    settings = make_settings(tmp_path)
    db = Database(settings.paths.data_dir / "appliance.db")
    spool = Spool(settings.paths.data_dir / "spool")
    cache = ResultCache(settings.paths.data_dir / "cache")
    yield Intake(settings, db, spool), db, spool, cache
    db.close()


def typed_document(intake, db, cache, tmp_path, name="receipt.png", key=None):
    """A receipt read to the end: its page's text in the search index, its fields read,
    its reading in the result cache, and an idempotency key naming it."""
    path = write_png(tmp_path / name, ["Total 12.50"])
    with path.open("rb") as fh:
        doc = intake.submit(fh, name, SubmitOptions(source="api", doc_type="receipt",
                                                    idempotency_key=key))
    cache_key = f"{doc.id}ab"
    cache.put(cache_key, page_done("Total 12.50").recognition)
    claim = transitions.claim_next_page(db, "w", lease_s=60)
    transitions.complete_page(db, claim, page_done("Total 12.50",
                                                   provenance={CACHE_PROVENANCE: cache_key}),
                              fields=FieldSet(document_id=doc.id, doc_type="receipt",
                                              fields=[{"name": "total", "value": "12.50"}]))
    return doc, cache_key


def rows_of(db, document_id: str) -> dict:
    with db.read() as session:
        page_ids = session.exec(select(Page.id).where(Page.document_id == document_id)).all()
        return {
            "document": len(session.exec(select(Document.id).where(
                Document.id == document_id)).all()),
            "pages": len(page_ids),
            "results": len(session.exec(select(PageResult.id).where(
                PageResult.page_id.in_(page_ids))).all()),
            "reviews": len(session.exec(select(ReviewAction.id).where(
                ReviewAction.document_id == document_id)).all()),
            "fields": len(session.exec(select(FieldSet.id).where(
                FieldSet.document_id == document_id)).all()),
            "keys": len(session.exec(select(IdempotencyKey.key).where(
                IdempotencyKey.document_id == document_id)).all()),
            "search": session.execute(text("SELECT count(*) FROM pagetext WHERE pagetext "
                                           "MATCH 'total'")).scalar(),
        }


def discard_with(spool, cache):
    def discard(removed):
        if not removed.content_held:
            spool.delete_content(removed.doc.sha256)
            cache.remove(removed.cache_keys)
    return discard


@pytest.mark.parametrize("remove", ["delete", "forget"])
def test_a_typed_document_is_removed_with_everything_that_hangs_on_it(store, tmp_path, remove):
    """A receipt has fields: forgetting one failed on the foreign key, for ever (the
    sweep retried it every 30 s and the new file was never read)."""
    intake, db, spool, cache = store
    doc, cache_key = typed_document(intake, db, cache, tmp_path, key=("", "k1"))
    assert rows_of(db, doc.id)["fields"] == 1 and rows_of(db, doc.id)["search"] == 1
    if remove == "delete":
        removed = contents.delete_document(db, doc.id, "tester", discard_with(spool, cache))
    else:
        removed = contents.forget_document(db, doc.id, "changed_after_read",
                                              discard_with(spool, cache))
    assert removed.cache_keys == [cache_key] and not removed.content_held
    assert rows_of(db, doc.id) == dict.fromkeys(rows_of(db, doc.id), 0)
    assert not spool.original_path(doc.sha256).exists()
    assert cache.get(cache_key) is None


def test_content_another_document_holds_keeps_its_copy_and_cache(store, tmp_path):
    intake, db, spool, cache = store
    first, cache_key = typed_document(intake, db, cache, tmp_path, "a.png")
    second, _ = typed_document(intake, db, cache, tmp_path, "b.png")
    assert first.sha256 == second.sha256
    removed = contents.delete_document(db, first.id, "tester", discard_with(spool, cache))
    assert removed.content_held
    assert spool.original_path(second.sha256).exists() and cache.get(cache_key) is not None


def test_a_delete_leaves_the_copy_a_submission_of_the_same_bytes_is_storing(store, tmp_path):
    """A delete racing an upload of identical content: the upload has stored the bytes
    (the spool keeps one copy per content) but not yet its row. Its hold, taken before
    the copy takes its place, keeps the delete from taking the copy from under it."""
    intake, db, spool, cache = store
    doc, _ = typed_document(intake, db, cache, tmp_path)
    data = spool.original_path(doc.sha256).read_bytes()
    with spool.staging(io.BytesIO(data), 10**7) as staged:  # the upload, half-way
        hold = contents.hold_content(db, staged.sha256)
        spool.place(staged)
    removed = contents.delete_document(db, doc.id, "tester", discard_with(spool, cache))
    assert removed.content_held and spool.original_path(doc.sha256).exists()
    contents.release_hold(db, hold)
    assert contents.discard_unheld_content(db, doc.sha256,
                                              lambda: spool.delete_content(doc.sha256))
    assert not spool.original_path(doc.sha256).exists()


def test_a_refused_duplicate_lets_go_of_its_hold(store, tmp_path):
    intake, db, spool, cache = store
    doc, _ = typed_document(intake, db, cache, tmp_path)
    data = spool.original_path(doc.sha256).read_bytes()
    with pytest.raises(DuplicateDocument):
        intake.submit(io.BytesIO(data), "again.png",
                      SubmitOptions(source="api", skip_duplicates=True))
    removed = contents.delete_document(db, doc.id, "tester", discard_with(spool, cache))
    assert not removed.content_held and not spool.original_path(doc.sha256).exists()


def test_an_encrypted_pdf_sent_again_with_its_password_is_a_duplicate(store, tmp_path):
    """It is kept decrypted, so its content is the decrypted PDF's: the duplicate check
    compared the encrypted bytes with it and never matched."""
    import pikepdf

    intake, db, spool, cache = store
    locked = tmp_path / "locked.pdf"
    with pikepdf.open(write_pdf(tmp_path / "plain.pdf", [["Invoice 4411"]])) as pdf:
        pdf.save(locked, encryption=pikepdf.Encryption(user="s3cret", owner="s3cret!"))
    options = SubmitOptions(source="api", pdf_password="s3cret", skip_duplicates=True)
    first = intake.submit(io.BytesIO(locked.read_bytes()), "locked.pdf", options)
    with pytest.raises(DuplicateDocument) as refused:
        intake.submit(io.BytesIO(locked.read_bytes()), "locked.pdf", options)
    assert refused.value.existing_id == first.id
    with db.read() as session:
        assert len(session.exec(select(Document)).all()) == 1


def test_a_page_image_rendered_on_demand_while_its_document_is_deleted_is_not_left_behind(
        store, tmp_path, monkeypatch):
    """The web UI opens a born-digital page (its image is made when asked) while a person
    deletes the document: the delete removes the original while the page renders, and
    the image written after it must not stay in the spool."""
    from appliance import raster

    intake, db, spool, _cache = store
    path = write_pdf(tmp_path / "letter.pdf", [["Dear reader"]])
    with path.open("rb") as fh:
        doc = intake.submit(fh, "letter.pdf", SubmitOptions(source="api"))
    original, dest = spool.original_path(doc.sha256), spool.page_image_path(doc.sha256, 0, 100)
    render = raster.render_page

    def render_during_a_delete(*args, **kwargs):
        image = render(*args, **kwargs)
        contents.delete_document(db, doc.id, "admin",
                                 lambda removed: spool.delete_content(removed.doc.sha256))
        return image

    monkeypatch.setattr(raster, "render_page", render_during_a_delete)
    assert raster.write_page_image(original, "pdf", 0, 100, 10**8, None, dest) is False
    assert not (spool.root / "pages" / doc.sha256).exists()
    assert not original.exists()
