"""`appliance bench --searchable-pdf FILE...`: what the searchable PDF costs and gives on
real scans. Each file is read by the appliance (a throw-away data directory, the
configured engine, review off); then, per file:

- its size against the original's;
- the time making the PDF adds per page (the second of two runs, so that imports
  and font loading are not counted);
- the recall of the accepted text in the PDF's text layer: the share of the accepted
  words (as a multiset) that the extracted text holds, extracted by ``pdftotext``
  (poppler-utils) where it is installed, else by pdfium.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

from appliance.config import Settings

POLL_S = 0.2
READ_TIMEOUT_S = 600


def extracted_text(data: bytes) -> tuple[str, str]:
    """The PDF's text and the tool that extracted it."""
    if shutil.which("pdftotext"):
        with tempfile.NamedTemporaryFile(suffix=".pdf") as pdf:
            pdf.write(data)
            pdf.flush()
            run = subprocess.run(["pdftotext", "-layout", pdf.name, "-"], capture_output=True,
                                 text=True, check=True)
            return run.stdout, "pdftotext"
    import pypdfium2 as pdfium

    document = pdfium.PdfDocument(data)
    try:
        return "\n".join(page.get_textpage().get_text_range() for page in document), "pdfium"
    finally:
        document.close()


def word_recall(accepted: str, extracted: str) -> tuple[int, int]:
    """(accepted words found in the extracted text, accepted words), each word counted
    as often as it occurs."""
    have = Counter(re.findall(r"\S+", extracted))
    words = re.findall(r"\S+", accepted)
    found = 0
    for word in words:
        if have[word] > 0:
            have[word] -= 1
            found += 1
    return found, len(words)


def run_pdf_bench(settings: Settings, files: list[Path]) -> list[dict]:
    from appliance.daemon import Appliance
    from appliance.intake import SubmitOptions
    from appliance.store import queries

    with tempfile.TemporaryDirectory(prefix="appliance-pdf-bench-") as tmp:
        paths = replace(settings.paths, data_dir=Path(tmp) / "data",
                        output_dir=Path(tmp) / "output")
        appliance = Appliance(replace(settings, paths=paths,
                                      review=replace(settings.review, enabled=False)))
        appliance.start()
        try:
            docs = [appliance.submit_path(path, SubmitOptions(source="cli")) for path in files]
            deadline = time.monotonic() + READ_TIMEOUT_S
            while not all(queries.get_document(appliance.db, d.id).is_final for d in docs):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the files were not read within {READ_TIMEOUT_S} s")
                time.sleep(POLL_S)
            rows = []
            for path, doc in zip(files, docs):
                appliance.exporter.pdf(doc.id)  # warm: imports, fonts
                started = time.perf_counter()
                data = appliance.exporter.pdf(doc.id)
                seconds = time.perf_counter() - started
                text, tool = extracted_text(data)
                accepted = appliance.exporter.rendered(doc.id, ["txt"])["txt"]
                found, words = word_recall(accepted, text)
                rows.append({"file": path.name, "pages": doc.page_count,
                             "original_bytes": path.stat().st_size, "pdf_bytes": len(data),
                             "ms_per_page": 1000 * seconds / max(doc.page_count, 1),
                             "words": words, "found": found, "extractor": tool})
            return rows
        finally:
            appliance.stop()


def format_pdf_report(rows: list[dict]) -> str:
    lines = ["| file | pages | original | PDF | size | ms/page | recall (extractor) |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        recall = r["found"] / r["words"] if r["words"] else 1.0
        lines.append(f"| {r['file']} | {r['pages']} | {r['original_bytes'] / 1024:.0f} KiB | "
                     f"{r['pdf_bytes'] / 1024:.0f} KiB | x{r['pdf_bytes'] / r['original_bytes']:.2f} "
                     f"| {r['ms_per_page']:.0f} | {r['found']}/{r['words']} = {recall:.3f} "
                     f"({r['extractor']}) |")
    return "\n".join(lines)
