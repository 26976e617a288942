"""Watched folders: one FolderWatcher per [[watch]] entry, all offering files to the
same intake ``submit()`` the UI and the API use.

``offer`` decides what a stable file is: already in flight (a document from it is
not yet disposed of), already read (`keep` folders: the ledger), a duplicate of
finished content (`on_duplicate = "skip"`), refused (too large), or a new document.
It answers False only when the file must stay and come again: the queue is full,
the daemon is shutting down, or the file could not be read right now.

``reload`` (SIGHUP) swaps in a new list of folders: unchanged entries keep their
watcher, changed and new ones get a fresh one, removed ones stop.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Callable

from appliance.config import Settings, WatchFolder
from appliance.errors import BadInput, DuplicateDocument, QueueFull, ShuttingDown
from appliance.intake import SubmitOptions
from appliance.intake.disposition import dispose_refused
from appliance.intake.watch import FolderWatcher
from appliance.store import Database, queries, transitions
from appliance.store.models import Document, Lane

log = logging.getLogger(__name__)


class WatchService:
    def __init__(self, settings: Settings, db: Database,
                 submit: Callable[..., Document], on_rejected: Callable[[str], None]):
        self.db = db
        self.submit = submit  # Appliance.submit
        self.on_rejected = on_rejected  # a document refused at intake is final at once
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
        if queries.watched_file_in_flight(self.db, key):
            return True
        stat = path.stat()
        if folder.disposition == "keep" and queries.kept_file_seen(
                self.db, folder.name, key, stat.st_size, stat.st_mtime_ns):
            return True
        options = SubmitOptions(source="watch", lane=Lane(folder.lane), doc_type=folder.doc_type,
                                engine=folder.engine or None, tags=[folder.name, *tags],
                                source_path=path, watch_folder=folder.name,
                                pdf_password=folder.password or None,
                                skip_duplicates=folder.on_duplicate == "skip")
        try:
            with path.open("rb") as stream:
                doc = self.submit(stream, path.name, options)
        except (QueueFull, ShuttingDown) as exc:
            log.info("watched file left for later folder=%s file=%s reason=%s",
                     folder.name, path.name, exc.code)
            return False
        except (DuplicateDocument, BadInput) as exc:  # refused before it became a document
            if folder.disposition == "keep":
                self._remember(folder, path, stat, None)
            dispose_refused(folder, path, exc.code, exc.message)
            return True
        if folder.disposition == "keep":
            self._remember(folder, path, stat, doc.sha256)
        if doc.error_code:
            self.on_rejected(doc.id)
        return True

    def _remember(self, folder: WatchFolder, path: Path, stat, sha256: str | None) -> None:
        transitions.record_kept_file(self.db, folder.name, str(path), stat.st_size,
                                     stat.st_mtime_ns, sha256)
