"""A stateful property test of the daemon core (issue 34): Hypothesis drives random
sequences of what happens to an appliance in the field against a real ``Appliance``
(appliance.daemon) with real files, a real SQLite file, real watchdog observers and
the classic engine's worker reading tiny pages, and checks after every step (cheaply)
and after each settle and at the end (thoroughly) that:

1. a watched source file is moved or deleted only after its document is stored
   durably (row committed, original in the spool), and never when it was refused
   (too large: it stays, in place or in the failed folder, with an .error.txt);
2. every document ends final and exported once, or visibly waits for a person,
   within bounded time (``SETTLE_TIMEOUT_S``);
3. no row, spool file, cache entry, search row or export survives its document, and
   no document shows another's content;
4. each export, disposition and webhook happens exactly once per final state;
5. nothing a person entered (a review action, corrected fields) is lost while its
   document exists; a watched file goes only once a document that read it is final
   and exported, and a refused file (refused before or after it was stored) never.

The steps: drop a file into a watched folder (a small pool of tiny pages, so
duplicates happen, a corrupt file, one over ``limits.max_bytes``, a two-page TIFF whose
second page is corrupt and an encrypted PDF without its password, refused after it is
stored), replace a watched file before it is disposed of, a writer that pauses longer
than the stability window, an upload (optionally with a webhook and an
Idempotency-Key), a retry with the same key, review approve / correct / reject / rerun
through ``ReviewService`` (what the console calls), a correction of a document's
fields, a retry of a document's failed pages, delete, a retention tick (which may
purge what a rerun or retry would read), a Document Intelligence analysis recorded for
a deleted document, kill and restart, and a wait until quiet.

"Kill" is in-process: the engine worker gets SIGKILL and the ``Appliance`` is stopped
without a drain (pages left running are queued again at the next start), then a new
``Appliance`` starts on the same data directory. It does not cut a transaction or an
export half-way, as a kill -9 of a subprocess daemon could; tests/service/test_crash.py
does that for uploads.

CI runs a fixed seed and a bounded number of examples (about a minute on two cores);
``--hypothesis-profile=soak`` (tests/conftest.py) runs many more, randomly seeded.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import signal
import tempfile
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from sqlalchemy import text
from sqlmodel import select

from PIL import Image

from appliance.daemon import Appliance
from appliance.errors import (
    ApplianceError, DocumentBusy, NotFound, OriginalPurged, TooLarge,
)
from appliance.intake import SubmitOptions
from appliance.raster.synthetic import render_text_page
from appliance.store import queries, transitions
from appliance.store.models import (
    Document, Event, FieldSet, IdempotencyKey, Lane, Outcome, Page, PageResult, PageStatus,
    ReviewAction,
)
from appliance.users import Users
from tests.conftest import make_settings
from tests.fixtures.documents import write_encrypted_pdf, write_multipage_tiff

# a passing run takes about a minute; a failing one also shrinks what it found (up to
# Hypothesis's five minutes), so the suite's 300 s would cut it off before its report
pytestmark = pytest.mark.timeout(1200)

STABILITY_S = 0.3
FAILED_HOLD_S = 2.0
PAUSE_S = 1.0  # a paused writer: past the stability window, within the failed hold
MAX_BYTES = 32_000
QUIET_S = 0.6  # nothing changed for this long (and nothing is owed): quiet
# bounded time for everything owed: a tiny page reads in 0.1 s, a failed read waits
# FAILED_HOLD_S; the soak run allows more, for a loaded machine
SETTLE_TIMEOUT_S = 60.0 if settings.get_current_profile_name() == "soak" else 15.0
READY_TIMEOUT_S = 60.0
REVIEWER = "anna"
FOLDERS = ("inbox", "drop")  # inbox: move, skip duplicates; drop: delete, invoices (review)

LABELS = ("Alpha 11", "Bravo 22", "Delta 44")  # the tiny pages; their text tells them apart
CORRUPT = len(LABELS)
LARGE = CORRUPT + 1
PARTLY = LARGE + 1  # a two-page TIFF: page 1 reads, page 2 is corrupt
LOCKED = PARTLY + 1  # an encrypted PDF without its password: refused once stored
CONTENT_IDS = tuple(range(LOCKED + 1))
REFUSED = (LARGE, LOCKED)  # refused before storing, and after
# upload names: a plain one, and a CJK one whose export name is long in bytes
NAMES = ("scan.png", "請求書" * 30 + ".png")

_CONTENTS: list[bytes] = []


def contents() -> list[bytes]:
    """The pool of file contents, rendered once: the tiny pages, a corrupt PDF, and a
    file over limits.max_bytes."""
    if not _CONTENTS:
        for label in LABELS:
            buffer = io.BytesIO()
            render_text_page([label], width=240, height=80, font_size=28, margin=10).save(
                buffer, format="PNG")
            _CONTENTS.append(buffer.getvalue())
        _CONTENTS.append(b"%PDF-1.4\n this is not really a PDF\n")
        _CONTENTS.append(b"\x89PNG\r\n\x1a\n" + hashlib.sha256(b"large").digest() * 1500)
        with tempfile.TemporaryDirectory() as tmp:
            tiff = Path(tmp) / "partly.tif"
            write_multipage_tiff(tiff, [[LABELS[0]], [LABELS[1]]])
            with Image.open(tiff) as image:
                image.seek(1)
                start = image.tag_v2[273][0]  # the second page's first strip
            data = bytearray(tiff.read_bytes())
            data[start + 2:start + 66] = b"\x55" * 64
            _CONTENTS.append(bytes(data))
            _CONTENTS.append(write_encrypted_pdf(Path(tmp) / "locked.pdf").read_bytes())
        assert len(_CONTENTS[LARGE]) > MAX_BYTES > max(len(c) for i, c in enumerate(_CONTENTS)
                                                       if i != LARGE)
    return _CONTENTS


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def suffix(content: int) -> str:
    return {CORRUPT: ".pdf", LOCKED: ".pdf", PARTLY: ".tif"}.get(content, ".png")


def squash(value: str | None) -> str:
    return re.sub(r"\s+", "", value or "").lower()


class Violation(AssertionError):
    """An invariant that does not hold; each invariant raises a class of its own, so
    that Hypothesis shrinks and reports each failing one separately."""


_VIOLATIONS: dict[str, type[Violation]] = {}


def violation(invariant_name: str) -> type[Violation]:
    """The class of ``invariant_name``'s violations, e.g. Violation_4_exported_once."""
    if invariant_name not in _VIOLATIONS:
        name = "Violation_" + re.sub(r"\W+", "_", invariant_name).strip("_")
        _VIOLATIONS[invariant_name] = type(name, (Violation,), {"__module__": __name__})
    return _VIOLATIONS[invariant_name]


def check(condition: bool, invariant_name: str, message: str) -> None:
    if not condition:
        raise violation(invariant_name)(f"[{invariant_name}] {message}")


class WebhookReceiver:
    """A loopback HTTP server that records each POST's document id and status."""

    def __init__(self):
        received = self.received = []
        lock = self.lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with lock:
                    received.append((body["document"]["id"], body["document"]["status"]))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def counts(self) -> Counter:
        with self.lock:
            return Counter(doc_id for doc_id, _status in self.received)

    def total(self) -> int:
        with self.lock:
            return len(self.received)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class ApplianceMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="invariants-"))
        self.hooks = WebhookReceiver()
        self.dirs = {name: self.tmp / name for name in FOLDERS}
        for folder in self.dirs.values():
            folder.mkdir()
        self.processed, self.failed = self.tmp / "processed", self.tmp / "failed"
        common = {"mode": "events", "stability_s": STABILITY_S, "failed_hold_s": FAILED_HOLD_S,
                  "rescan_interval_s": 2}
        self.settings = make_settings(
            self.tmp,
            workers={"count": 1},
            # invoices always go to review; everything else is accepted as read, so the
            # routing does not depend on how sure the engine was of a tiny page
            review={"enabled": True, "always_review": ["invoice"], "review_below": 0.0,
                    "accept_from": 0.0, "sample_rate": 0.0, "second_opinion": False},
            limits={"max_bytes": MAX_BYTES},
            # hot_days = 0: a retention tick may purge every finished document
            retention={"hot_days": 0, "min_free_disk_mb": 0},
            webhooks={"allow_hosts": ["127.0.0.1"]},
            # the API's documents are written too, so that every export can be checked
            output={"formats": ["md", "json", "txt"], "upload_formats": ["md"]},
            watch=[{"path": str(self.dirs["inbox"]), "name": "inbox", "disposition": "move",
                    "processed_dir": str(self.processed), "failed_dir": str(self.failed),
                    "on_duplicate": "skip", **common},
                   {"path": str(self.dirs["drop"]), "name": "drop", "disposition": "delete",
                    "doc_type": "invoice", "on_duplicate": "reprocess", **common}])
        Users(self.settings.review.users_file).add(REVIEWER, "reviewer", "correct horse 1")
        self.app: Appliance | None = None
        self.written: list[Path] = []  # watched files we wrote, in order
        self.current: dict[Path, int] = {}  # -> the content we wrote last
        self.files: dict[Path, int] = {}  # those not yet seen gone -> their content
        self.refused: dict[Path, int] = {}  # refused files dropped, by where they were
        # what a person entered, by document: ("review", ReviewAction.id) and
        # ("fields", FieldSet.id) rows seen, which must stay while the document does
        self.entered: dict[str, set[tuple[str, int]]] = {}
        self.rewritten_at: dict[Path, float] = {}
        self.file_number = 0
        self.keys: dict[str, tuple[str, int, str, str, bool]] = {}  # key -> (doc, upload)
        self.deleted: dict[str, tuple[str | None, str]] = {}  # doc id -> (source path, sha)
        self.deleted_at: dict[str, float] = {}
        self.ever_stored: set[str] = set()  # contents some committed document held
        self.app = self._start()

    # ---- the appliance

    def _start(self) -> Appliance:
        app = Appliance(self.settings)
        app.start()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not app.ready:
            if time.monotonic() > deadline:
                app.stop()
                raise AssertionError(f"the worker did not warm up: "
                                     f"{app.dispatcher.last_start_error}")
            time.sleep(0.05)
        for watcher in app.watch.watchers:
            assert watcher.wait_ready(READY_TIMEOUT_S), "a watched folder did not start"
        return app

    def teardown(self):
        try:
            if self.app is not None:
                self.settle()
        finally:
            if self.app is not None:
                self.app.stop()
            self.hooks.close()
            shutil.rmtree(self.tmp, ignore_errors=True)

    # ---- steps

    def _new_path(self, folder: str, content: int) -> Path:
        self.file_number += 1
        return self.dirs[folder] / f"f{self.file_number:03d}{suffix(content)}"

    @rule(folder=st.sampled_from(FOLDERS), content=st.sampled_from(CONTENT_IDS))
    def drop_file(self, folder, content):
        path = self._new_path(folder, content)
        path.write_bytes(contents()[content])
        self._track(path, content)

    # (no precondition on which files are still there: Hypothesis needs the steps it can
    # draw to depend on earlier steps only, never on the appliance's timing)
    @precondition(lambda self: self.written)
    @rule(which=st.integers(0, 20), content=st.sampled_from(CONTENT_IDS[:CORRUPT]))
    def replace_file(self, which, content):
        """Another content over a watched file, if it is still there (not yet disposed of)."""
        path = self.written[which % len(self.written)]
        if not path.exists():
            return
        if self.current[path] == content:
            content = (content + 1) % CORRUPT
        path.write_bytes(contents()[content])
        self._track(path, content)

    @rule(folder=st.sampled_from(FOLDERS), content=st.sampled_from(CONTENT_IDS[:CORRUPT]))
    def paused_writer(self, folder, content):
        """Half a file, a pause past the stability window, then the rest."""
        data = contents()[content]
        path = self._new_path(folder, content)
        with path.open("wb") as out:
            out.write(data[:len(data) // 2])
            out.flush()
            time.sleep(PAUSE_S)
            check(path.exists(), "1 source kept until stored",
                  f"{path.name} was moved or deleted while its writer paused, half-written")
            out.write(data[len(data) // 2:])
        self._track(path, content)

    def _track(self, path: Path, content: int) -> None:
        if path not in self.current:
            self.written.append(path)
        self.current[path] = content
        self.files[path] = content
        self.rewritten_at[path] = time.time()
        if content in REFUSED:
            self.refused[path] = content
        else:
            self.refused.pop(path, None)

    @rule(content=st.sampled_from(CONTENT_IDS),
          name=st.sampled_from(NAMES), doc_type=st.sampled_from(("generic", "invoice")),
          webhook=st.booleans(), keyed=st.booleans())
    def upload(self, content, name, doc_type, webhook, keyed):
        key = f"key-{len(self.keys)}" if keyed else None
        try:
            doc = self._submit(content, name, doc_type, webhook, key)
        except TooLarge:
            check(content == LARGE, "refused only when over limits",
                  f"content {content} refused as too large")
            return
        check(content != LARGE, "refused only when over limits",
              f"a file over limits.max_bytes became document {doc.id}")
        if key:
            self.keys[key] = (doc.id, content, name, doc_type, webhook)

    def _submit(self, content, name, doc_type, webhook, key):
        options = SubmitOptions(source="api", lane=Lane.INTERACTIVE, doc_type=doc_type,
                                webhook_url=self.hooks.url if webhook else None,
                                idempotency_key=("", key) if key else None)
        return self.app.submit(io.BytesIO(contents()[content]), name, options)

    @precondition(lambda self: self.keys)
    @rule(which=st.integers(0, 20))
    def retry_with_same_key(self, which):
        key = sorted(self.keys)[which % len(self.keys)]
        first_id, content, name, doc_type, webhook = self.keys[key]
        doc = self._submit(content, name, doc_type, webhook, key)
        if first_id not in self.deleted:  # deleting a document forgets its keys
            check(doc.id == first_id, "one document per idempotency key",
                  f"a retry with {key} answered {doc.id}, the first request {first_id}")
        else:
            self.keys[key] = (doc.id, content, name, doc_type, webhook)

    @rule(action=st.sampled_from(("approve", "correct", "reject", "rerun")))
    def review(self, action):
        page = self.app.review.next_page(REVIEWER)
        if page is None:
            return
        page_id = page.item.page_id
        if action == "approve":
            self.app.review.approve(REVIEWER, page_id)
        elif action == "correct":
            self.app.review.correct(REVIEWER, page_id, f"{page.markdown}\n\ncorrected")
        elif action == "reject":
            self.app.review.reject(REVIEWER, page_id, "cannot read it")
        else:
            before = queries.get_document(self.app.db, page.item.document_id)
            try:
                self.app.review.rerun(REVIEWER, page_id, higher_resolution=True)
            except OriginalPurged:
                after = queries.get_document(self.app.db, page.item.document_id)
                check(before.doc.purged_at is not None, "5 nothing entered lost",
                      f"a rerun of page {page_id} was refused, its original not purged")
                check([(p.id, p.status, p.result_id) for p in after.pages]
                      == [(p.id, p.status, p.result_id) for p in before.pages],
                      "5 nothing entered lost",
                      f"a refused rerun of page {page_id} changed its document")
                self.app.review.approve(REVIEWER, page_id)  # as the reviewer then would
                return
            check(before.doc.purged_at is None, "5 nothing entered lost",
                  f"page {page_id} was queued again though retention purged its original")

    @rule(which=st.integers(0, 20))
    def correct_fields(self, which):
        invoices = [v.doc.id for v in self._views() if v.doc.doc_type == "invoice"]
        if not invoices:
            return
        try:
            self.app.correct_fields(invoices[which % len(invoices)], {"number": "INV-7"},
                                    "tester")
        except ApplianceError:  # not read yet, no fields, or deleted meanwhile
            pass

    @rule(which=st.integers(0, 20))
    def analysis_of_a_deleted_document(self, which):
        """The Document Intelligence route records its analysis just after submitting:
        a delete in between must answer NotFound, not break the store."""
        if not self.deleted:  # (whether a delete went through depends on timing)
            return
        doc_id = sorted(self.deleted)[which % len(self.deleted)]
        try:
            transitions.record_analysis(self.app.db, doc_id, "prebuilt-read", {})
        except NotFound:
            return
        check(False, "3 deleted stays deleted",
              f"an analysis was recorded for deleted document {doc_id}")

    @rule(which=st.integers(0, 20))
    def retry_failed_pages(self, which):
        docs = [v.doc.id for v in self._views() if v.page_counts[PageStatus.FAILED]]
        if docs:
            self.app.retry(docs[which % len(docs)], "tester")

    @rule(which=st.integers(0, 20))
    def delete(self, which):
        views = self._views()
        if not views:
            return
        doc = views[which % len(views)].doc
        try:
            self.app.delete(doc.id, "tester")
        except DocumentBusy:
            return
        self.deleted[doc.id] = (doc.source_path, doc.sha256)
        self.deleted_at[doc.id] = time.time()
        self.ever_stored.add(doc.sha256)

    @rule()
    def retention_tick(self):
        self.app.purge()

    @rule()
    def kill_and_restart(self):
        for worker in self.app.workers:
            if worker.process is not None and worker.process.pid:
                try:
                    os.kill(worker.process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.app.stop()  # no drain: pages left running are queued again at the start
        self.app = None
        self.app = self._start()

    @rule()
    def wait_until_quiet(self):
        self.settle()

    # ---- reading the store

    def _views(self) -> list:
        return queries.list_documents(self.app.db, limit=10_000)

    def _events(self, *kinds: str) -> list[Event]:
        with self.app.db.read() as session:
            return list(session.exec(select(Event).where(Event.kind.in_(kinds))
                                     .order_by(Event.id)).all())

    def _final_states(self) -> Counter:
        """How many times each document was handed back to be finished again (a retry
        that queued pages): its final states are this plus the current one."""
        return Counter(e.document_id for e in self._events("retried")
                       if (e.detail or {}).get("pages"))

    def _stored_shas(self) -> set[str]:
        with self.app.db.read() as session:
            shas = set(session.exec(select(Document.sha256)).all())
        self.ever_stored |= shas
        return shas

    # ---- cheap invariants, after every step

    @invariant()
    def cheap_invariants(self):
        if self.app is None:
            return
        views = {v.doc.id: v for v in self._views()}
        self._stored_shas()
        self.check_sources(views)
        self.check_refused_files()
        self.check_entered(views)
        self.check_forgotten(views)
        self.check_at_most_once(views)
        self.check_purged_finished(views)
        self.check_orphan_rows()
        self.check_not_reingested(views)

    def check_sources(self, views) -> None:
        """1: a watched file vanished only once a committed document held its content."""
        spool = self.app.spool
        for path, content in list(self.files.items()):
            if path.exists() or content in REFUSED:
                continue
            digest = sha(contents()[content])
            check(digest in self.ever_stored, "1 source kept until stored",
                  f"{path.parent.name}/{path.name} (content {content}) is gone, and no "
                  f"document ever held its content")
            # read now, after the file was seen gone: its export comes before its disposal
            readers = [v for v in self._views() if v.doc.source_path == str(path)]
            check(not readers or any(v.is_final and v.doc.exported_at for v in readers),
                  "5 source gone only once exported",
                  f"{path.parent.name}/{path.name} is gone before a document that read it "
                  f"was final and exported: {[(v.doc.id, v.status) for v in readers]}")
            holders = [v for v in views.values() if v.doc.sha256 == digest]
            check(not holders or any(v.doc.purged_at or spool.original_path(digest).exists()
                                     for v in holders), "1 source kept until stored",
                  f"{path.parent.name}/{path.name} is gone and its content is not in the spool")
            del self.files[path]

    def check_refused_files(self) -> None:
        """1, 5: a refused file (too large, before it was stored; encrypted without its
        password, after) is never deleted: it stays in place, or in the failed folder
        with its .error.txt."""
        for path, content in self.refused.items():
            data = contents()[content]
            if path.exists() and path.read_bytes() == data:
                continue
            moved = [p for p in self.failed.glob(f"{path.stem}*{path.suffix}")
                     if p.read_bytes() == data] if self.failed.exists() else []
            check(bool(moved), "1 refused file never deleted",
                  f"{path.parent.name}/{path.name}, refused (content {content}), was "
                  f"deleted (disposition of folder '{path.parent.name}')")
            check(all(p.with_name(p.name + ".error.txt").exists() for p in moved),
                  "1 refused file never deleted",
                  f"{path.name} was moved to the failed folder without its .error.txt")

    def check_entered(self, views) -> None:
        """5: what a person entered stays while its document exists."""
        with self.app.db.read() as session:
            rows = [("review", row.id, row.document_id)
                    for row in session.exec(select(ReviewAction)).all()]
            rows += [("fields", row.id, row.document_id) for row in session.exec(
                select(FieldSet).where(FieldSet.source == "corrected")).all()]
        now: dict[str, set[tuple[str, int]]] = {}
        for kind, row_id, doc_id in rows:
            now.setdefault(doc_id, set()).add((kind, row_id))
        for doc_id, seen in self.entered.items():
            if doc_id in views:
                lost = seen - now.get(doc_id, set())
                check(not lost, "5 nothing entered lost",
                      f"document {doc_id} lost what a person entered: {sorted(lost)}")
        for doc_id, entries in now.items():
            self.entered.setdefault(doc_id, set()).update(entries)

    def check_forgotten(self, views) -> None:
        """2: only a document whose read failed the way a half-written file fails may be
        forgotten; one read successfully (or in review, or corrected) is kept."""
        forgotten = {e.document_id: e for e in self._events("forgotten")}
        if not forgotten:
            return
        read = {e.document_id: e.kind for e in self._events(
            "completed", "routed_to_review", "review_approve", "review_correct")
            if e.document_id in forgotten}
        for doc_id, kind in read.items():
            raise violation("2 no document lost")(f"document {doc_id} was forgotten "
                            f"({forgotten[doc_id].detail}) after it was read ({kind}): its "
                            f"watched file was replaced before it was disposed of")

    def check_at_most_once(self, views) -> None:
        """4: never more exports, dispositions or webhooks than final states."""
        finals = self._final_states()
        exported = Counter(e.document_id for e in self._events("exported"))
        disposed = Counter(e.document_id for e in self._events("disposed"))
        hooks = self.hooks.counts()
        for doc_id, count in disposed.items():
            check(count <= 1, "4 disposed once",
                  f"document {doc_id} was disposed of {count} times")
        for doc_id, count in exported.items():
            check(count <= finals[doc_id] + 1, "4 exported once",
                  f"document {doc_id} was exported {count} times for "
                  f"{finals[doc_id] + 1} final states")
        for doc_id, count in hooks.items():
            check(count <= finals[doc_id] + 1, "4 webhook once",
                  f"document {doc_id}'s webhook was called {count} times for "
                  f"{finals[doc_id] + 1} final states")

    def check_purged_finished(self, views) -> None:
        """3 (and 1): retention purges the originals of finished documents only: final,
        exported, disposed of."""
        for view in views.values():
            doc = view.doc
            if not doc.purged_at:
                continue
            check(view.is_final, "3 purge only finished documents",
                  f"document {doc.id} ({view.status}) was purged before it was final")
            check(bool(doc.exported_at or doc.error_code)
                  and not (doc.source_path and not doc.disposed_at),
                  "3 purge only finished documents",
                  f"document {doc.id} was purged before its export and disposition "
                  f"(exported_at={doc.exported_at}, disposed_at={doc.disposed_at})")

    def check_orphan_rows(self) -> None:
        """3: no row or search entry outlives its document, and a search entry is its
        own page's text (accepted, or the machine's while the page waits for review)."""
        with self.app.db.read() as session:
            doc_ids = set(session.exec(select(Document.id)).all())
            pages = {p.id: p for p in session.exec(select(Page)).all()}
            problems = []
            for page in pages.values():
                if page.document_id not in doc_ids:
                    problems.append(f"page {page.id} of missing document {page.document_id}")
            for model, column in ((FieldSet, FieldSet.document_id),
                                  (IdempotencyKey, IdempotencyKey.document_id),
                                  (ReviewAction, ReviewAction.document_id)):
                for doc_id in session.exec(select(column)).all():
                    if doc_id not in doc_ids:
                        problems.append(f"{model.__name__} row of missing document {doc_id}")
            for page_id in session.exec(select(PageResult.page_id)).all():
                if page_id not in pages:
                    problems.append(f"PageResult row of missing page {page_id}")
            for rowid, indexed in session.execute(text("SELECT rowid, text FROM pagetext")):
                page = pages.get(rowid)
                if page is None or page.document_id not in doc_ids:
                    problems.append(f"search row {rowid} of a missing page: {indexed!r}")
                    continue
                result = session.get(PageResult, page.result_id) if page.result_id else None
                # a page waiting for review is found by the machine's text
                if page.status not in (PageStatus.DONE, PageStatus.REVIEW) or result is None \
                        or result.text != indexed:
                    problems.append(f"search row {rowid} ({indexed!r}) is not the text of "
                                    f"page {rowid} of document {page.document_id}")
        check(not problems, "3 no orphan rows", "; ".join(sorted(set(problems))))

    def check_not_reingested(self, views) -> None:
        """3: a deleted watched document does not come back from its file unless the
        file was written again."""
        for doc_id, (source, digest) in self.deleted.items():
            if not source:
                continue
            path = Path(source)
            if self.rewritten_at.get(path, 0) > self.deleted_at[doc_id]:
                continue
            again = [v.doc.id for v in views.values() if v.doc.source_path == source
                     and v.doc.sha256 == digest and v.doc.created_at > self.deleted_at[doc_id]]
            check(not again, "3 deleted stays deleted",
                  f"deleted document {doc_id} came back from {path.parent.name}/{path.name} "
                  f"as {again}")

    # ---- settling, and the thorough checks

    def _owed(self) -> list[str]:
        """What the appliance still owes: pages to read, finishing steps, files waiting."""
        owed = []
        views = self._views()
        for view in views:
            doc = view.doc
            if view.page_counts[PageStatus.QUEUED] or view.page_counts[PageStatus.RUNNING]:
                owed.append(f"{doc.id} ({doc.name}) {view.status}")
            elif view.is_final:
                if not doc.exported_at and not doc.error_code:
                    owed.append(f"{doc.id} ({doc.name}) final, not exported")
                if doc.source_path and not doc.disposed_at:
                    owed.append(f"{doc.id} ({Path(doc.source_path).name}) final, not disposed of")
                if doc.webhook_url and not doc.webhook_done_at:
                    owed.append(f"{doc.id} ({doc.name}) final, webhook not called")
        waiting = {v.doc.source_path for v in views
                   if v.doc.source_path and not v.doc.disposed_at}
        deleted = {(source, digest) for source, digest in self.deleted.values() if source}
        for folder in self.dirs.values():
            for path in folder.iterdir():
                if str(path) in waiting or path.name.endswith(".error.txt"):
                    continue
                try:
                    data = path.read_bytes()
                except FileNotFoundError:  # disposed of just now
                    continue
                if path in self.refused and data == contents()[self.refused[path]]:
                    continue  # refused and left in place
                if (str(path), sha(data)) in deleted:
                    continue  # its document was deleted before it was disposed of
                owed.append(f"{folder.name}/{path.name} not taken")
        # (a file the watcher holds back is owed only while it is not taken: a changed
        # file whose document waits in review is offered again only after that review)
        return owed

    @staticmethod
    def _pending_files(watcher) -> str:
        """Which files a watcher holds, for the message (its tracker is private: this
        reads it for diagnosis only)."""
        now = time.monotonic()
        with watcher._lock:
            windows = dict(watcher._tracker._pending)
            refusals = dict(watcher._refusals)
        return ", ".join(f"{path.name} (due in {window.since + watcher.folder.stability_s - now:.1f} s, "
                         f"refused {refusals.get(path, 0)} times)"
                         for path, window in windows.items())

    def _fingerprint(self):
        with self.app.db.read() as session:
            last_event = session.exec(select(Event.id).order_by(Event.id.desc())).first()
        listing = tuple(sorted(str(p) for d in (*self.dirs.values(), self.processed,
                                                self.failed) if d.exists() for p in d.iterdir()))
        return last_event, listing, self.hooks.total()

    def settle(self) -> None:
        """Wait, within bounded time, until nothing is owed and nothing changes; then
        check everything (2: final and exported once, or visibly waiting)."""
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        quiet_since, last = None, None
        while True:
            owed = self._owed()
            now = time.monotonic()
            fingerprint = self._fingerprint()
            if owed or fingerprint != last or quiet_since is None:
                quiet_since, last = None if owed else now, fingerprint
            elif now - quiet_since >= QUIET_S:
                break
            if now >= deadline:
                held = "; ".join(f"{w.name} holds {self._pending_files(w)}"
                                 for w in self.app.watch.watchers if w.pending_count)
                check(False, "2 settled within bounded time",
                      f"not settled after {SETTLE_TIMEOUT_S:g} s: "
                      f"{'; '.join(owed) or 'still changing'}" + (f" ({held})" if held else ""))
            time.sleep(0.1)
        self.cheap_invariants()
        self.check_settled()

    def check_settled(self) -> None:
        views = {v.doc.id: v for v in self._views()}
        finals = self._final_states()
        exported = Counter(e.document_id for e in self._events("exported"))
        disposed = Counter(e.document_id for e in self._events("disposed"))
        hooks = self.hooks.counts()
        output_dir = self.settings.paths.output_dir
        for doc_id, view in views.items():
            doc = view.doc
            check(view.is_final or view.status == "review", "2 final or waiting for review",
                  f"document {doc_id} is {view.status} once quiet")
            states = finals[doc_id] + (1 if view.is_final else 0)
            if not doc.error_code:
                check(exported[doc_id] == states, "4 exported once",
                      f"document {doc_id} ({doc.name}) was exported {exported[doc_id]} times "
                      f"for {states} final states")
                if view.is_final:
                    check((output_dir / f"{doc.output_stem}.md").exists(), "4 exported once",
                          f"document {doc_id}'s export {doc.output_stem}.md is missing")
            if doc.webhook_url:
                check(hooks[doc_id] == states, "4 webhook once",
                      f"document {doc_id}'s webhook was called {hooks[doc_id]} times for "
                      f"{states} final states")
            if doc.source_path and view.is_final:
                check(disposed[doc_id] == 1, "4 disposed once",
                      f"watched document {doc_id} was disposed of {disposed[doc_id]} times")
        self.check_spool(views)
        self.check_cache(views)
        self.check_own_content(views)
        self.check_exports(views)

    def check_spool(self, views) -> None:
        """3: no original or page image outlives every document of its content; every
        document not purged has its original, and it is its content."""
        spool = self.app.spool
        held = {v.doc.sha256 for v in views.values()}
        originals = {p.name for p in (spool.root / "originals").glob("*/*") if p.is_file()}
        images = {p.name for p in (spool.root / "pages").iterdir()}
        check(not originals - held, "3 no orphan spool files",
              f"spool originals no document holds: {sorted(originals - held)}")
        check(not images - held, "3 no orphan spool files",
              f"spool page images no document holds: {sorted(images - held)}")
        for view in views.values():
            doc = view.doc
            if doc.purged_at:
                continue
            path = spool.original_path(doc.sha256)
            check(path.exists(), "3 original kept while needed",
                  f"document {doc.id} ({doc.name}, {view.status}) has no original in the "
                  f"spool and was never purged")
            check(sha(path.read_bytes()) == doc.sha256, "3 no shared content",
                  f"the spool original of document {doc.id} is not its content")

    def check_cache(self, views) -> None:
        """3: a result-cache entry is the reading of a page some live document holds."""
        cache = self.settings.paths.data_dir / "cache"
        with self.app.db.read() as session:
            rows = session.exec(select(PageResult.lines, Page.document_id)
                                .join(Page, PageResult.page_id == Page.id)
                                .where(PageResult.outcome == Outcome.OK)).all()
        readings = {tuple(line["text"] for line in lines or ()) for lines, doc_id in rows
                    if doc_id in views}
        for entry in cache.rglob("*.json") if cache.exists() else ():
            lines = tuple(line["text"] for line in json.loads(entry.read_text())["lines"])
            check(lines in readings, "3 no orphan cache entries",
                  f"result-cache entry {entry.name[:12]} ({' / '.join(lines)!r}) is no live "
                  f"document's reading")

    def check_own_content(self, views) -> None:
        """3: a document's accepted text is that of its own content."""
        labels = {sha(contents()[i]): label for i, label in enumerate(LABELS)}
        for view in views.values():
            label = labels.get(view.doc.sha256)
            if label is None:
                continue
            for page, result in queries.accepted_results(self.app.db, view.doc.id):
                if page.status not in (PageStatus.DONE, PageStatus.REVIEW) or result is None:
                    continue
                check(squash(label) in squash(result.text), "3 no shared content",
                      f"document {view.doc.id} holds {label!r} but reads {result.text!r}")

    def check_exports(self, views) -> None:
        """3: every exported file belongs to a live document."""
        stems = {v.doc.output_stem for v in views.values() if v.doc.output_stem}
        output_dir = self.settings.paths.output_dir
        strays = [p.name for p in output_dir.iterdir()
                  if not any(p.name.startswith(stem + ".") for stem in stems)]
        check(not strays, "3 no orphan exports",
              f"exported files of no live document: {sorted(strays)}")


def _ci_settings() -> settings:
    """Bounded and with a fixed seed in CI; the soak profile's own when it is loaded."""
    if settings.get_current_profile_name() == "soak":
        return settings()
    # each step does real I/O and real OCR: Hypothesis's too_slow check would fire on
    # every example, and there is nothing to make faster in the generation itself
    return settings(max_examples=6, stateful_step_count=12, derandomize=True, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow], database=None,
                    print_blob=True)


TestInvariants = ApplianceMachine.TestCase
TestInvariants.settings = _ci_settings()
