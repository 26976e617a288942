"""`appliance bench --search-cjk PAGES`: how well, how fast and at what size the
search finds Chinese text. A throw-away store of PAGES pages (five a document) of
made-up Chinese (words of one to four characters, a Zipf mix, in sentences), then:

- precision and recall of substrings of two, three, four and six characters taken
  from the pages, against the pages that hold them (Python's ``in``): by the pairs
  index (``pagegrams``, what the search uses), by the word index alone (what it used
  before), and by FTS5's trigram tokenizer (the other way considered);
- the time a search takes (the documents browser's request: the first 50 documents,
  with their snippets) by length;
- the size of each index (SQLite's dbstat).
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from pathlib import Path

from sqlalchemy import text

from appliance.measure.search_bench import generate_store
from appliance.store import Database
from appliance.store.search import DocumentQuery, find_documents

PAGES_PER_DOCUMENT = 5
CHARACTERS_PER_PAGE = 400
LENGTHS = (2, 3, 4, 6)
QUERIES_PER_LENGTH = 30
RUNS = 3
_FIRST, _CHARACTERS = 0x4E00, 2500  # 2,500 ideographs from the start of the CJK block


def made_up_chinese(seed: int = 11):
    rng = random.Random(seed)
    words = sorted({"".join(chr(_FIRST + rng.randrange(_CHARACTERS))
                            for _ in range(rng.choice((1, 2, 2, 2, 3, 4))))
                    for _ in range(6000)})
    rng.shuffle(words)
    weights = [1 / (rank + 1) for rank in range(len(words))]

    def page_text(rng: random.Random, document: int, page: int) -> str:
        sentences, length = [], 0
        while length < CHARACTERS_PER_PAGE:
            sentence = "".join(rng.choices(words, weights, k=rng.randint(4, 12)))
            sentences.append(sentence + rng.choice("，。；"))
            length += len(sentence) + 1
        return f"第{document}号 " + "".join(sentences)
    return page_text


def _sizes(session) -> dict[str, float]:
    rows = session.execute(text(
        "SELECT CASE WHEN name LIKE 'pagegrams%' THEN 'pagegrams' WHEN name LIKE "
        "'pagetext%' THEN 'pagetext' WHEN name LIKE 'trigrams%' THEN 'trigrams' "
        "ELSE 'other' END AS part, SUM(pgsize) FROM dbstat GROUP BY part")).all()
    return {part: round(size / 2**20, 1) for part, size in rows}


def _score(found: set, truth: set) -> tuple[float, float]:
    hits = len(found & truth)
    return (hits / len(found) if found else 1.0, hits / len(truth) if truth else 1.0)


def run_cjk_bench(pages: int) -> dict:
    documents = max(1, pages // PAGES_PER_DOCUMENT)
    with tempfile.TemporaryDirectory(prefix="cjk-bench-") as tmp:
        db = Database(Path(tmp) / "bench.db")
        try:
            store = generate_store(db, documents, PAGES_PER_DOCUMENT,
                                   page_text=made_up_chinese())
            with db.write() as session:  # the trigram index, for the comparison only
                session.execute(text("CREATE VIRTUAL TABLE trigrams USING fts5(text, "
                                     "tokenize = 'trigram')"))
                session.execute(text("INSERT INTO trigrams (rowid, text) "
                                     "SELECT rowid, text FROM pagetext"))
            with db.read() as session:
                texts = dict(session.execute(text(
                    "SELECT p.id, r.text FROM pagetext AS t JOIN page AS p ON p.id = t.rowid "
                    "JOIN pageresult AS r ON r.id = p.result_id")).all())
                doc_of = dict(session.execute(text("SELECT id, document_id FROM page")).all())
                sizes = _sizes(session)
            rng = random.Random(3)
            ids = sorted(texts)
            by_length = {}
            for length in LENGTHS:
                scores = {"pairs": [], "words": [], "trigrams": []}
                times = []
                for _ in range(QUERIES_PER_LENGTH):
                    body = texts[rng.choice(ids)]
                    start = rng.randrange(len(body) - length)
                    query = body[start:start + length]
                    while not query.isalpha():  # a substring of one run, no punctuation
                        start = rng.randrange(len(body) - length)
                        query = body[start:start + length]
                    truth = {doc_of[page] for page, page_text in texts.items()
                             if query in page_text}
                    runs = []
                    for _ in range(RUNS):  # the browser's request: its first 50
                        began = time.perf_counter()
                        find_documents(db, DocumentQuery(q=query))
                        runs.append((time.perf_counter() - began) * 1000)
                    times.append(statistics.median(runs))
                    found = find_documents(db, DocumentQuery(q=query, limit=100_000))
                    scores["pairs"].append(_score({v.doc.id for v in found.documents}, truth))
                    with db.read() as session:
                        for name, table in (("words", "pagetext"), ("trigrams", "trigrams")):
                            pages_found = session.execute(text(
                                f"SELECT rowid FROM {table} WHERE {table} MATCH :q"),
                                {"q": f'"{query}"'}).scalars().all()
                            scores[name].append(_score({doc_of[p] for p in pages_found},
                                                       truth))
                by_length[length] = {
                    "median_ms": round(statistics.median(times), 1),
                    "max_ms": round(max(times), 1),
                    **{f"{name}_precision": round(statistics.mean(p for p, _ in s), 3)
                       for name, s in scores.items()},
                    **{f"{name}_recall": round(statistics.mean(r for _, r in s), 3)
                       for name, s in scores.items()}}
        finally:
            db.close()
    return {"pages": store.pages, "documents": store.documents,
            "characters_per_page": CHARACTERS_PER_PAGE, "index_mb": sizes,
            "queries_per_length": QUERIES_PER_LENGTH, "by_length": by_length}


def format_cjk_report(report: dict) -> str:
    sizes = report["index_mb"]
    lines = [f"{report['pages']} pages of about {report['characters_per_page']} Chinese "
             f"characters ({report['documents']} documents); indexes: words (pagetext) "
             f"{sizes.get('pagetext')} MB, pairs (pagegrams) {sizes.get('pagegrams')} MB, "
             f"trigrams (for comparison) {sizes.get('trigrams')} MB; "
             f"{report['queries_per_length']} substrings of each length", "",
             "| characters | search median ms | max ms | pairs precision / recall | "
             "words alone | trigrams |", "| --- | --- | --- | --- | --- | --- |"]
    for length, row in report["by_length"].items():
        lines.append(
            f"| {length} | {row['median_ms']} | {row['max_ms']} | {row['pairs_precision']} "
            f"/ {row['pairs_recall']} | {row['words_precision']} / {row['words_recall']} | "
            f"{row['trigrams_precision']} / {row['trigrams_recall']} |")
    return "\n".join(lines)
