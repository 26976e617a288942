"""`appliance bench --search N`: how fast the documents browser finds and pages through
a large store. A throw-away store of N documents (five pages each by default) is
generated with plausible text, then each kind of request the browser and
``GET /api/v1/documents`` make is timed (the median of several runs):

- the newest page of documents, and the oldest (the last page of results);
- a search for the commonest word (on nearly every page), a common one (on about one
  page in ten), a rare one, and a word that is on one page only, by date and by
  relevance;
- filters combined, and the other sort orders.

The store is written in one transaction, as intake and the workers would have
written it over months, so that it takes seconds, not hours. ``generate_store`` also
gives the browser tests their store of thousands of documents.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from sqlalchemy import text

from appliance.errors import EngineError
from appliance.store import Database
from appliance.store.grams import cjk_grams
from appliance.store.search import DocumentQuery, find_documents

RUNS = 5
TARGET_MS = 300
_SYLLABLES = ("ka", "to", "ri", "ne", "mu", "sa", "lo", "vi", "de", "pa", "gu", "fe", "zo",
              "bi", "ran", "tel", "mor", "sin", "dal", "ek")
SOURCES = ("upload", "api", "watch")
TYPES = ("generic", "invoice", "receipt", "report")
TAGS = (["finance"], ["hr", "2026"], [], ["archive"])


def unique_word(document: int, page: int) -> str:
    """The word that stands on one page of one document only."""
    return f"ref{document:05d}x{page}"


@dataclass(frozen=True)
class GeneratedStore:
    documents: int
    pages: int
    seconds: float  # to write it


def _vocabulary(seed: int, size: int = 4000) -> list[str]:
    """Made-up words; the first is the most common in the generated text, the last the
    rarest."""
    rng = random.Random(seed)
    words = set()
    while len(words) < size:
        words.add("".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))))
    return sorted(words)


PageText = Callable[[random.Random, int, int], str]  # (rng, document, page) -> its text


def made_up_words(seed: int = 7, words_per_page: int = 180) -> PageText:
    """Pages of made-up words (a Zipf mix) with ``unique_word`` on each."""
    vocabulary = _vocabulary(seed)
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]  # Zipf: a few common words

    def page_text(rng: random.Random, document: int, page: int) -> str:
        words = rng.choices(vocabulary, weights, k=words_per_page)
        words.insert(rng.randrange(len(words)), unique_word(document, page))
        return " ".join(words)
    return page_text


def generate_store(db: Database, documents: int, pages_per_document: int = 5,
                   words_per_page: int = 180, seed: int = 7, now: float | None = None,
                   page_text: PageText | None = None) -> GeneratedStore:
    """Add ``documents`` finished documents (a few failed, in review or queued pages
    among them) with searchable text (``page_text``'s, by default ``made_up_words``);
    document ``i`` is named ``scan-<i>.pdf`` and its page ``p`` holds
    ``unique_word(i, p)``. Newer documents have higher ``i``."""
    page_text = page_text or made_up_words(seed, words_per_page)
    rng = random.Random(seed + 1)
    now = now or time.time()
    start = time.perf_counter()
    docs, pages, results, index = [], [], [], []
    page_id = result_id = 0
    for i in range(documents):
        doc_id = uuid.UUID(int=rng.getrandbits(128)).hex
        created = now - (documents - i) * 60.0
        docs.append({"id": doc_id, "name": f"scan-{i:05d}.pdf", "sha256": f"{i:064x}",
                     "kind": "pdf", "size": 40_000 * pages_per_document,
                     "pages": pages_per_document, "source": SOURCES[i % 3], "lane": "batch",
                     "doc_type": TYPES[i % 4], "tags": repr(TAGS[i % 4]).replace("'", '"'),
                     "created": created,
                     "folder": "scans" if SOURCES[i % 3] == "watch" else None})
        for p in range(pages_per_document):
            page_id += 1
            roll = rng.random()
            status = ("failed" if roll < 0.02 else "review" if roll < 0.04
                      else "queued" if i >= documents - 3 else "done")
            body = page_text(rng, i, p)
            result = None
            if status in ("done", "review"):
                result_id += 1
                result = result_id
                results.append({"id": result_id, "page": page_id, "text": body,
                                "engine": "classic" if i % 5 else "llama",
                                "finished": created + 30, "confidence": 0.5 + rng.random() / 2})
                index.append({"id": page_id, "text": body, "grams": cjk_grams(body)})
            pages.append({"id": page_id, "doc": doc_id, "index": p, "status": status,
                          "attempts": 0 if status == "queued" else 1, "result": result,
                          "code": EngineError.code if status == "failed" else None,
                          "updated": created + 30})
    with db.write() as session:
        session.execute(text(
            "INSERT INTO document (id, name, sha256, kind, size_bytes, page_count, source, "
            "lane, doc_type, tags, created_at, watch_folder) VALUES (:id, :name, :sha256, "
            ":kind, :size, :pages, :source, :lane, :doc_type, :tags, :created, :folder)"), docs)
        session.execute(text(
            'INSERT INTO page (id, document_id, "index", status, attempts, not_before, '
            "result_id, error_code, updated_at, crash_suspect, born_digital) VALUES (:id, :doc, "
            ":index, :status, :attempts, 0, :result, :code, :updated, 0, 0)"), pages)
        session.execute(text(
            "INSERT INTO pageresult (id, page_id, attempt, outcome, engine, model_id, text, "
            "markdown, confidence, finished_at) VALUES (:id, :page, 1, 'ok', :engine, "
            "'generated', :text, :text, :confidence, :finished)"), results)
        session.execute(text("INSERT INTO pagetext (rowid, text) VALUES (:id, :text)"), index)
        if grams := [row for row in index if row["grams"]]:
            session.execute(text("INSERT INTO pagegrams (rowid, grams) VALUES (:id, :grams)"),
                            grams)
    return GeneratedStore(documents, len(pages), time.perf_counter() - start)


def run_search_bench(documents: int, pages_per_document: int = 5) -> dict:
    """Generate the store in a temporary directory and time the browser's requests."""
    with tempfile.TemporaryDirectory(prefix="search-bench-") as tmp:
        db = Database(Path(tmp) / "bench.db")
        try:
            store = generate_store(db, documents, pages_per_document)
            vocabulary = _vocabulary(seed=7)
            # the most frequent word is on nearly every page, like "the"; the 190th on
            # about one in ten, like "invoice" in a back office's archive
            commonest, common, rare = vocabulary[0], vocabulary[190], vocabulary[-1]
            middle = documents // 2
            requests = {
                "newest 50": DocumentQuery(),
                "oldest 50 (last page)": DocumentQuery(offset=max(documents - 50, 0)),
                f"search the commonest word '{commonest}' by date": DocumentQuery(q=commonest),
                f"search the commonest word '{commonest}' by relevance": DocumentQuery(
                    q=commonest, sort="relevance"),
                f"search a common word '{common}' by date": DocumentQuery(q=common),
                f"search a common word '{common}' by relevance": DocumentQuery(
                    q=common, sort="relevance"),
                f"search rare word '{rare}'": DocumentQuery(q=rare, sort="relevance"),
                "search a word on one page": DocumentQuery(q=unique_word(middle, 2)),
                "search by name prefix": DocumentQuery(q=f"scan-{middle:05d}"),
                "filters: done + invoice + tag + since": DocumentQuery(
                    status=("done",), doc_type="invoice", tag="hr",
                    since=time.time() - documents * 30.0),
                "status review": DocumentQuery(status=("review",)),
                "sorted by name, page 10": DocumentQuery(sort="name", offset=450),
                "sorted by status": DocumentQuery(sort="status"),
                "search + filter + page 3": DocumentQuery(q=common, source="watch", offset=100),
            }
            timings = {}
            for label, query in requests.items():
                runs, found = [], None
                for _ in range(RUNS):
                    start = time.perf_counter()
                    found = find_documents(db, query)
                    runs.append((time.perf_counter() - start) * 1000)
                timings[label] = {"median_ms": round(statistics.median(runs), 1),
                                  "max_ms": round(max(runs), 1), "total": found.total,
                                  "shown": len(found.documents)}
            db_bytes = Path(tmp, "bench.db").stat().st_size
        finally:
            db.close()
    return {"documents": store.documents, "pages": store.pages,
            "generate_s": round(store.seconds, 1), "db_mb": round(db_bytes / 2**20, 1),
            "target_ms": TARGET_MS, "requests": timings,
            "within_target": all(t["median_ms"] < TARGET_MS for t in timings.values())}


def format_search_report(report: dict) -> str:
    lines = [f"{report['documents']} documents, {report['pages']} pages, store "
             f"{report['db_mb']} MB (generated in {report['generate_s']} s); median of "
             f"{RUNS} runs, target < {report['target_ms']} ms", "",
             "| request | median ms | max ms | matches |", "| --- | --- | --- | --- |"]
    for label, t in report["requests"].items():
        lines.append(f"| {label} | {t['median_ms']} | {t['max_ms']} | {t['total']} |")
    lines.append("")
    lines.append("all within target" if report["within_target"] else "NOT all within target")
    return "\n".join(lines)
