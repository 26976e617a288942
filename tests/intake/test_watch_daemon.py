"""Watched folders through a real daemon: real watchdog observers on temp folders,
dispositions of the originals, the keep-mode ledger and duplicate skipping."""

from __future__ import annotations

import re
import time

from PIL import Image

from appliance.daemon import Appliance
from appliance.store import queries
from tests.conftest import make_settings
from tests.daemon import Daemon
from appliance.raster.synthetic import render_text_page
from tests.fixtures.documents import (write_encrypted_pdf, write_multipage_tiff, write_pdf,
                                      write_png)

LINES = ["Packing list 77", "Two pallets of paper"]


def wait_for(predicate, timeout_s: float = 120, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def documents(daemon: Daemon) -> list[dict]:
    return daemon.client.get("/api/v1/documents").json()["documents"]


def test_move_disposition_sorts_originals_into_processed_and_failed(tmp_path):
    inbox, done, failed = tmp_path / "inbox", tmp_path / "done", tmp_path / "failed"
    inbox.mkdir()
    daemon = Daemon(tmp_path, watch=[{"path": str(inbox), "mode": "events", "stability_s": 0.5,
                                      "failed_hold_s": 1, "processed_dir": str(done),
                                      "failed_dir": str(failed)}])
    daemon.start()
    try:
        daemon.wait_ready()
        write_png(inbox / "good.png", LINES)
        (inbox / "broken.pdf").write_bytes(b"%PDF-1.4\n this is not really a PDF")
        (inbox / ".DS_Store").write_bytes(b"junk")
        wait_for(lambda: (done / "good.png").exists() and (failed / "broken.pdf").exists(),
                 what="dispositions")
        report = (failed / "broken.pdf.error.txt").read_text()
        assert "broken.pdf" in report and "submit it again" in report
        assert re.search(r"^reason: (truncated_file|corrupt_file): ", report, re.M), report
        assert sorted(p.name for p in inbox.iterdir()) == [".DS_Store"]
        docs = {d["name"]: d for d in documents(daemon)}
        assert set(docs) == {"good.png", "broken.pdf"}
        assert docs["good.png"]["status"] == "done" and docs["good.png"]["lane"] == "batch"
        assert docs["good.png"]["tags"] == ["inbox"]
        assert (daemon.output_dir / "good.md").exists()
        for doc in docs.values():  # originals stay in the spool whatever happened
            assert (daemon.data_dir / "spool/originals" / doc["sha256"][:2] / doc["sha256"]).exists()
    finally:
        daemon.stop()


def test_keep_mode_reads_each_file_once_across_restarts_and_skips_duplicates(tmp_path):
    share = tmp_path / "share"
    share.mkdir()
    write_png(share / "a.png", LINES)
    (share / "copy-of-a.png").write_bytes((share / "a.png").read_bytes())
    watch = [{"path": str(share), "mode": "poll", "poll_interval_s": 0.5, "stability_s": 0.5,
              "disposition": "keep", "on_duplicate": "skip"}]
    first = Daemon(tmp_path, watch=watch)
    first.start()
    try:
        first.wait_ready()
        wait_for(lambda: any(d["status"] == "done" for d in documents(first)), what="a read")
        time.sleep(3)  # several polls and stability windows: nothing new may appear
        assert len(documents(first)) == 1  # the copy is a duplicate of finished content
    finally:
        first.stop()
    second = Daemon(tmp_path, watch=watch)
    second.start()
    try:
        second.wait_ready()
        time.sleep(3)  # the start-up scan sees both files again
        assert len(documents(second)) == 1
        assert sorted(p.name for p in share.iterdir()) == ["a.png", "copy-of-a.png"]
    finally:
        second.stop()


def test_500_files_dropped_at_once_each_end_once(tmp_path):
    inbox, done, failed = tmp_path / "inbox", tmp_path / "done", tmp_path / "failed"
    inbox.mkdir()
    daemon = Daemon(tmp_path, watch=[{"path": str(inbox), "mode": "events", "stability_s": 1,
                                      "processed_dir": str(done), "failed_dir": str(failed)}])
    daemon.start()
    try:
        daemon.wait_ready()
        for i in range(500):  # small, distinct pages: duplicates would be skipped
            render_text_page([f"Slip {i:03d}"], width=240, height=80, font_size=28,
                             margin=10).save(inbox / f"slip-{i:03d}.png")
        wait_for(lambda: sum(len(list(d.glob("*.png"))) for d in (done, failed) if d.exists())
                 >= 500,
                 timeout_s=600, what="500 dispositions")
        time.sleep(2)  # a late duplicate would show up now
        docs = daemon.client.get("/api/v1/documents", params={"limit": 500}).json()["documents"]
        assert len(docs) == 500 and len({d["name"] for d in docs}) == 500
        assert all(d["status"] in ("done", "partial", "failed") for d in docs)
        assert sorted(p.name for p in done.iterdir()) == [f"slip-{i:03d}.png" for i in range(500)]
        assert list(inbox.iterdir()) == []
        assert len(list(daemon.output_dir.glob("*.md"))) == 500
    finally:
        daemon.stop()


def test_a_folder_password_opens_encrypted_pdfs(tmp_path):
    locked, other, done, failed = (tmp_path / n for n in ("locked", "other", "done", "failed"))
    for folder in (locked, other):
        folder.mkdir()
    # the two files have the same bytes: "reprocess", or the second is a duplicate
    common = {"mode": "events", "stability_s": 0.5, "disposition": "delete",
              "on_duplicate": "reprocess"}
    daemon = Daemon(tmp_path, watch=[{"path": str(locked), "password": "secret", **common},
                                     {"path": str(other), **common}])
    daemon.start()
    try:
        daemon.wait_ready()
        write_encrypted_pdf(locked / "payslip.pdf", user_password="secret")
        write_encrypted_pdf(other / "payslip-elsewhere.pdf", user_password="secret")
        wait_for(lambda: len([d for d in documents(daemon)
                              if d["status"] in ("done", "failed")]) == 2, what="both final")
        docs = {d["name"]: d for d in documents(daemon)}
        assert docs["payslip.pdf"]["status"] == "done"
        assert docs["payslip-elsewhere.pdf"]["error"]["code"] == "encrypted_pdf"
        wait_for(lambda: not list(locked.iterdir()), timeout_s=10,
                 what="disposition: delete")  # runs just after the final page
        # the refused one is never deleted: it stays, with its reason beside it
        assert sorted(p.name for p in other.iterdir()) == ["payslip-elsewhere.pdf",
                                                           "payslip-elsewhere.pdf.error.txt"]
    finally:
        daemon.stop()


def test_a_file_refused_after_it_was_stored_is_never_deleted_nor_purged(tmp_path):
    """A delete folder: an encrypted PDF without its password is stored, then refused.
    Its file stays where it was, with its reason, and is not read again; a retention
    tick that takes every finished original leaves its spool copy, the only other one."""
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    appliance = Appliance(make_settings(
        tmp_path, watch=[{"path": str(inbox), "mode": "events", "stability_s": 0.5,
                          "disposition": "delete"}],
        retention={"hot_days": 0}))
    appliance.start()
    try:
        write_encrypted_pdf(inbox / "payslip.pdf")
        wait_for(lambda: queries.watched_document(appliance.db, str(inbox / "payslip.pdf"))
                 is None and len(queries.list_documents(appliance.db)) == 1,
                 what="the refusal's disposition")
        [view] = queries.list_documents(appliance.db)
        doc = view.doc
        assert doc.error_code == "encrypted_pdf"
        assert (inbox / "payslip.pdf").exists()
        assert "encrypted_pdf" in (inbox / "payslip.pdf.error.txt").read_text()
        assert appliance.purge()["contents"] == 0
        assert appliance.spool.original_path(doc.sha256).exists()
        time.sleep(1.5)  # a second document from the same file would show up now
        assert len(queries.list_documents(appliance.db)) == 1
    finally:
        appliance.stop()


def write_tiff_with_a_corrupt_second_frame(path) -> None:
    write_multipage_tiff(path, [LINES, LINES[::-1]])
    with Image.open(path) as image:
        image.seek(1)
        start = image.tag_v2[273][0]  # the second frame's first strip
    data = bytearray(path.read_bytes())
    data[start + 2:start + 66] = b"\x55" * 64  # scrambled, every byte still there
    path.write_bytes(bytes(data))


def test_a_reviewers_correction_stays_when_its_watched_file_is_replaced(tmp_path):
    """Page 1 read and corrected by a reviewer, page 2 corrupt: the document waits out
    failed_hold_s before its disposal, and its file is overwritten meanwhile. The
    document, its correction and its readings stay; the new file is a new document."""
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    appliance = Appliance(make_settings(
        tmp_path, watch=[{"path": str(inbox), "mode": "events", "stability_s": 0.5,
                          "failed_hold_s": 60, "processed_dir": str(tmp_path / "done"),
                          "failed_dir": str(tmp_path / "failed")}],
        review={"enabled": True, "review_below": 1.0, "accept_from": 1.0}))
    appliance.start()
    try:
        write_tiff_with_a_corrupt_second_frame(inbox / "contract.tif")
        wait_for(lambda: view(appliance) and [p.status for p in view(appliance).pages]
                 == ["review", "failed"], what="page 1 in review, page 2 failed")
        first = appliance.review.next_page("alice").item  # as the console opens it
        appliance.review.correct("alice", first.page_id, "# Contract 77\n\nCorrected by Alice")
        original = view(appliance).doc
        wait_for(lambda: view(appliance).is_final, what="the document final")
        write_png(inbox / "contract.tif", ["A new scan under the same name"])
        wait_for(lambda: len(queries.list_documents(appliance.db)) == 2,
                 what="the new file read as a new document")
        kept = queries.get_document(appliance.db, original.id)
        assert kept is not None and kept.pages[0].status == "done"
        [(_page, result)] = [pair for pair in queries.accepted_results(appliance.db, original.id)
                             if pair[1] is not None]
        assert "Corrected by Alice" in result.markdown
        assert "forgotten" not in {e.kind for e in queries.document_events(appliance.db,
                                                                       original.id)}
    finally:
        appliance.stop()


def view(appliance):
    """The one document, or None before it is stored."""
    docs = queries.list_documents(appliance.db)
    return queries.get_document(appliance.db, docs[0].doc.id) if docs else None


def test_a_writer_that_pauses_longer_than_the_window_gets_its_file_read_whole(tmp_path):
    """A network copy pauses for 6 stability windows half-way. What was read meanwhile
    (a truncated PDF; a PNG whose pixels end early) must not count: nothing is moved
    while the writer is away, and once it finishes the whole file is read, once."""
    inbox, done, failed = tmp_path / "inbox", tmp_path / "done", tmp_path / "failed"
    inbox.mkdir()
    daemon = Daemon(tmp_path, watch=[{"path": str(inbox), "mode": "events", "stability_s": 0.5,
                                      "failed_hold_s": 8, "processed_dir": str(done),
                                      "failed_dir": str(failed)}])
    sources = {"scan.pdf": write_pdf(tmp_path / "scan.pdf", [LINES, LINES[::-1]]).read_bytes(),
               "photo.png": write_png(tmp_path / "photo.png", LINES * 6).read_bytes()}
    daemon.start()
    try:
        daemon.wait_ready()
        writers = {name: (inbox / name).open("wb") for name in sources}
        for name, out in writers.items():
            out.write(sources[name][:len(sources[name]) // 2])
            out.flush()
        time.sleep(3)  # the half files are read (and fail) while the writers are away
        assert sorted(p.name for p in inbox.iterdir()) == sorted(sources)  # nothing moved
        assert not failed.exists() or not list(failed.iterdir())
        for name, out in writers.items():
            out.write(sources[name][len(sources[name]) // 2:])
            out.close()
        wait_for(lambda: all((done / name).exists() for name in sources), what="dispositions")
        time.sleep(2)  # a late second document would show up now
        docs = documents(daemon)
        assert sorted(d["name"] for d in docs) == sorted(sources)
        assert all(d["status"] == "done" for d in docs), docs
        assert {d["name"]: d["page_count"] for d in docs} == {"scan.pdf": 2, "photo.png": 1}
        assert not failed.exists() or not list(failed.iterdir())
        for name, data in sources.items():
            assert (done / name).read_bytes() == data
        assert "changed after it was read" in daemon.log_path.read_text()
    finally:
        daemon.stop()


def test_a_file_that_stays_truncated_fails_after_the_hold(tmp_path):
    inbox, failed = tmp_path / "inbox", tmp_path / "failed"
    inbox.mkdir()
    daemon = Daemon(tmp_path, watch=[{"path": str(inbox), "mode": "events", "stability_s": 0.5,
                                      "failed_hold_s": 2, "processed_dir": str(tmp_path / "done"),
                                      "failed_dir": str(failed)}])
    data = write_pdf(tmp_path / "cut.pdf", [LINES]).read_bytes()
    daemon.start()
    try:
        daemon.wait_ready()
        (inbox / "cut.pdf").write_bytes(data[:len(data) // 2])
        started = time.monotonic()
        wait_for(lambda: (failed / "cut.pdf").exists(), what="the failed disposition")
        assert time.monotonic() - started >= 2  # it was held first
        assert "truncated_file" in (failed / "cut.pdf.error.txt").read_text()
        [doc] = documents(daemon)
        assert doc["status"] == "failed" and doc["error"]["code"] == "truncated_file"
    finally:
        daemon.stop()
