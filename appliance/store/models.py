"""SQLModel tables. Times are UNIX seconds (float, UTC), except a page's lease and back-off:
instants of ``time.monotonic()`` (see ``transitions``). Ids of documents are hex UUIDs."""

from __future__ import annotations

import time
import uuid
from enum import StrEnum

from sqlalchemy import JSON, Column, Index
from sqlmodel import Field, SQLModel

SCHEMA_VERSION = 15


class PageStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    REVIEW = "review"
    FAILED = "failed"


FINAL_PAGE_STATUSES = (PageStatus.DONE, PageStatus.FAILED)


class DocStatus(StrEnum):
    QUEUED = "queued"
    PROCESSING = "processing"
    REVIEW = "review"
    DONE = "done"
    PARTIAL = "partial"  # final, some pages failed
    FAILED = "failed"


class Lane(StrEnum):
    INTERACTIVE = "interactive"
    BATCH = "batch"


class Outcome(StrEnum):
    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    DEGENERATE = "degenerate"
    PREEMPTED = "preempted"
    CORRECTED = "corrected"  # a reviewer's correction: the page's new accepted result


def _now() -> float:
    return time.time()


class SchemaMeta(SQLModel, table=True):
    key: str = Field(primary_key=True)
    value: str


class Document(SQLModel, table=True):
    id: str = Field(default_factory=lambda: uuid.uuid4().hex, primary_key=True)
    name: str  # the submitted file name, for display and export naming only
    sha256: str = Field(index=True)
    kind: str | None = None  # pdf, png, ... sniffed from the bytes; None if unknown
    size_bytes: int
    page_count: int = 0
    source: str  # upload | api | watch | cli
    lane: str = Lane.INTERACTIVE
    doc_type: str = "generic"
    engine: str | None = None  # requested engine; None means the configured default
    text_layer: str | None = None  # a PDF's own text: auto | ignore | prefer; None: pdf.text_layer
    tags: list[str] = Field(default_factory=list, sa_column=Column(JSON))
    error_code: str | None = None  # set when intake itself failed (the document has no pages)
    error_message: str | None = None
    created_at: float = Field(default_factory=_now, index=True)
    output_stem: str | None = None  # chosen once, so a re-export after a crash overwrites
    exported_at: float | None = None
    output_error: str | None = None  # why its results cannot be written (output_failed)
    source_path: str | None = None  # the watched file it came from, for its disposition
    source_mtime_ns: int | None = None  # that file's mtime when it was read (size: size_bytes)
    watch_folder: str | None = None  # the [[watch]] folder's name
    disposed_at: float | None = None  # when the watched original was moved/deleted/kept
    webhook_url: str | None = None  # POSTed to when the document is final
    webhook_done_at: float | None = None  # delivered, or given up on
    purged_at: float | None = None  # retention deleted its original and page images
    # its pages per status, kept by triggers on the page table (PAGE_COUNT_TRIGGERS) in
    # the transaction that changes a page: the documents browser filters and sorts by
    # the status they give without counting 50,000 pages
    pages_queued: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    pages_running: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    pages_review: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    pages_done: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    pages_failed: int = Field(default=0, sa_column_kwargs={"server_default": "0"})


class Page(SQLModel, table=True):
    # ix_page_review: a reviewer's claim first looks for the pages they hold already
    __table_args__ = (Index("ix_page_claim", "status", "not_before"),
                      Index("ix_page_review", "status", "review_owner"))

    id: int | None = Field(default=None, primary_key=True)
    document_id: str = Field(foreign_key="document.id", index=True)
    index: int  # 0-based position in the document
    status: str = PageStatus.QUEUED
    attempts: int = 0
    # leases and retry back-off: time.monotonic() of the running daemon, not UNIX time
    not_before: float = 0.0  # retry backoff: not claimable before this instant
    lease_owner: str | None = None
    lease_expires_at: float | None = None
    result_id: int | None = None  # the accepted PageResult
    error_code: str | None = None
    error_message: str | None = None
    updated_at: float = Field(default_factory=_now)
    # review: when the page was routed there, and who holds it until when
    review_since: float | None = None
    review_owner: str | None = None
    review_lock_expires_at: float | None = None
    # a reviewer's rerun: {"engine": "classic"|"llama"}, {"resolution_boost": 1} and/or
    # {"turn_deg": 90} (the page as it came turned clockwise, in place of its orientation)
    options: dict | None = Field(default=None, sa_column=Column(JSON))
    # its worker died while it was read with other pages: read alone until it answers
    crash_suspect: bool = False
    # a PDF page with text of its own and no scan (``raster.born_digital_pages``), read
    # from its text in a fraction of a scanned page's time: it goes ahead (``Priority``)
    born_digital: bool = False


class PageResult(SQLModel, table=True):
    """One row per attempt, whatever its outcome."""

    id: int | None = Field(default=None, primary_key=True)
    page_id: int = Field(foreign_key="page.id", index=True)
    attempt: int
    outcome: str
    worker_id: str | None = None
    engine: str | None = None
    model_id: str | None = None
    text: str | None = None
    markdown: str | None = None
    lines: list[dict] | None = Field(default=None, sa_column=Column(JSON))
    finish_reason: str | None = None
    tokens: list[dict] | None = Field(default=None, sa_column=Column(JSON))
    flags: list[str] | None = Field(default=None, sa_column=Column(JSON))
    provenance: dict | None = Field(default=None, sa_column=Column(JSON))
    # a vision model's answer to the document type's field question (engines.base)
    field_answer: dict | None = Field(default=None, sa_column=Column(JSON))
    barcodes: list[dict] | None = Field(default=None, sa_column=Column(JSON))  # engines.barcodes
    # its check boxes: state, confidence, box in the lines' pixels (raster.marks)
    selection_marks: list[dict] | None = Field(default=None, sa_column=Column(JSON))
    timings_ms: dict | None = Field(default=None, sa_column=Column(JSON))
    confidence: float | None = None
    signals: dict | None = Field(default=None, sa_column=Column(JSON))  # what it was built from
    reasons: list[str] | None = Field(default=None, sa_column=Column(JSON))  # why it went to review
    error_code: str | None = None
    error_message: str | None = None
    started_at: float | None = None
    finished_at: float = Field(default_factory=_now)


class Event(SQLModel, table=True):
    """Audit trail: who did what to which document or page, and when."""

    id: int | None = Field(default=None, primary_key=True)
    at: float = Field(default_factory=_now, index=True)
    kind: str
    document_id: str | None = Field(default=None, index=True)
    page_id: int | None = None
    actor: str = "system"
    detail: dict | None = Field(default=None, sa_column=Column(JSON))


class ReviewAction(SQLModel, table=True):
    """One reviewer action on one page: who, when, what, and the text before and after."""

    id: int | None = Field(default=None, primary_key=True)
    at: float = Field(default_factory=_now, index=True)
    page_id: int = Field(foreign_key="page.id", index=True)
    document_id: str = Field(index=True)
    reviewer: str
    action: str  # approve | correct | reject | rerun | skip
    before_markdown: str | None = None
    after_markdown: str | None = None
    reasons: list[str] | None = Field(default=None, sa_column=Column(JSON))
    note: str | None = None


class IdempotencyKey(SQLModel, table=True):
    """A client's Idempotency-Key and the document its first request created: a retry
    with the same key gets that document back instead of a second one."""

    owner: str = Field(primary_key=True)  # the API key's name ("" without auth): keys are per client
    key: str = Field(primary_key=True)
    document_id: str = Field(foreign_key="document.id")
    # the content sent: the document's own, but for a PDF sent with its password, which
    # the document holds decrypted (None: a key from before this was recorded)
    sha256: str | None = None
    created_at: float = Field(default_factory=_now, index=True)


class Analysis(SQLModel, table=True):
    """A document submitted through the Document Intelligence API (``appliance.docintel``):
    the model it was analyzed with and the request's options, which shape its answer."""

    document_id: str = Field(foreign_key="document.id", primary_key=True)
    model_id: str  # prebuilt-read, prebuilt-layout, ...
    # outputContentFormat, pages, locale, features, output, as the request gave them
    options: dict = Field(default_factory=dict, sa_column=Column(JSON))
    created_at: float = Field(default_factory=_now)


class WatchLedger(SQLModel, table=True):
    """Watched files that stay in their folder and must not be read again unchanged:
    read in a `keep` folder, refused with no failed_dir to go to, or whose document a
    person deleted."""

    folder: str = Field(primary_key=True)
    path: str = Field(primary_key=True)
    size_bytes: int
    mtime_ns: int
    sha256: str | None  # None when the file was refused before it was hashed
    at: float = Field(default_factory=_now)


class ContentHold(SQLModel, table=True):
    """Content a submission has stored in the spool but no document row holds yet: a
    delete or purge of another document with the same bytes must leave its copy.
    Taken and released in write transactions (``contents.hold_content``)."""

    id: int | None = Field(default=None, primary_key=True)
    sha256: str = Field(index=True)
    created_at: float = Field(default_factory=_now)


class FieldSet(SQLModel, table=True):
    """A document's key fields as read (``fields.document``), one row per reading; the
    newest is the document's. ``identity`` is what makes two documents the same one
    (seller and invoice number, say): the business checks look it up."""

    id: int | None = Field(default=None, primary_key=True)
    document_id: str = Field(foreign_key="document.id", index=True)
    doc_type: str
    identity: str | None = Field(default=None, index=True)
    fields: list[dict] = Field(default_factory=list, sa_column=Column(JSON))
    reasons: list[str] = Field(default_factory=list, sa_column=Column(JSON))
    source: str = "extracted"  # extracted | corrected
    actor: str = "system"
    created_at: float = Field(default_factory=_now)


# The full-text index of accepted page text (``store.search``): an FTS5 table, which
# SQLModel cannot declare.
# Its rowid is the page's id; words are matched by their stem (Porter's, for English:
# "invoices" finds "invoice") with accents removed.
PAGETEXT_DDL = ("CREATE VIRTUAL TABLE IF NOT EXISTS pagetext USING fts5(text, "
                "tokenize = 'porter unicode61 remove_diacritics 2')")
# CJK runs as their pairs (appliance/store/grams.py), beside the words of pagetext
PAGEGRAMS_DDL = ("CREATE VIRTUAL TABLE IF NOT EXISTS pagegrams USING fts5(grams, "
                 "tokenize = 'unicode61')")
# every accepted page of a store from before the index, by the migration that adds it
PAGETEXT_FILL = ("INSERT INTO pagetext (rowid, text) SELECT page.id, pageresult.text FROM page "
                 "JOIN pageresult ON pageresult.id = page.result_id "
                 "WHERE page.status = 'done' AND pageresult.text IS NOT NULL")
# the machine's text of the pages waiting for review, found too since version 10
PAGETEXT_REVIEW_FILL = PAGETEXT_FILL.replace("'done'", "'review'")
# the pairs of every indexed page, made by the migrations that change them (cjk_grams: db.py)
PAGEGRAMS_FILL = ("INSERT INTO pagegrams (rowid, grams) SELECT rowid, cjk_grams(text) "
                  "FROM pagetext WHERE cjk_grams(text) != ''")


def _count_changes(sign: str, row: str) -> str:
    return ", ".join(f"pages_{status} = pages_{status} {sign} ({row}.status = '{status}')"
                     for status in PageStatus)


PAGE_COUNT_TRIGGERS = (
    "CREATE TRIGGER IF NOT EXISTS page_counted AFTER INSERT ON page BEGIN "
    f"UPDATE document SET {_count_changes('+', 'NEW')} WHERE id = NEW.document_id; END",
    "CREATE TRIGGER IF NOT EXISTS page_uncounted AFTER DELETE ON page BEGIN "
    f"UPDATE document SET {_count_changes('-', 'OLD')} WHERE id = OLD.document_id; END",
    "CREATE TRIGGER IF NOT EXISTS page_recounted AFTER UPDATE OF status ON page "
    "WHEN OLD.status != NEW.status BEGIN "
    f"UPDATE document SET {_count_changes('-', 'OLD')} WHERE id = OLD.document_id; "
    f"UPDATE document SET {_count_changes('+', 'NEW')} WHERE id = NEW.document_id; END",
)
# the counts of a store from before the triggers, by the migration that adds them
PAGE_COUNT_FILL = "UPDATE document SET " + ", ".join(
    f"pages_{status} = (SELECT COUNT(*) FROM page WHERE page.document_id = document.id "
    f"AND page.status = '{status}')" for status in PageStatus)
