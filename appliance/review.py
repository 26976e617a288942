"""Review queue operations: what the console and the CLI do with pages in review.

Pages reach review when routing gave reasons (low confidence, the sample, an
always-reviewed type, a missing required field). A reviewer opens the next page,
which locks it for ``review.lock_minutes``, and approves it, corrects it, rejects it
as unreadable, has it read again (higher resolution or the other engine) or skips it.
Every action is one store transaction with its audit row (who, when, before, after);
a document whose last page leaves review is finished (exported, disposed of,
notified) at once, and a correction refreshes an earlier export.

Every correction is training data: ``export_jsonl`` writes (page image, machine text,
corrected text, reasons) records for fine-tuning.
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, TextIO

import numpy as np
from sqlmodel import select

from appliance.config import Settings
from appliance.engines import registry
from appliance.errors import InvalidRequest, NotFound
from appliance.fields.validate import INVALID, MISSING
from appliance.intake.spool import Spool
from appliance.pipeline.document import document_page
from appliance.pipeline.read import reordered
from appliance.quality.confidence import classic_scale
from appliance.quality.markdown import markdown_to_text
from appliance.quality.routing import review_reasons
from appliance.raster import ON_DEMAND, PAGE_IMAGE, render_dpi, write_page_image
from appliance.raster.preprocess import to_original
from appliance.reading.markdown import layout_blocks
from appliance.store import Database, queries, reviews
from appliance.store.models import Document, FieldSet, Page, PageResult
from appliance.store.reviews import ReviewFilter

log = logging.getLogger(__name__)

# A line whose score on the page confidence's scale (quality.confidence.classic_scale) is
# under this, or a token whose probability is under this, is highlighted for the reviewer.
HIGHLIGHT_BELOW = 0.8
TURNS = (90, 180, 270)  # a reviewer's turns of a page, clockwise


@dataclass
class ReviewItem:
    """One page waiting for review, as the queue lists it."""

    page_id: int
    document_id: str
    document_name: str
    page_number: int
    page_count: int
    doc_type: str
    folder: str | None
    reasons: list[str]
    confidence: float | None
    waiting_since: float | None
    locked_by: str | None
    locked_until: float | None = None  # while locked_by holds it


def why_here(reasons: list[str] | None, fields: FieldSet | None = None) -> list[str]:
    """Why a page waits for review, as it stands now: the review reasons routing gave
    it, with those about the document's key fields as their newest reading (``fields``)
    has them, for a reviewer's corrections check the fields again. Only the page whose
    reading checked the fields has such reasons."""
    waiting = review_reasons(reasons)
    if fields is None:
        return waiting
    names = {f["name"] for f in fields.fields}

    def about_fields(reason: str) -> bool:
        code, _, detail = reason.partition(": ")
        return code in (MISSING, INVALID) and detail.split(": ", 1)[0] in names

    others = [reason for reason in waiting if not about_fields(reason)]
    if len(others) == len(waiting):
        return waiting
    return others + review_reasons(fields.reasons)


@dataclass
class ReviewPage:
    """A page opened for review: everything the console shows beside the image."""

    item: ReviewItem
    markdown: str
    image_path: Path | None  # the page as the engine read it
    engine: str | None
    signals: dict
    highlights: list[dict]  # low-confidence lines or tokens: text, score, box (or None)
    other_pages: list[dict] = field(default_factory=list)  # number, status, confidence, text
    # the affine (a, b, c, d, e, f: x' = ax + by + c, y' = dx + ey + f) from the page as
    # rendered, where key fields' evidence boxes are, to ``image_path``'s pixels (the page
    # after preprocessing cropped, turned or scaled it); None without a reading
    to_image: tuple[float, ...] | None = None
    # the machine reading's blocks in reading order (``reading.markdown.layout_blocks``:
    # order, box in the image's pixels, roles), which the reviewer may reorder
    blocks: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        body = asdict(self)
        body["image_path"] = str(self.image_path) if self.image_path else None
        return body


def _item(page: Page, doc: Document, result: PageResult | None,
          fields: FieldSet | None = None) -> ReviewItem:
    locked = page.review_owner if (page.review_lock_expires_at or 0) > time.time() else None
    return ReviewItem(page.id, doc.id, doc.name, page.index + 1, doc.page_count, doc.doc_type,
                      doc.watch_folder, why_here(result.reasons if result else [], fields),
                      result.confidence if result else None, page.review_since, locked,
                      page.review_lock_expires_at if locked else None)


def highlights(result: PageResult) -> list[dict]:
    """What the reviewer should look at first: lines the classic reader was unsure of,
    or runs of tokens the vision model chose with low probability. A line's score is
    given on the page confidence's scale: RapidOCR's own scores sit just under 1, and a
    page of lines at 0.95 is routed at about 0.5 with no line under 0.8 on their scale."""
    if result.lines and not result.tokens:
        scored = [(line, round(classic_scale(line["score"]), 3)) for line in result.lines]
        return [{"text": line["text"], "score": score, "box": line["box"]}
                for line, score in scored if score < HIGHLIGHT_BELOW]
    marked, run, low = [], [], []
    for token in result.tokens or []:
        probability = math.exp(token["lp"])
        if probability < HIGHLIGHT_BELOW:
            run.append(token["t"])
            low.append(probability)
        elif run:
            marked.append({"text": "".join(run).strip(), "score": round(min(low), 3),
                           "box": None})
            run, low = [], []
    if run:
        marked.append({"text": "".join(run).strip(), "score": round(min(low), 3), "box": None})
    return [m for m in marked if m["text"]]


class ReviewService:
    def __init__(self, settings: Settings, db: Database, spool: Spool,
                 on_settled: Callable[[str], None], wake: Callable[[], None]):
        self.settings = settings
        self.db = db
        self.spool = spool
        self.on_settled = on_settled  # a document left review: finish it
        self.wake = wake  # a page was queued again: tell the dispatcher

    @property
    def lock_s(self) -> float:
        return self.settings.review.lock_minutes * 60

    def queue(self, where: ReviewFilter = ReviewFilter(), limit: int = 200) -> list[ReviewItem]:
        return [_item(*row) for row in reviews.waiting_pages(self.db, where, limit)]

    def counts(self) -> dict:
        return reviews.review_counts(self.db)

    def fields(self, document_id: str) -> FieldSet | None:
        """The newest reading of the document's key fields, for the form beside its page."""
        return queries.latest_fields(self.db, document_id)

    def next_page(self, reviewer: str, where: ReviewFilter = ReviewFilter(),
                  leaving: int | None = None) -> ReviewPage | None:
        """Lock the oldest highest-priority free page for ``reviewer`` and open it; the
        page they are ``leaving`` is freed unless it is that one."""
        page_id = reviews.claim_review(self.db, reviewer, self.lock_s, where, leaving)
        return self.open_page(page_id) if page_id is not None else None

    def open_page(self, page_id: int) -> ReviewPage:
        with self.db.read() as session:
            page = session.get(Page, page_id)
            if page is None:
                raise NotFound(f"no page with id {page_id}")
            doc = session.get(Document, page.document_id)
            result = session.get(PageResult, page.result_id) if page.result_id else None
            siblings = [(p, session.get(PageResult, p.result_id) if p.result_id else None)
                        for p in session.exec(select(Page).where(Page.document_id == doc.id)
                                              .order_by(Page.index)) if p.id != page.id]
        image = page_image(self.spool, self.settings, doc, page, result)
        result = self._as_rendered(page, result)
        return ReviewPage(
            item=_item(page, doc, result, self.fields(doc.id)),
            markdown=result.markdown or "" if result else "",
            image_path=image if image.exists() else None,
            engine=result.engine if result else None,
            signals=result.signals or {} if result else {},
            highlights=highlights(result) if result else [],
            other_pages=[{"number": p.index + 1, "status": p.status,
                          "confidence": r.confidence if r else None,
                          "text": (r.text or "") if r else ""} for p, r in siblings],
            to_image=rendered_to_image(result) if result else None,
            blocks=layout_blocks(result.lines or []) if result else [])

    def reordered(self, page_id: int, order: list[int]) -> str:
        """The Markdown of the page's machine reading with its blocks read in ``order``
        (their numbers in ``ReviewPage.blocks``), for the reviewer to check and save as
        a correction. InvalidRequest unless it names each block once."""
        with self.db.read() as session:
            page = session.get(Page, page_id)
            result = session.get(PageResult, page.result_id) if page and page.result_id else None
        if result is None:
            raise NotFound(f"no reading of page {page_id} to reorder")
        result = self._as_rendered(page, result)
        try:
            return reordered(result.lines or [], result.provenance or {}, order,
                             self.settings.output.page_furniture).markdown
        except ValueError as exc:
            raise InvalidRequest(str(exc)) from None

    def _as_rendered(self, page: Page, result: PageResult | None) -> PageResult | None:
        """The page's reading as the document's results render it: read with its
        neighbours (``pipeline.document``), so that a running header only the document
        shows is furniture in the console too, and a correction starts from it."""
        if result is None:
            return None
        found = document_page(self.db, page.document_id, page.index,
                              self.settings.output.page_furniture)
        return found[1] if found is not None and found[1] is not None else result

    def approve(self, reviewer: str, page_id: int) -> None:
        self._settled(reviews.approve(self.db, page_id, reviewer))

    def correct(self, reviewer: str, page_id: int, markdown: str) -> None:
        self._settled(reviews.correct(self.db, page_id, reviewer, markdown,
                                      markdown_to_text(markdown)))

    def reject(self, reviewer: str, page_id: int, note: str = "") -> None:
        self._settled(reviews.reject(self.db, page_id, reviewer, note))

    def rerun(self, reviewer: str, page_id: int, *, engine: str | None = None,
              higher_resolution: bool = False, turn_deg: int | None = None,
              held: bool = True) -> None:
        """Read the page again: with ``engine``, a resolution higher than its last, or
        turned ``turn_deg`` degrees clockwise from how it was last shown (90, 180, 270),
        which replaces the orientation the machine chose. ``held``: the reviewer holds
        the page's lock; else any page read to an end (``reviews.rerun``)."""
        options: dict = {}
        if engine:
            if engine not in registry.names():
                raise InvalidRequest(f"engine '{engine}' is unknown; use "
                                     f"{' or '.join(registry.names())}")
            options["engine"] = engine
        if higher_resolution:
            options["resolution_boost"] = self._options(page_id).get("resolution_boost", 0) + 1
        if turn_deg is not None:
            if turn_deg not in TURNS:
                raise InvalidRequest(f"a page turns by 90, 180 or 270 degrees, not {turn_deg}")
            options["turn_deg"] = (self._turned(page_id) + turn_deg) % 360
        if not options:
            raise InvalidRequest("a rerun needs another engine, a higher resolution or a turn")
        reviews.rerun(self.db, page_id, reviewer, options, held)
        self.wake()

    def turn(self, person: str, document_id: str, number: int, turn_deg: int) -> None:
        """Page ``number`` (1 for the first) of the document turned ``turn_deg`` degrees
        clockwise from how it was last shown, and read again: the review console's turn,
        from the document view or the REST API, where nobody holds the page's lock. A
        page done or failed is read again as well as one waiting for review; one
        queued or being read is refused (PageBusy), as is one another reviewer holds."""
        page_id = queries.page_id(self.db, document_id, number - 1)
        if page_id is None:
            raise NotFound(f"document {document_id} has no page {number}")
        self.rerun(person, page_id, turn_deg=turn_deg, held=False)

    def _turned(self, page_id: int) -> int:
        """How far clockwise the page as it came was turned for its last reading: the
        reviewer's turn, else the orientation step's (its record says counter-clockwise)."""
        with self.db.read() as session:
            page = session.get(Page, page_id)
            result = session.get(PageResult, page.result_id) if page and page.result_id else None
        if page is None:
            raise NotFound(f"no page with id {page_id}")
        if "turn_deg" in (page.options or {}):
            return page.options["turn_deg"]
        steps = ((result.provenance or {}).get("preprocess") or []) if result else []
        rotated = next((step["detail"].get("rotated_deg", 0) for step in steps
                        if step.get("step") == "orientation"), 0)
        return (360 - rotated) % 360

    def skip(self, reviewer: str, page_id: int) -> None:
        reviews.skip(self.db, page_id, reviewer)

    def _options(self, page_id: int) -> dict:
        with self.db.read() as session:
            page = session.get(Page, page_id)
        if page is None:
            raise NotFound(f"no page with id {page_id}")
        return page.options or {}

    def _settled(self, document_id: str) -> None:
        try:
            self.on_settled(document_id)
        except Exception:  # the action stands; the scheduler's finish job retries
            log.exception("finishing after review failed doc=%s", document_id)


def rendered_to_image(result: PageResult) -> tuple[float, ...]:
    """The affine from the rendered page's pixels to those of the page the engine read
    (the inverse of ``to_original`` over the preprocessing steps the reading records)."""
    steps = (result.provenance or {}).get("preprocess") or []
    forward = np.linalg.inv(to_original(steps))
    return tuple(round(float(v), 6) for v in forward[:2].ravel())


def page_image(spool: Spool, settings: Settings, doc: Document, page: Page,
               result: PageResult | None) -> Path:
    """Where the worker kept the page as its accepted ``result`` read it: at the DPI the
    result records. A result stored before readings recorded it (or none yet) falls
    back to the DPI the settings give now. A page whose image the worker left to be
    made on demand (read from its own text) has it rendered here, the first time."""
    provenance = (result.provenance or {}) if result is not None else {}
    dpi = provenance.get("page_image_dpi")
    if dpi is None:
        dpi = render_dpi(settings.raster.pdf_dpi, (page.options or {}).get("resolution_boost", 0))
    path = spool.page_image_path(doc.sha256, page.index, dpi)
    if provenance.get(PAGE_IMAGE) == ON_DEMAND and doc.kind and not path.exists():
        write_page_image(spool.original_path(doc.sha256), doc.kind, page.index, dpi,
                         settings.limits.max_pixels, settings.pdf_password(doc.watch_folder),
                         path)
    return path


def export_jsonl(db: Database, spool: Spool, settings: Settings, out: TextIO) -> int:
    """One JSON line per reviewed page (approved or corrected): the training record of
    the data flywheel. Returns the number of records written."""
    count = 0
    for action, page, doc, machine in reviews.review_actions(db):
        corrected = action.after_markdown or ""
        image = page_image(spool, settings, doc, page, machine)
        out.write(json.dumps({
            "page_image": str(image) if image.exists() else None,
            "document_id": doc.id, "document_name": doc.name, "page_number": page.index + 1,
            "doc_type": doc.doc_type, "engine": machine.engine, "model_id": machine.model_id,
            "machine_text": machine.text or "", "machine_markdown": machine.markdown or "",
            # an approval says the machine's text was right as it stands
            "corrected_text": (machine.text or "" if action.action == "approve"
                               else markdown_to_text(corrected)),
            "corrected_markdown": corrected,
            "action": action.action, "reviewer": action.reviewer, "reviewed_at": action.at,
            "reasons": action.reasons or [], "confidence": machine.confidence,
        }, ensure_ascii=False) + "\n")
        count += 1
    return count
