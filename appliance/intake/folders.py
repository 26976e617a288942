"""Watched folders: one FolderWatcher per [[watch]] entry, all offering files to the
same intake ``submit()`` the UI and the API use.

``offer`` decides what a stable file is: already in flight (a document from it is
not yet disposed of), already dealt with and left in place (the ledger: read in a
`keep` folder, refused, or its document deleted), a duplicate of finished content
(`on_duplicate = "skip"`), refused (too large: never deleted), or a new document.
It answers False only when the file must stay and come again: the queue is full,
the daemon is shutting down, the file could not be read right now, or it changed
while or after it was read (a writer that paused longer than the stability window;
``disposal`` holds the disposition until the file is known to be whole).

``reload`` (SIGHUP) swaps in a new list of folders: unchanged entries keep their
watcher, changed and new ones get a fresh one, removed ones stop.
"""

from __future__ import annotations

import logging
import threading
from enum import Enum
from pathlib import Path
from typing import Callable

from appliance.config import Settings, WatchFolder
from appliance.errors import (
    BadInput, DuplicateDocument, QueueFull, ShuttingDown, error_class_for,
)
from appliance.intake import SubmitOptions
from appliance.intake.disposition import dispose_refused
from appliance.intake.watch import FolderWatcher
from appliance.store import Database, queries, transitions
from appliance.store.models import Document, Lane
from appliance.store.queries import DocumentView

log = logging.getLogger(__name__)


class Disposal(Enum):
    """What may happen to a final document's watched original (``disposal``)."""

    NOW = "now"  # as the folder's disposition says
    WAIT = "wait"  # not yet: its file may still be being written
    REPLACED = "replaced"  # never: the file is new content; the document is finished without it
    FORGOTTEN = "forgotten"  # the document was a half-written file's: it is gone


class WatchService:
    def __init__(self, settings: Settings, db: Database,
                 submit: Callable[..., Document], finish: Callable[..., None],
                 forget: Callable[[str, str], None]):
        self.db = db
        self.submit = submit  # Appliance.submit
        self.finish = finish  # Appliance.finish: disposes of an original once its file is whole
        self.forget = forget  # Appliance.forget: as if a document had never been submitted
        self.folders = {folder.name: folder for folder in settings.watch}
        self.watchers = [FolderWatcher(folder, self._offerer(folder)) for folder in settings.watch]
        self._started = False
        self._lock = threading.Lock()  # a reload never overlaps a start or a stop

    def start(self) -> None:
        with self._lock:
            self._started = True
            for watcher in self.watchers:
                watcher.start()

    def stop(self) -> None:
        with self._lock:
            self._started = False
            for watcher in self.watchers:
                watcher.stop()

    def reload(self, folders: list[WatchFolder]) -> None:
        """Watch ``folders`` from now on. A folder whose entry did not change keeps its
        watcher (and its files in their stability window). Raises ConfigError, with
        nothing changed, when a new entry cannot be watched."""
        with self._lock:
            self._reload(folders)

    def _reload(self, folders: list[WatchFolder]) -> None:
        current = {w.folder.name: w for w in self.watchers}
        watchers, fresh = [], []
        for folder in folders:
            old = current.get(folder.name)
            if old is not None and old.folder == folder:
                watchers.append(old)
            else:
                watcher = FolderWatcher(folder, self._offerer(folder))  # may raise
                watchers.append(watcher)
                fresh.append(watcher)
        for watcher in self.watchers:
            if watcher not in watchers:
                watcher.stop()
        self.folders = {folder.name: folder for folder in folders}
        self.watchers = watchers
        if self._started:
            for watcher in fresh:
                watcher.start()
        log.info("watched folders reloaded folders=%s new=%s",
                 ",".join(self.folders) or "-", ",".join(w.name for w in fresh) or "-")

    def _offerer(self, folder: WatchFolder) -> Callable[[Path, list[str]], bool]:
        return lambda path, tags: self.offer(folder, path, tags)

    def offer(self, folder: WatchFolder, path: Path, tags: list[str]) -> bool:
        key = str(path)
        if (earlier := queries.watched_document(self.db, key)) is not None:
            return self._offered_again(earlier)
        stat = path.stat()
        if queries.kept_file_seen(self.db, folder.name, key, stat.st_size, stat.st_mtime_ns):
            return True  # read before and kept, or its document deleted: not again
        options = SubmitOptions(source="watch", lane=Lane(folder.lane), doc_type=folder.doc_type,
                                engine=folder.engine or None, tags=[folder.name, *tags],
                                source_path=path, source_mtime_ns=stat.st_mtime_ns,
                                watch_folder=folder.name, pdf_password=folder.password or None,
                                skip_duplicates=folder.on_duplicate == "skip")
        try:
            with path.open("rb") as stream:
                doc = self.submit(stream, path.name, options)
        except (QueueFull, ShuttingDown) as exc:
            log.info("watched file left for later folder=%s file=%s reason=%s",
                     folder.name, path.name, exc.code)
            return False
        except (DuplicateDocument, BadInput) as exc:  # refused before it became a document
            if _changed(path, (stat.st_size, stat.st_mtime_ns)):
                return False  # a writer is still at it: judge the file once it is whole
            dispose_refused(folder, path, exc)
            if path.exists():  # left where it is: not offered again unless it changes
                self._remember(folder, path, stat, None)
            return True
        if _changed(path, _read_signature(doc)):  # it changed while it was stored
            if not doc.error_code:  # a refused one: its finish, once the file is whole
                self._forget(doc, "changed_while_read")
            return False
        if folder.disposition == "keep":
            self._remember(folder, path, stat, doc.sha256)
        return True

    def _offered_again(self, earlier: DocumentView) -> bool:
        """A file offered again while a document read from it is not yet disposed of:
        still being read, or waiting for proof that a failed read was not a half-written
        file (``disposal``)."""
        if _changed(Path(earlier.doc.source_path), _read_signature(earlier.doc)):
            if earlier.is_final:
                self._changed_after_read(earlier)
            return False  # read again once that document is final, and then as a new one
        if earlier.is_final:  # unchanged for a whole window since the failure: it is final
            self.finish(earlier.doc.id, source_confirmed=True)
        return True

    def disposal(self, view: DocumentView, source_confirmed: bool) -> Disposal:
        """What may happen to a final document's watched original now.

        Not when the file changed since it was read (``_changed_after_read``). Not yet
        when the document failed the way a half-written file does (truncated, corrupt,
        empty) and the file has not stayed unchanged for the folder's ``failed_hold_s``
        since: a writer that pauses looks exactly like that. The watcher offers it
        again after that hold, and ``_offered_again`` confirms it.
        """
        doc = view.doc
        path = Path(doc.source_path)
        if _changed(path, _read_signature(doc)):
            return self._changed_after_read(view)
        if source_confirmed or not _may_be_half_written(view):
            return Disposal.NOW
        self._recheck(doc.watch_folder, path, self.folders[doc.watch_folder].failed_hold_s)
        return Disposal.WAIT

    def _changed_after_read(self, view: DocumentView) -> Disposal:
        """A final document's file changed after it was read: a writer that paused
        longer than ``stability_s`` and went on, or a new file saved under the same
        name; the appliance cannot tell which. A read that failed as a half-written file
        fails, with nothing read (``_read_nothing``) and nothing a person did to it, is
        forgotten. Any other reading (done, partly failed, reviewed, corrected) is kept:
        its document is disposed of without touching the file, which is read as a new
        document once it is stable."""
        doc = view.doc
        if _read_nothing(view) and not queries.touched_by_a_person(self.db, doc.id):
            self._forget(doc, "changed_after_read")
            return Disposal.FORGOTTEN
        transitions.mark_disposed(self.db, doc.id, "replaced", None)
        log.warning("watched file changed after it was read; its document is kept and the "
                    "file is read as a new one once stable doc=%s folder=%s file=%s", doc.id,
                    doc.watch_folder, Path(doc.source_path).name)
        self._recheck(doc.watch_folder, Path(doc.source_path))
        return Disposal.REPLACED

    def _forget(self, doc: Document, reason: str) -> None:
        """Forget a document read from a file that changed afterwards, and read the file
        again once it is stable."""
        path = Path(doc.source_path)
        self.forget(doc.id, reason)
        log.warning("watched file changed after it was read; its document is forgotten and "
                    "the file is read again once stable doc=%s folder=%s file=%s reason=%s",
                    doc.id, doc.watch_folder, path.name, reason)
        self._recheck(doc.watch_folder, path)

    def deleted(self, doc: Document) -> None:
        """A person deleted a watched document whose file is still in its folder, as it
        was read: it is not read again, at a restart either, unless it changes."""
        if doc.source_path and not doc.disposed_at and doc.watch_folder in self.folders \
                and doc.source_mtime_ns is not None \
                and not _changed(Path(doc.source_path), _read_signature(doc)):
            transitions.record_kept_file(self.db, doc.watch_folder, doc.source_path,
                                         doc.size_bytes, doc.source_mtime_ns, None)

    def _recheck(self, folder_name: str | None, path: Path, after_s: float | None = None
                 ) -> None:
        watcher = next((w for w in self.watchers if w.folder.name == folder_name), None)
        if watcher is not None:
            watcher.recheck(path, after_s)

    def _remember(self, folder: WatchFolder, path: Path, stat, sha256: str | None) -> None:
        transitions.record_kept_file(self.db, folder.name, str(path), stat.st_size,
                                     stat.st_mtime_ns, sha256)


def _read_signature(doc: Document) -> tuple[int, int] | None:
    """(size, mtime_ns) of a watched file as it was read; None for a document read by a
    version that did not record it."""
    return None if doc.source_mtime_ns is None else (doc.size_bytes, doc.source_mtime_ns)


def _changed(path: Path, signature: tuple[int, int] | None) -> bool:
    """Whether the file at ``path`` is no longer what ``signature`` describes (a file
    gone or moved away has not changed: there is nothing left to read again)."""
    if signature is None:
        return False
    try:
        stat = path.stat()
    except FileNotFoundError:
        return False
    return (stat.st_size, stat.st_mtime_ns) != signature


def _may_be_half_written(view: DocumentView) -> bool:
    """Whether the document, or a page of it, failed the way a half-written file fails
    (truncated, corrupt, empty): its disposal waits for the file to stay unchanged."""
    codes = [view.doc.error_code] + [p.error_code for p in view.pages]
    return any(code and error_class_for(code).may_be_partial for code in codes)


def _read_nothing(view: DocumentView) -> bool:
    """Whether the document failed as a half-written file fails with nothing read: refused
    so at intake, or every page failed so. A page read is a reading to keep."""
    if view.doc.error_code:
        return error_class_for(view.doc.error_code).may_be_partial
    return bool(view.pages) and all(page.error_code
                                    and error_class_for(page.error_code).may_be_partial
                                    for page in view.pages)
