"""Finding documents: full-text search over the pages' text (SQLite FTS5), names, and
filters, sorted and paged in SQL.

The ``pagetext`` index holds each page's accepted text, or the machine's reading of a
page waiting for review (its hit says it is not reviewed yet), its rowid the page's
id; ``pagegrams`` holds the same pages' Chinese, Japanese and Korean text as pairs of
characters (``grams``). Both are written in the same transaction that reads a page
(``transitions``), settles a review (``reviews``) or deletes a document, so a search
never finds text that is not the page's. A document's status is derived from its pages in SQL by
the same rule as ``queries.derive_status``, from page counts that triggers keep on the
document row (``models.PAGE_COUNT_TRIGGERS``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sqlalchemy import text
from sqlmodel import Session, select

from appliance.store.db import Database
from appliance.store.grams import CJK_RUN, cjk_grams, cjk_runs, grams_query, unwrapped
from appliance.store.models import Document, DocStatus, Page
from appliance.store.queries import DocumentView, page_counts

# the snippet's marks around a hit: control characters no OCR text holds, so the
# snippet can be escaped whole and the marks turned into <mark> after
HIT_START, HIT_END = "\x02", "\x03"
SNIPPET_TOKENS = 16
SNIPPET_CHARS = 24  # CJK text before and after the first hit, in its snippet
SORTS = ("relevance", "date", "name", "status")

# a document's status from its page counts: queries.derive_status, in SQL
_TOTAL = "(d.pages_queued + d.pages_running + d.pages_review + d.pages_done + d.pages_failed)"
STATUS_SQL = f"""(CASE
  WHEN d.error_code IS NOT NULL THEN 'failed'
  WHEN {_TOTAL} > 0 AND d.pages_done + d.pages_failed = {_TOTAL} THEN
    CASE WHEN d.pages_failed = {_TOTAL} THEN 'failed' WHEN d.pages_failed > 0 THEN 'partial'
    ELSE 'done' END
  WHEN d.pages_review > 0 AND d.pages_queued + d.pages_running = 0 THEN 'review'
  WHEN d.pages_queued = {_TOTAL} THEN 'queued'
  ELSE 'processing' END)"""


def index_page(session: Session, page: Page, page_text: str | None) -> None:
    """The page's text (accepted, or waiting for review), in the indexes in place of what
    was there."""
    unindex_pages(session, [page.id])
    if page_text:
        session.execute(text("INSERT INTO pagetext (rowid, text) VALUES (:id, :text)"),
                        {"id": page.id, "text": page_text})
        if grams := cjk_grams(page_text):
            session.execute(text("INSERT INTO pagegrams (rowid, grams) VALUES (:id, :grams)"),
                            {"id": page.id, "grams": grams})


def unindex_pages(session: Session, page_ids: list[int]) -> None:
    for page_id in page_ids:
        for index in ("pagetext", "pagegrams"):
            session.execute(text(f"DELETE FROM {index} WHERE rowid = :id"), {"id": page_id})


@dataclass(frozen=True)
class DocumentQuery:
    """What the documents browser and ``GET /api/v1/documents`` ask for."""

    q: str = ""  # words of the accepted text or the name
    status: tuple[str, ...] = ()
    doc_type: str | None = None
    tag: str | None = None
    source: str | None = None  # upload | api | watch | cli
    folder: str | None = None  # a watched folder's name
    since: float | None = None  # created at or after (UNIX seconds)
    until: float | None = None  # created before
    engine: str | None = None  # some page's accepted reading is this engine's
    fields_invalid: bool | None = None  # its newest fields have reasons for review
    sort: str = "date"  # one of SORTS; relevance needs q
    descending: bool = True
    limit: int = 50
    offset: int = 0


@dataclass
class Hit:
    page_index: int  # 0-based: the best-matching page
    snippet: str  # plain text; the hits between HIT_START and HIT_END
    reviewed: bool = True  # False: the machine's text of a page waiting for review

    def marked(self) -> tuple[str, list[tuple[int, int]]]:
        """The snippet without its marks, and where the matched words stand in it."""
        plain, spans, start = [], [], None
        for ch in self.snippet:
            if ch == HIT_START:
                start = len(plain)
            elif ch == HIT_END and start is not None:
                spans.append((start, len(plain)))
                start = None
            else:
                plain.append(ch)
        return "".join(plain), spans


@dataclass
class DocumentPage:
    total: int  # documents that match, over all pages of results
    documents: list[DocumentView]
    hits: dict[str, Hit] = field(default_factory=dict)  # by document id, when q is given


def fts_query(words: str) -> str | None:
    """The user's words as an FTS5 query of ``pagetext``: every word must occur (as its
    stem: "invoices" finds "invoice"); FTS syntax in the input is only text. CJK runs
    are ``grams_query``'s."""
    tokens = re.findall(r"\w+", CJK_RUN.sub(" ", words))
    if not tokens:
        return None
    return " ".join('"' + token.replace('"', '""') + '"' for token in tokens)


def find_documents(db: Database, query: DocumentQuery) -> DocumentPage:
    """One page of the documents that match ``query``, in its order, with the total."""
    where, params = [], {}
    match = fts_query(query.q) if query.q else None
    grams = grams_query(query.q) if query.q else None
    source = "document AS d"
    rank = "0"
    if query.q:
        params["like"] = "%" + query.q.strip().replace("\\", "\\\\").replace("%", "\\%") \
            .replace("_", "\\_") + "%"
        name_matches = "name LIKE :like ESCAPE '\\'"
        if match or grams:
            params.update(match=match, grams=grams)
            # The hits are only rowids (page ids): reading anything else of the index costs
            # per hit. FTS5's rank function runs only in a query of the index itself, so
            # the hits are materialised first, ranked only when sorted by relevance. The
            # best page of a document is its best-ranked, or else its first (SQLite takes
            # the bare columns from the row of the MIN). Documents whose name matches join
            # them, and the documents are looked up by id from there.
            # Words are looked up in pagetext, CJK runs in pagegrams, both on one page.
            ranked = query.sort == "relevance"
            index = "pagetext" if match else "pagegrams"
            score, best_by = (f"bm25({index})", "h.r") if ranked else ("0", 'p."index"')
            both = (" AND rowid IN (SELECT rowid FROM pagegrams WHERE pagegrams MATCH :grams)"
                    if match and grams else "")
            source = (
                f"(WITH hits AS MATERIALIZED (SELECT rowid AS page_id, {score} AS r "
                f"FROM {index} WHERE {index} MATCH :{'match' if match else 'grams'}{both}), "
                'best AS MATERIALIZED (SELECT p.document_id, h.page_id, p."index" AS '
                "page_index, p.status = 'review' AS unreviewed, "
                f"MIN({best_by}) AS hit_rank FROM hits AS h JOIN page AS p ON p.id = "
                "h.page_id GROUP BY p.document_id) "
                "SELECT document_id, page_id, page_index, unreviewed, hit_rank FROM best "
                f"UNION ALL SELECT id, NULL, NULL, NULL, NULL FROM document WHERE "
                f"{name_matches} AND id NOT IN (SELECT document_id FROM best)) AS h "
                "JOIN document AS d ON d.id = h.document_id")
            # a name that matches first, then the text's rank (bm25: lower is better)
            rank = f"(CASE WHEN d.{name_matches} THEN -1e9 ELSE 0 END + COALESCE(h.hit_rank, 0))"
        else:
            where.append(f"d.{name_matches}")
    status = STATUS_SQL
    if query.status:
        names = {f"status{i}": value for i, value in enumerate(query.status)}
        params.update(names)
        where.append(f"{status} IN ({', '.join(':' + n for n in names)})")
    for column, value in (("doc_type", query.doc_type), ("source", query.source),
                          ("watch_folder", query.folder)):
        if value is not None:
            params[column] = value
            where.append(f"d.{column} = :{column}")
    if query.tag is not None:
        params["tag"] = query.tag
        where.append("EXISTS (SELECT 1 FROM json_each(d.tags) WHERE value = :tag "
                     "COLLATE NOCASE)")  # "HR" finds "hr" (SQLite folds ASCII only)
    if query.since is not None:
        params["since"] = query.since
        where.append("d.created_at >= :since")
    if query.until is not None:
        params["until"] = query.until
        where.append("d.created_at < :until")
    if query.engine is not None:
        params["engine"] = query.engine
        where.append("EXISTS (SELECT 1 FROM page AS p JOIN pageresult AS r "
                     "ON r.id = p.result_id WHERE p.document_id = d.id AND r.engine = :engine)")
    if query.fields_invalid is not None:
        newest = ("SELECT json_array_length(f.reasons) FROM fieldset AS f "
                  "WHERE f.document_id = d.id ORDER BY f.id DESC LIMIT 1")
        where.append(f"COALESCE(({newest}), 0) {'>' if query.fields_invalid else '='} 0")
        if query.fields_invalid is False:
            where.append("EXISTS (SELECT 1 FROM fieldset AS f WHERE f.document_id = d.id)")
    searched = bool(match or grams)
    by_relevance = query.sort == "relevance" and searched
    order = {"relevance": rank, "date": "d.created_at", "name": "d.name COLLATE NOCASE",
             "status": status}[query.sort if query.sort != "relevance" or searched else "date"]
    # the best rank is the lowest
    direction = "ASC" if by_relevance or not query.descending else "DESC"
    body = f"FROM {source} " + (f"WHERE {' AND '.join(where)}" if where else "")
    hit_columns = "h.page_id, h.page_index, h.unreviewed" if searched else "NULL, NULL, NULL"
    with db.read() as session:
        # the total with the rows, in one pass over the matches
        rows = session.execute(text(
            f"SELECT d.id, {status}, {hit_columns}, COUNT(*) OVER () {body} "
            f"ORDER BY {order} {direction}, d.created_at DESC, d.id "
            "LIMIT :limit OFFSET :offset"),
            {**params, "limit": query.limit, "offset": query.offset}).all()
        total = rows[0][5] if rows else \
            session.execute(text(f"SELECT COUNT(*) {body}"), params).scalar_one()
        rows = [row[:5] for row in rows]
        ids = [row[0] for row in rows]
        documents = {doc.id: doc for doc in session.exec(
            select(Document).where(Document.id.in_(ids))).all()}
        counts = page_counts(session, ids)
        shown = [row[2] for row in rows if row[2] is not None]
        snippets = (_cjk_snippets(session, query.q, shown) if grams else
                    _snippets(session, match, shown))
    views = [DocumentView(documents[doc_id], DocStatus(status_text), counts[doc_id])
             for doc_id, status_text, *_hit in rows]
    hits = {doc_id: Hit(int(index), snippets.get(page_id, ""), reviewed=not unreviewed)
            for doc_id, _status, page_id, index, unreviewed in rows if page_id is not None}
    return DocumentPage(total, views, hits)


def _shown_pages(page_ids: list[int]) -> tuple[str, dict[str, int]]:
    """The shown hits' page ids as SQL placeholders and their values."""
    return (", ".join(f":p{i}" for i in range(len(page_ids))),
            {f"p{i}": page_id for i, page_id in enumerate(page_ids)})


def _snippets(session: Session, match: str | None, page_ids: list[int]) -> dict[int, str]:
    """The snippets of the shown hits only: making one for every hit costs far more."""
    if not match or not page_ids:
        return {}
    marks, values = _shown_pages(page_ids)
    rows = session.execute(text(
        f"SELECT rowid, snippet(pagetext, 0, '{HIT_START}', '{HIT_END}', '…', "
        f"{SNIPPET_TOKENS}) FROM pagetext WHERE pagetext MATCH :match AND rowid IN ({marks})"),
        {"match": match, **values}).all()
    return dict(rows)


def _cjk_snippets(session: Session, words: str, page_ids: list[int]) -> dict[int, str]:
    """The snippets of hits of a search with CJK runs, made here (FTS5's snippet knows
    only whole runs): the text around the first run found, every run of the search in
    it marked, and the search's other words too where they stand as written."""
    if not page_ids:
        return {}
    marks, values = _shown_pages(page_ids)
    rows = session.execute(text(f"SELECT rowid, text FROM pagetext WHERE rowid IN ({marks})"),
                           values).all()
    latin = [re.escape(word) for word in re.findall(r"\w+", CJK_RUN.sub(" ", words))]
    runs = sorted(cjk_runs(words), key=len, reverse=True)
    found = re.compile("|".join([*map(re.escape, runs), *(rf"\b{word}\w*" for word in latin)]),
                       re.IGNORECASE)
    first = re.compile("|".join(map(re.escape, runs)))
    return {page_id: _snippet_around(" ".join(unwrapped(page_text).split()), first, found)
            for page_id, page_text in rows}


def _snippet_around(flat: str, first: re.Pattern, found: re.Pattern) -> str:
    at = first.search(flat)
    start = max(0, at.start() - SNIPPET_CHARS) if at else 0
    end = min(len(flat), (at.end() if at else 0) + SNIPPET_CHARS)
    window = found.sub(lambda m: f"{HIT_START}{m.group(0)}{HIT_END}", flat[start:end])
    return ("…" if start else "") + window + ("…" if end < len(flat) else "")
