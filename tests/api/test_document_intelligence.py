"""The Document Intelligence API through Microsoft's own SDK (azure-ai-documentintelligence
1.0.2), against a real daemon on loopback: the exact calls paperless-ngx makes, the
layout, receipt and invoice models, review, errors and many pollers at once."""

from __future__ import annotations

import http.server
import json
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from azure.ai.documentintelligence import DocumentIntelligenceClient
from azure.ai.documentintelligence.models import (
    AnalyzeDocumentRequest, AnalyzeOutputOption, AnalyzeResult, DocumentContentFormat,
)
from azure.core.credentials import AzureKeyCredential
from azure.core.exceptions import ClientAuthenticationError, HttpResponseError

from appliance.config import Settings
from appliance.intake.spool import Spool
from appliance.measure.synthetic_sets import make_sets
from appliance.review import ReviewService
from appliance.security import ApiKeys
from appliance.store import Database
from appliance.users import Users
from tests.daemon import Daemon
from tests.fixtures.documents import (
    write_jpeg, write_multipage_tiff, write_pdf, write_png,
)

POLL_S = 0.05  # the SDK's polling interval here (paperless-ngx keeps its default, 1 s)
WAIT_S = 120  # no analysis here may take longer: a poller that hangs fails the test
MAX_PAGES = 3


def start(tmp: Path, review: dict | None = None, **sections) -> tuple[Daemon, str]:
    """A daemon with auth on (one API key, returned; a reviewer account) and the given
    config sections."""
    keys_file = tmp / "api-keys.toml"
    key = ApiKeys(keys_file).add("paperless")
    users_file = tmp / "users.toml"
    Users(users_file).add("anna", "reviewer", "a long enough password")
    daemon = Daemon(tmp, auth={"api_keys_file": str(keys_file), "rate_per_minute": 100_000},
                    review={"users_file": str(users_file), **(review or {})}, **sections)
    daemon.client.headers["X-API-Key"] = key
    daemon.start()
    daemon.wait_ready()
    return daemon, key


def sdk(daemon: Daemon, key: str) -> DocumentIntelligenceClient:
    return DocumentIntelligenceClient(f"http://127.0.0.1:{daemon.port}", AzureKeyCredential(key),
                                      polling_interval=POLL_S)


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("docintel")
    daemon, key = start(tmp, limits={"max_pages": MAX_PAGES}, di={"retry_after_s": 0},
                        webhooks={"allow_hosts": ["127.0.0.1"]})
    try:
        yield daemon, sdk(daemon, key)
    finally:
        daemon.stop()


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("pages")
    make_sets(root, pages=1)
    return root


def paperless(client: DocumentIntelligenceClient, path: Path) -> tuple[str, AnalyzeResult, bytes]:
    """What paperless-ngx's remote parser does with a file (src/paperless_remote/parsers.py):
    the result id, the result, and the searchable PDF it archives."""
    with path.open("rb") as f:
        request = AnalyzeDocumentRequest(bytes_source=f.read())
    poller = client.begin_analyze_document(
        model_id="prebuilt-read", body=request,
        output_content_format=DocumentContentFormat.TEXT, output=[AnalyzeOutputOption.PDF],
        content_type="application/json")
    poller.wait(WAIT_S)  # paperless-ngx waits without a limit
    assert poller.done(), "the analysis did not finish"
    result_id = poller.details["operation_id"]
    result = poller.result()
    pdf = b"".join(client.get_analyze_result_pdf(model_id="prebuilt-read", result_id=result_id))
    return result_id, result, pdf


def pdf_text(pdf: bytes, tmp: Path) -> str:
    path = tmp / "archive.pdf"
    path.write_bytes(pdf)
    return subprocess.run(["pdftotext", str(path), "-"], capture_output=True, text=True,
                          check=True).stdout


def appliance_text(daemon: Daemon, document_id: str) -> str:
    """The appliance's own text of the document (its pages apart by a form feed)."""
    response = daemon.client.get(f"/api/v1/documents/{document_id}/result",
                                 params={"format": "txt"})
    assert response.status_code == 200, response.text
    return response.text.rstrip("\n").replace("\f", "\n")


@pytest.mark.parametrize("kind", ["pdf", "jpeg", "tiff", "multipage-pdf"])
def test_the_paperless_ngx_call_sequence(service, tmp_path, kind):
    daemon, client = service
    lines = [["Quarterly report of the archive", "Invoices filed 2024"],
             ["Second page holds minutes", "Board meeting March"],
             ["Third page lists members", "Treasurer signed here"]]
    path = {"pdf": lambda p: write_pdf(p, lines[:1]),
            "jpeg": lambda p: write_jpeg(p, lines[0]),
            "tiff": lambda p: write_multipage_tiff(p, lines[:2]),
            "multipage-pdf": lambda p: write_pdf(p, lines)}[kind](tmp_path / f"scan.{kind}")
    result_id, result, pdf = paperless(client, path)
    assert result.model_id == "prebuilt-read" and result.content_format == "text"
    assert result.content == appliance_text(daemon, result_id)
    pages = {"pdf": 1, "jpeg": 1, "tiff": 2, "multipage-pdf": 3}[kind]
    assert [p.page_number for p in result.pages] == list(range(1, pages + 1))
    for page, page_lines in zip(result.pages, lines):
        assert page.unit == ("inch" if kind.endswith("pdf") else "pixel")
        words = [w.content for w in page.words]
        assert words == " ".join(page_lines).split()
        for word in page.words:  # each word's span is where the content holds it
            assert result.content[word.span.offset:][:word.span.length] == word.content
            assert 0 < word.confidence <= 1 and len(word.polygon) == 8
            assert all(0 <= x <= page.width for x in word.polygon[::2])
        assert [line.content for line in page.lines] == page_lines
    archived = pdf_text(pdf, tmp_path)
    assert pdf.startswith(b"%PDF")
    for word in " ".join(" ".join(page) for page in lines[:pages]).split():
        assert word in archived
    # an ordinary document of the workspace, with every other result the appliance makes
    document = daemon.document(result_id)
    assert document["status"] == "done" and document["source"] == "api"
    assert "docintel" in document["tags"]
