"""What happens to a watched folder's original once its document is final.

    move    to processed_dir when every page was read, else to failed_dir with
            <name>.error.txt saying what went wrong and what to do
    delete  removed from the share
    keep    left where it is; the ledger of kept files stops it coming back

Nothing is moved or deleted before the document is final: by then the spool copy
was fsynced and the document row committed long ago. A refused file is never deleted,
whatever the disposition, whether it was refused before it was stored or after: it is
set aside with its reason (``set_aside``).
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from appliance.config import WatchFolder
from appliance.errors import ApplianceError, DuplicateDocument
from appliance.export import fit_name, write_atomic
from appliance.store import Database, transitions
from appliance.store.models import Document, DocStatus
from appliance.store.queries import DocumentView

log = logging.getLogger(__name__)


REPORT_SUFFIX = ".error.txt"


def _free_name(directory: Path, name: str, tag: str) -> Path:
    """``name`` in ``directory``, or ``stem-<tag>.suffix`` when that is taken."""
    target = directory / name
    if not target.exists():
        return target
    stem, dot, suffix = name.partition(".")
    tail = f"-{tag[:8]}{dot}{suffix}"
    return directory / f"{fit_name(stem, tail)}{tail}"


def report_path(target: Path) -> Path:
    """The report beside ``target`` that says why it was not read."""
    return target.with_name(fit_name(target.name, REPORT_SUFFIX) + REPORT_SUFFIX)


def error_report(view: DocumentView) -> str:
    """The <name>.error.txt beside a failed original: what failed, and what to do."""
    doc = view.doc
    lines = [f"{doc.name} could not be read completely (document {doc.id}).", ""]
    if doc.error_code:
        lines.append(f"reason: {doc.error_code}: {doc.error_message}")
    for page in view.pages:
        if page.error_code:
            lines.append(f"page {page.index + 1}: {page.error_code}: {page.error_message}")
    lines += ["", "Fix the file as the reason says and drop it into the watched folder again."]
    return "\n".join(lines) + "\n"


def dispose(db: Database, view: DocumentView, folder: WatchFolder) -> None:
    """Apply the folder's disposition to the document's original; record it once. A
    document refused after its file was stored (encrypted, too many pages, ...) is set
    aside as a file refused before storing is, not deleted: the user's file may be the
    only copy there is of something the appliance could not read."""
    doc: Document = view.doc
    source = Path(doc.source_path)
    target, disposition = None, folder.disposition
    if doc.error_code and disposition == "delete":
        target = set_aside(folder, source, error_report(view))
        disposition = "keep" if target == source else "move"
        if target == source:  # left where it is: not offered again unless it changes
            transitions.record_kept_file(db, folder.name, str(source), doc.size_bytes,
                                         doc.source_mtime_ns, doc.sha256)
    elif disposition == "move":
        failed = view.status != DocStatus.DONE
        directory = folder.failed_dir if failed else folder.processed_dir
        directory.mkdir(parents=True, exist_ok=True)
        target = _free_name(directory, source.name, doc.id)
        if failed:  # first, so a failed original never sits there without its reason
            write_atomic(report_path(target), error_report(view))
        if source.exists():
            shutil.move(source, target)
        else:
            target = None
    elif disposition == "delete":
        source.unlink(missing_ok=True)
    transitions.mark_disposed(db, doc.id, disposition, str(target) if target else None)
    log.info("watched original disposed doc=%s folder=%s disposition=%s status=%s", doc.id,
             folder.name, disposition, view.status)


def set_aside(folder: WatchFolder, source: Path, report: str) -> Path:
    """A refused file, to failed_dir where there is one, else left where it is, with
    ``<name>.error.txt`` (``report``) beside it; where it now is."""
    target = source
    if folder.failed_dir is not None:
        folder.failed_dir.mkdir(parents=True, exist_ok=True)
        target = _free_name(folder.failed_dir, source.name, os.urandom(4).hex())
    # first, so a refused file never sits anywhere without its reason
    write_atomic(report_path(target), report)
    if target != source and source.exists():
        shutil.move(source, target)
    return target


def dispose_refused(folder: WatchFolder, source: Path, error: ApplianceError) -> None:
    """A watched file refused before it became a document (too large, a duplicate).

    Nothing of a refused file is stored, so it is never deleted, whatever the
    disposition: it is set aside (``set_aside``; the caller records one left where it
    is, so that it is not offered again unchanged). Only a duplicate, whose content a
    document already holds, goes as the folder's disposition says."""
    if isinstance(error, DuplicateDocument):
        if folder.disposition == "move":
            folder.processed_dir.mkdir(parents=True, exist_ok=True)
            shutil.move(source, _free_name(folder.processed_dir, source.name,
                                           os.urandom(4).hex()))
        elif folder.disposition == "delete":
            source.unlink(missing_ok=True)
    else:
        set_aside(folder, source, f"{error.code}: {error.message}\n")
    log.info("watched file refused folder=%s file=%s code=%s", folder.name, source.name,
             error.code)
