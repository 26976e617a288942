"""Watched folders through a real daemon: real watchdog observers on temp folders,
dispositions of the originals, the keep-mode ledger and duplicate skipping."""

from __future__ import annotations

import re
import time

from tests.daemon import Daemon
from appliance.raster.synthetic import render_text_page
from tests.fixtures.documents import write_encrypted_pdf, write_pdf, write_png

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
        wait_for(lambda: not list(locked.iterdir()) and not list(other.iterdir()),
                 timeout_s=10, what="disposition: delete")  # runs just after the final page
    finally:
        daemon.stop()


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
