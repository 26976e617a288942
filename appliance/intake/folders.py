"""Watched folders: one FolderWatcher per [[watch]] entry, all offering files to the
same intake ``submit()`` the UI and the API use.

``offer`` decides what a stable file is: already in flight (a document from it is
not yet disposed of), already read (`keep` folders: the ledger), a duplicate of
finished content (`on_duplicate = "skip"`), refused (too large), or a new document.
It answers False only when the file must stay and come again: the queue is full,
or the file could not be read right now.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable

from appliance.config import Settings, WatchFolder
from appliance.errors import BadInput, DuplicateDocument, QueueFull
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

    def start(self) -> None:
        for watcher in self.watchers:
            watcher.start()

    def stop(self) -> None:
        for watcher in self.watchers:
            watcher.stop()

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
        except QueueFull:
            log.info("watched file left for later folder=%s file=%s reason=queue_full",
                     folder.name, path.name)
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
