"""Intake: the one ``submit()`` path shared by the web UI, the REST API, the CLI and the watcher.

A submission is first copied into the spool (fsynced), then checked: type sniffed
from the bytes, page and pixel caps. A file that fails a check still becomes a
document, ``failed`` with its reason code, and its original stays in the spool.
"""

from __future__ import annotations

import hashlib
import io
import logging
import re
import shutil
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from appliance.config import Settings
from appliance.errors import (
    BadInput, DiskFull, DuplicateDocument, IdempotencyConflict, QueueFull, TooManyPages,
)
from appliance.intake.sniff import HEAD_BYTES, sniff_kind
from appliance.intake.spool import CHUNK_BYTES, Spool
from appliance.tally import Tally
from appliance.raster import born_digital_pages, check_image_data, count_pages, decrypted_pdf
from appliance.store import Database, contents, queries, transitions
from appliance.store.models import Document, Lane

log = logging.getLogger(__name__)

MAX_NAME_CHARS = 200


@dataclass
class SubmitOptions:
    source: str  # upload | api | watch | cli
    lane: Lane = Lane.INTERACTIVE
    doc_type: str = "generic"
    engine: str | None = None
    text_layer: str | None = None  # a PDF's own text: auto | ignore | prefer; None: the config's
    tags: list[str] = field(default_factory=list)
    source_path: Path | None = None  # watched files only, with the mtime they were read at
    source_mtime_ns: int | None = None
    watch_folder: str | None = None
    webhook_url: str | None = None
    # an encrypted PDF's: a watched folder's (kept in its config, used at each reading),
    # or one given with an upload (used once, to store the PDF decrypted; never kept)
    pdf_password: str | None = None
    skip_duplicates: bool = False  # refuse content already read, or being read, successfully
    # (owner, Idempotency-Key): a retry of a submission answers the first one's document
    idempotency_key: tuple[str, str] | None = None


def display_name(name: str | None) -> str:
    """A submitted file name made safe to show and to derive export names from.

    Only the last path component survives, so an uploaded name can never point
    anywhere; control characters are dropped.
    """
    base = re.split(r"[\\/]", name or "")[-1]
    base = "".join(ch for ch in base if unicodedata.category(ch)[0] != "C").strip()
    return base[:MAX_NAME_CHARS] or "document"


class Intake:
    def __init__(self, settings: Settings, db: Database, spool: Spool):
        self.limits = settings.limits
        self.pdf = settings.pdf
        self.queue = settings.queue
        self.retention = settings.retention
        self.db = db
        self.spool = spool
        self.refusals = Tally()  # (source, lane, code) of submissions refused unstored

    def check_capacity(self, lane: Lane) -> None:
        """Backpressure: refuse, before anything is stored, while the lane is full."""
        cap = (self.queue.max_queued_pages_interactive if lane == Lane.INTERACTIVE
               else self.queue.max_queued_pages_batch)
        waiting = queries.pending_pages(self.db, lane)
        if waiting >= cap:
            raise QueueFull(f"the appliance is busy: {waiting} pages are waiting in the {lane} "
                            f"lane (limit {cap}); try again in {self.queue.retry_after_s} s",
                            retry_after_s=self.queue.retry_after_s)

    def check_disk_floor(self) -> None:
        """Refuse, before anything is stored, while the spool's disk is nearly full."""
        free_mb = shutil.disk_usage(self.spool.root).free // 2**20
        floor_mb = self.retention.min_free_disk_mb
        if free_mb < floor_mb:
            raise DiskFull(f"the appliance's disk is nearly full: {free_mb} MB free, under "
                           f"the floor of {floor_mb} MB (retention.min_free_disk_mb); nothing "
                           f"was stored. Free space, or lower retention.hot_days",
                           retry_after_s=self.queue.retry_after_s)

    def replay(self, key: tuple[str, str], stream: BinaryIO) -> Document | None:
        """The document an earlier request with this idempotency key created, if any;
        IdempotencyConflict when ``stream`` is not the content sent with it then."""
        if queries.keyed_document(self.db, key) is None:
            return None
        digest = hashlib.sha256()
        while chunk := stream.read(CHUNK_BYTES):
            digest.update(chunk)
        stream.seek(0)
        return self._replayed(key, digest.hexdigest())

    def _replayed(self, key: tuple[str, str], sent: str) -> Document:
        """The document the key names, if ``sent`` is the content sent with it."""
        earlier, earlier_sent = queries.keyed_document(self.db, key)
        if earlier_sent != sent:
            raise IdempotencyConflict(f"this Idempotency-Key was first used for other content "
                                      f"(document {earlier.id}); use a new key for a new "
                                      f"document")
        return earlier

    def _store(self, stream: BinaryIO) -> tuple[str, int, Path, int]:
        """The stream in the spool, held for this submission: (sha256, size, path, hold)."""
        with self.spool.staging(stream, self.limits.max_bytes) as staged:
            hold = contents.hold_content(self.db, staged.sha256)
            return staged.sha256, staged.size, self.spool.place(staged), hold

    def _decrypted(self, sha: str, path: Path, hold: int,
                   password: str) -> tuple[str, int, Path, int]:
        """An uploaded PDF opened with its password, kept decrypted as content of its own
        (sha256, size, path, hold), so that the password is needed, and held, nowhere
        after this; the encrypted copy goes unless another document holds it. A PDF that
        is not encrypted is kept as sent."""
        plain = decrypted_pdf(path, password)
        if plain is None:
            return sha, path.stat().st_size, path, hold
        stored = self._store(io.BytesIO(plain))
        contents.release_hold(self.db, hold)
        contents.discard_unheld_content(self.db, sha, lambda: self.spool.delete_content(sha))
        return stored

    def submit(self, stream: BinaryIO, name: str | None, options: SubmitOptions) -> Document:
        """Spool a file and queue its pages, or record why it cannot be processed."""
        try:
            self.check_capacity(options.lane)
            self.check_disk_floor()
        except (QueueFull, DiskFull) as exc:  # nothing is stored: /metrics counts them
            self.refusals.add((options.source, str(options.lane), exc.code))
            raise
        sent, size, path, hold = self._store(stream)
        try:
            return self._submit_stored(sent, size, path, hold, name, options)
        except BaseException:  # no document holds it: a delete or purge may take it
            contents.release_hold(self.db, hold)
            raise

    def _submit_stored(self, sent: str, size: int, path: Path, hold: int, name: str | None,
                       options: SubmitOptions) -> Document:
        doc = Document(name=display_name(name), sha256=sent, size_bytes=size,
                       source=options.source, lane=options.lane, doc_type=options.doc_type,
                       engine=options.engine, text_layer=options.text_layer, tags=options.tags,
                       source_path=str(options.source_path) if options.source_path else None,
                       source_mtime_ns=options.source_mtime_ns, watch_folder=options.watch_folder,
                       webhook_url=options.webhook_url)
        try:
            with path.open("rb") as fh:
                doc.kind = sniff_kind(fh.read(HEAD_BYTES), doc.name)
            password = options.pdf_password if doc.kind == "pdf" else None
            if password and options.watch_folder is None:
                doc.sha256, doc.size_bytes, path, hold = self._decrypted(sent, path, hold,
                                                                         password)
                password = None
            # the content as it is kept: a PDF sent again with its password is the same
            if options.skip_duplicates and (earlier := queries.same_content(self.db,
                                                                            doc.sha256)):
                raise DuplicateDocument(f"the same content was already submitted as document "
                                        f"{earlier.id} ({earlier.name})",
                                        existing_id=earlier.id)
            pages = count_pages(path, doc.kind, self.limits.max_pixels, password)
            check_image_data(path, doc.kind, self.limits.max_pixels)
            if pages > self.limits.max_pages:
                raise TooManyPages.said("over_pages", pages=pages, limit=self.limits.max_pages)
            from_text = doc.kind == "pdf" and (doc.text_layer or self.pdf.text_layer) != "ignore"
            born_digital = (born_digital_pages(path, self.pdf.scan_min_area, password)
                            if from_text else set())
        except BadInput as exc:
            log.warning("intake rejected doc=%s code=%s source=%s", doc.id, exc.code,
                        options.source)
            stored = transitions.record_rejected_document(self.db, doc, exc.code, exc.message,
                                                          options.idempotency_key, sent, hold)
        else:
            log.info("intake accepted doc=%s kind=%s pages=%d bytes=%d source=%s", doc.id,
                     doc.kind, pages, size, options.source)
            stored = transitions.submit_document(self.db, doc, pages, options.idempotency_key,
                                                 sent, hold, born_digital)
        # another request with the same key committed first: answer its document
        return stored if stored.id == doc.id else self._replayed(options.idempotency_key, sent)
