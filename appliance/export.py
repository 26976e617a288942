"""Results of a finished document: rendered from the store, written atomically.

``render`` is the one place that turns stored page results into Markdown, JSON, text,
hOCR and ALTO; the API serves the same renderings the export writes. Files land as
``<output_dir>/<stem><suffix>`` for the formats the document's channel asks for
(``Settings.output_formats``: a watched folder's, or the uploads'); the stem is
reserved in the store once, so an export repeated after a crash overwrites its own
files instead of adding copies.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from appliance.config import OUTPUT_FORMATS, Settings
from appliance.errors import ApplianceError, NoResult, NotFound, NotReady, OutputFailed, PagesFailed
from appliance.intake.spool import Spool, fsync_dir
from appliance.outputs.alto import to_alto
from appliance.outputs.hocr import to_hocr
from appliance.outputs.pdf import searchable_pdf
from appliance.outputs.tree import PageTree, page_trees
from appliance.pipeline.document import document_pages
from appliance.quality.blocks import parse_blocks
from appliance.reading.markdown import layout_blocks
from appliance.store import Database, queries, transitions
from appliance.store.models import DocStatus, Document, Page, PageResult, PageStatus
from appliance.store.queries import DocumentView
from appliance.stopwatch import Stopwatch

log = logging.getLogger(__name__)

FORMATS = OUTPUT_FORMATS
# each format's file name ending
SUFFIXES = {"md": ".md", "json": ".json", "txt": ".txt", "hocr": ".hocr", "alto": ".alto.xml",
            "pdf": ".pdf", "fields.json": ".fields.json"}
assert tuple(SUFFIXES) == FORMATS, "every output format needs its file name ending"
# an output folder that is full, gone for a moment (a network share) or not yet
# writable may heal; any other failure to write would fail the same way every time
TRANSIENT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EAGAIN,
                              errno.EACCES, errno.EPERM, errno.EROFS, errno.ESTALE,
                              errno.ETIMEDOUT, errno.EHOSTDOWN, errno.ENETUNREACH,
                              errno.ENOENT})
NAME_MAX_BYTES = 255  # a file name's limit on Linux file systems (ext4, XFS, Btrfs, NFS, SMB)
TEMP_NAME_BYTES = len(".") + len(".XXXXXXXX.tmp")  # what write_atomic's temporary adds
# the longest tail a stem gets: the document's id when the name is taken, a suffix
LONGEST_TAIL = "-" + "0" * 8 + max(SUFFIXES.values(), key=len)


def fit_name(stem: str, tail: str) -> str:
    """``stem`` cut, at a character, so that ``stem + tail`` and the temporary file
    written on the way to it fit the file system's limit on a name, which counts
    bytes: about 77 CJK characters fill it."""
    room = NAME_MAX_BYTES - TEMP_NAME_BYTES - len(os.fsencode(tail))
    encoded = os.fsencode(stem)
    if len(encoded) <= room:
        return stem
    return encoded[:max(room, 0)].decode(sys.getfilesystemencoding(), "ignore")


def safe_stem(name: str) -> str:
    """A file-system-safe stem from a document's display name, short enough for every
    file named after it (``fit_name``)."""
    stem = Path(name).stem if "." in name else name
    stem = re.sub(r"[^\w.-]+", "_", stem).strip("._")
    return fit_name(stem, LONGEST_TAIL).strip("._") or "document"


def document_error(view: DocumentView) -> dict | None:
    """Why a document, or some of its pages, failed: {"code", "message"}; None if nothing did.

    A document refused at intake has its own reason. Otherwise the failed pages are
    summed up: their code when they share one (else ``pages_failed``), and a message
    that names the pages and the first reason.
    """
    doc = view.doc
    if doc.error_code:
        return {"code": doc.error_code, "message": doc.error_message}
    failed = [p for p in view.pages if p.status == PageStatus.FAILED]
    if not failed:
        return None
    first = failed[0]
    codes = {p.error_code for p in failed}
    code = first.error_code if len(codes) == 1 else PagesFailed.code
    if len(view.pages) == 1:
        return {"code": code, "message": first.error_message}
    which = (f"page {first.index + 1} of {len(view.pages)} failed" if len(failed) == 1 else
             f"{len(failed)} of {len(view.pages)} pages failed (pages "
             f"{', '.join(str(p.index + 1) for p in failed)}); page {first.index + 1}")
    return {"code": code, "message": f"{which}: {first.error_message} [{first.error_code}]"}


def document_json(view: DocumentView) -> dict:
    """A document's status as the API answers it; ``view`` with its pages
    (``queries.get_document``) for the per-page part and the error summary."""
    doc = view.doc
    body = {
        "id": doc.id, "name": doc.name, "status": view.status, "kind": doc.kind,
        "sha256": doc.sha256, "size_bytes": doc.size_bytes, "page_count": doc.page_count,
        "source": doc.source, "lane": doc.lane, "doc_type": doc.doc_type, "tags": doc.tags,
        "created_at": doc.created_at, "exported_at": doc.exported_at,
        "error": document_error(view),
        "output_error": doc.output_error and {"code": OutputFailed.code,
                                              "message": doc.output_error},
    }
    if view.pages:
        body["pages"] = [{"number": p.index + 1, "status": p.status, "attempts": p.attempts,
                          "error": ({"code": p.error_code, "message": p.error_message}
                                    if p.error_code else None)} for p in view.pages]
    return body


def _comment(text: str) -> str:
    return text.replace("--", "- -")  # a message must not close the HTML comment early


# what a document that is not final yet is doing, in words
UNFINISHED_TEXT = {DocStatus.QUEUED: "queued", DocStatus.PROCESSING: "being read",
                   DocStatus.REVIEW: "waiting for a person to review some of its pages"}


@dataclass(frozen=True)
class FinalDocument:
    """A final document's pages read together (``pipeline.document``), each with its
    tree: what every format is made from, read once however many formats are asked."""

    view: DocumentView
    pages: list[tuple[Page, PageResult | None]]
    trees: list[PageTree]


def final_document(db: Database, document_id: str,
                   page_furniture: str = "separate") -> FinalDocument:
    """The document read together, its furniture placed as ``page_furniture`` says.
    Raises NotReady until it is final, NoResult where it was refused at intake."""
    view = queries.get_document(db, document_id)
    if view is None:
        raise NotFound(f"no document with id {document_id}")
    if not view.is_final:
        raise NotReady(f"document {document_id} is {UNFINISHED_TEXT[view.status]}; its result "
                       f"is available once every page is finished")
    doc = view.doc
    if doc.error_code:  # rejected at intake: there is no result, only the reason
        raise NoResult(f"document {document_id} has no result: it was refused when it "
                       f"arrived ({doc.error_code}): {doc.error_message}")
    pages = document_pages(db, document_id, page_furniture)
    return FinalDocument(view, pages, page_trees(db, pages))


def render(db: Database, document_id: str, page_furniture: str = "separate") -> dict[str, str]:
    """The document's results in every text format (all but the PDF, which
    ``Exporter.rendered`` adds), its pages read together and their furniture placed as
    ``page_furniture`` says (``final_document``). Raises NotReady until it is final."""
    return text_formats(db, final_document(db, document_id, page_furniture))


def text_formats(db: Database, document: FinalDocument) -> dict[str, str]:
    """``document`` in every text format."""
    view, pages, trees = document.view, document.pages, document.trees
    doc = view.doc
    md_parts, txt_parts, json_pages = [], [], []
    field_set = queries.latest_fields(db, doc.id)
    fields = field_set.fields if field_set else []
    for (page, result), tree in zip(pages, trees):
        number = page.index + 1
        if page.status == PageStatus.FAILED:
            # failed, or rejected in review: a marker with the reason, never machine text
            result = None
            md_parts.append(f"<!-- page {number}: failed ({page.error_code}): "
                            f"{_comment(page.error_message or '')} -->")
            txt_parts.append(f"[page {number}: failed ({page.error_code}): "
                             f"{page.error_message or ''}]")
        else:
            md_parts.append(f"<!-- page {number} -->\n\n{result.markdown}".rstrip())
            txt_parts.append(result.text or "")
        json_pages.append({
            "number": number,
            "status": page.status,
            "attempts": page.attempts,
            "error": ({"code": page.error_code, "message": page.error_message}
                      if page.error_code else None),
            "text": result.text if result else None,
            "markdown": result.markdown if result else None,
            # the Markdown's structure, for systems that want tables as rows and cells
            "blocks": [b.to_dict() for b in parse_blocks(result.markdown or "")] if result else [],
            "lines": result.lines if result else [],
            # the reading-order blocks the lines belong to (engines that give them)
            "layout": layout_blocks(result.lines or []) if result else [],
            # its barcodes: format, value, corners in the lines' pixels (engines.barcodes)
            "barcodes": tree.barcodes,
            # its check boxes: state (selected, unselected), confidence, box in the
            # lines' pixels (raster.marks)
            "selection_marks": tree.selection_marks,
            # false: the page's text has no positions (a vision model's reading), so
            # the hOCR and ALTO carry none of it
            "positioned": not tree.unplaced_text,
            "flags": result.flags if result else [],
            "confidence": result.confidence if result else None,
            "signals": result.signals if result else None,  # what the confidence is built from
            "routing": result.reasons or [] if result else [],  # why accepted or reviewed
            # the document's key fields found on this page
            "fields": [f for f in fields if any(e["page"] == number for e in f["evidence"])],
            # the accepted attempt: claimed by a worker, then finished
            "started_at": result.started_at if result else None,
            "finished_at": result.finished_at if result else None,
            "provenance": ({"engine": result.engine, "model_id": result.model_id,
                            "finish_reason": result.finish_reason,
                            "timings_ms": result.timings_ms, **(result.provenance or {})}
                           if result else None),
        })
    document = {
        "id": doc.id, "name": doc.name, "sha256": doc.sha256, "kind": doc.kind,
        "size_bytes": doc.size_bytes, "page_count": doc.page_count, "status": view.status,
        "source": doc.source, "doc_type": doc.doc_type, "tags": doc.tags,
        "created_at": doc.created_at, "error": document_error(view),
        # the document type's key fields, read and checked (appliance.fields.document);
        # null for a type without fields
        "fields": field_set.fields if field_set else None,
    }
    return {
        "md": "\n\n".join(md_parts) + "\n",
        "txt": "\f".join(txt_parts) + "\n",  # form feed between pages, as pdftotext does
        "json": json.dumps({"document": document, "pages": json_pages}, ensure_ascii=False,
                           indent=2) + "\n",
        "hocr": to_hocr(doc.name, trees),
        "alto": to_alto(doc.name, trees).decode("utf-8"),
        # the key fields alone, for accounting systems (null for a type without fields)
        "fields.json": json.dumps({"id": doc.id, "name": doc.name, "doc_type": doc.doc_type,
                                   "fields": document["fields"]}, ensure_ascii=False,
                                  indent=2) + "\n",
    }


def write_atomic(path: Path, content: str | bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(content.encode("utf-8") if isinstance(content, str) else content)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes 0600; results are for the people who fetch them
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


class Exporter:
    """Renders finished documents (the API, the UI and the one-shot command ask it
    too) and writes them to the output directory."""

    def __init__(self, db: Database, spool: Spool, settings: Callable[[], Settings]):
        """``settings``: the settings now (a reload changes the watched folders, whose
        documents' formats and PDF passwords they hold)."""
        self.db = db
        self.spool = spool
        self.settings = settings
        self.output_dir = settings().paths.output_dir
        self.output_dir.mkdir(parents=True, exist_ok=True)

    def final(self, document_id: str) -> FinalDocument:
        """The document read together as the settings place its furniture."""
        return final_document(self.db, document_id, self.settings().output.page_furniture)

    def rendered(self, document_id: str, formats) -> dict[str, str | bytes]:
        """The document in these formats. Raises NotReady until it is final."""
        document = self.final(document_id)
        rendered: dict[str, str | bytes] = text_formats(self.db, document)
        if "pdf" in formats:
            rendered["pdf"] = self._searchable_pdf(document)
        return {fmt: rendered[fmt] for fmt in formats}

    def pdf(self, document_id: str) -> bytes:
        """The original with an invisible text layer of the accepted words, as
        output.pdf_type asks (a plain PDF, and a warning, where PDF/A cannot be made).
        Raises NotReady until it is final."""
        return self._searchable_pdf(self.final(document_id))

    def _searchable_pdf(self, document: FinalDocument) -> bytes:
        doc = document.view.doc
        document_id = doc.id
        original = self.spool.original_path(doc.sha256)
        if not original.exists():  # retention deleted it: expected, no traceback to log
            raise OutputFailed(f"the searchable PDF of document {document_id} is made from "
                                 f"its original, which is no longer kept (retention."
                                 f"hot_days); its other formats are there")
        try:
            data, report = searchable_pdf(original, doc.kind, document.trees,
                                          output_type=self.settings().output.pdf_type,
                                          password=self.settings().pdf_password(
                                              doc.watch_folder))
        except ApplianceError:
            raise
        except Exception as exc:  # the PDF libraries' own errors, on an original they refuse
            log.exception("searchable PDF failed doc=%s", document_id)
            raise OutputFailed(f"the searchable PDF of document {document_id} could not be "
                               f"made ({type(exc).__name__}: {exc}); its other formats are "
                               f"there") from exc
        if report["pdfa_error"]:
            log.warning("searchable PDF written as plain PDF doc=%s reason=%s", document_id,
                        report["pdfa_error"])
        return data

    def remove(self, doc: Document) -> int:
        """Delete the document's exported files; how many there were."""
        removed = 0
        for suffix in SUFFIXES.values() if doc.output_stem else ():
            path = self.output_dir / f"{doc.output_stem}{suffix}"
            if path.exists():
                path.unlink()
                removed += 1
        if removed:
            fsync_dir(self.output_dir)
        return removed

    def _taken_on_disk(self, stem: str) -> bool:
        return any((self.output_dir / f"{stem}{suffix}").exists() for suffix in SUFFIXES.values())

    def export(self, document_id: str) -> list[Path]:
        """Write the final document's files, in the formats its channel asks for (none
        at all for a document sent over an API by default), and mark it exported."""
        view = queries.get_document(self.db, document_id)
        formats = self.settings().output_formats(view.doc.watch_folder)
        clock = Stopwatch()  # in the exported event: `appliance bench` tables it
        paths: list[Path] = []
        if formats:
            with clock.stage("render"):
                document = self.final(document_id)
                texts = text_formats(self.db, document)
                rendered = {fmt: texts[fmt] for fmt in formats if fmt != "pdf"}
            if "pdf" in formats:
                try:
                    with clock.stage("pdf"):
                        rendered["pdf"] = self._searchable_pdf(document)
                except ApplianceError as exc:  # e.g. an original pikepdf cannot open
                    log.warning("searchable PDF not written doc=%s code=%s reason=%s",
                                document_id, exc.code, exc.message)
            if queries.latest_fields(self.db, document_id) is None:
                rendered.pop("fields.json", None)  # a type without fields: no empty file
            stem = transitions.reserve_output_stem(self.db, document_id,
                                                   safe_stem(view.doc.name), self._taken_on_disk)
            with clock.stage("write"):
                self._write(document_id, stem, rendered, paths)
        transitions.mark_exported(self.db, document_id, [p.name for p in paths], clock.ms)
        log.info("exported doc=%s files=%d status=%s", document_id, len(paths), view.status)
        return paths

    def _write(self, document_id: str, stem: str, rendered: dict[str, str | bytes],
               paths: list[Path]) -> None:
        """Each rendered format to its file, appended to ``paths`` as it is written."""
        for fmt in rendered:
            path = self.output_dir / f"{stem}{SUFFIXES[fmt]}"
            try:
                write_atomic(path, rendered[fmt])
            except OSError as exc:
                if exc.errno in TRANSIENT_ERRNOS:
                    raise  # the periodic finish tries again
                raise OutputFailed(f"the results of document {document_id} cannot be "
                                   f"written to {self.output_dir} ({exc.strerror}: "
                                   f"{path.name}); fix the output folder, then send the "
                                   f"document to review or delete it") from exc
            paths.append(path)
        fsync_dir(self.output_dir)
