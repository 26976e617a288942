"""`appliance models`: the catalog, pull (against a local HTTP server), verify, make-test-model."""

from __future__ import annotations

import hashlib
import re
import socket
import threading
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from appliance import models
from appliance.cli import main
from appliance.config import dump_toml
from appliance.gguf.testmodel import MMPROJ_FILENAME, TEXT_FILENAME, write_test_model
from appliance.gguf.pair import inspect_model
from appliance.errors import ConfigError, ModelError, NetworkUnavailable


# --- a file server that honours Range, written for these tests ----------------------


class RangeServer(ThreadingHTTPServer):
    """Serves files from ``root``. ``cut_once`` names paths whose next response stops
    halfway (the connection closes); ``ignore_range`` answers every request whole."""

    daemon_threads = True

    def __init__(self, root: Path):
        super().__init__(("127.0.0.1", 0), RangeHandler)
        self.root = root
        self.requests: list[tuple[str, str | None]] = []
        self.cut_once: set[str] = set()
        self.ignore_range = False

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/{name}"


class RangeHandler(BaseHTTPRequestHandler):
    server: RangeServer

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        wanted = self.headers.get("Range")
        self.server.requests.append((self.path, wanted))
        path = self.server.root / self.path.lstrip("/")
        if not path.is_file():
            self.send_error(404)
            return
        data = path.read_bytes()
        start = 0
        if wanted and not self.server.ignore_range:
            match = re.fullmatch(r"bytes=(\d+)-", wanted)
            assert match, wanted
            start = int(match.group(1))
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        body = data[start:]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.path in self.server.cut_once:
            self.server.cut_once.discard(self.path)
            self.wfile.write(body[:len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def served(tmp_path):
    """The tiny pair behind a local server, and a catalog entry pointing at it."""
    root = tmp_path / "upstream"
    model, mmproj = write_test_model(root)
    server = RangeServer(root)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    entry = models.CatalogEntry(
        name="tiny", description="the tiny test pair", family="gemma3", verified=True,
        repository="local", licence="test", vram_gb=0.1, vram_n_ctx=512,
        text=models.ModelFile(TEXT_FILENAME, server.url(TEXT_FILENAME), 0.001,
                              model.stat().st_size, _sha(model)),
        mmproj=models.ModelFile(MMPROJ_FILENAME, server.url(MMPROJ_FILENAME), 0.001,
                                mmproj.stat().st_size, _sha(mmproj)))
    yield server, entry
    server.shutdown()
    server.server_close()


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _write_catalog(path: Path, entries: list[models.CatalogEntry]) -> Path:
    def table(f: models.ModelFile) -> str:
        return (f'file = "{f.file}"\nurl = "{f.url}"\nsize_gb = {f.size_gb}\n'
                f'size_bytes = {f.size_bytes}\nsha256 = "{f.sha256}"\n')

    path.write_text("".join(
        f'[[model]]\nname = "{e.name}"\ndescription = "{e.description}"\n'
        f'family = "{e.family}"\nverified = {str(e.verified).lower()}\n'
        f'repository = "{e.repository}"\nlicence = "{e.licence}"\nvram_gb = {e.vram_gb}\n'
        f'vram_n_ctx = {e.vram_n_ctx}\n\n[model.text]\n{table(e.text)}\n'
        f'[model.mmproj]\n{table(e.mmproj)}\n' for e in entries), encoding="utf-8")
    return path


def _config(tmp_path: Path, **engine) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(dump_toml({"paths": {"data_dir": "data", "output_dir": "output"},
                               "engine": {"name": "auto", **engine}}), encoding="utf-8")
    return path


# --- the catalog -------------------------------------------------------------------


def test_the_shipped_catalog_parses():
    catalog = models.load_catalog()
    names = [entry.name for entry in catalog]
    assert {"gemma-3-4b-it", "gemma-3-12b-it", "gemma-3-27b-it"} <= set(names)
    assert len(names) == len(set(names))
    for entry in catalog:
        assert entry.text.file != entry.mmproj.file
        assert entry.vram_gb > 0 and entry.vram_n_ctx > 0 and entry.licence
        for file in entry.files:
            assert file.url.startswith("https://huggingface.co/")
            assert file.sha256 == "" or re.fullmatch(r"[0-9a-f]{64}", file.sha256)
        if entry.family == "gemma3":
            assert entry.verified and "Q4_K_M" in entry.text.file and "f16" in entry.mmproj.file
            assert "Gemma Terms of Use" in entry.licence
        if not entry.verified:
            assert entry.description.startswith("UNVERIFIED")
    mmproj_names = [entry.mmproj.file for entry in catalog]
    assert len(mmproj_names) == len(set(mmproj_names))  # sizes can sit side by side


def test_list_prints_every_name(capsys, tmp_path):
    assert main(["models", "list", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for entry in models.load_catalog():
        assert entry.name in out
    assert "0/2" in out


def test_a_bad_catalog_names_the_entry_and_key(tmp_path, served):
    _, entry = served
    bad = replace(entry, text=replace(entry.text, sha256="abc"))
    path = _write_catalog(tmp_path / "catalog.toml", [bad])
    with pytest.raises(ConfigError, match=r"model #1 \(tiny\): 'text.sha256'"):
        models.load_catalog(path)


def test_pull_of_an_unknown_name_lists_the_known_ones(capsys):
    assert main(["models", "pull", "gemma-9-000b"]) == 2
    err = capsys.readouterr().err
    assert "error (not_found)" in err and "gemma-3-4b-it" in err


# --- pull ---------------------------------------------------------------------------


def test_pull_without_network_fails_clearly(capsys, tmp_path, served):
    _, entry = served
    port = _closed_port()
    offline = replace(entry, text=replace(entry.text, url=f"http://127.0.0.1:{port}/m.gguf"))
    catalog = _write_catalog(tmp_path / "catalog.toml", [offline])
    code = main(["models", "pull", "tiny", "--dir", str(tmp_path / "models"),
                 "--catalog", str(catalog)])
    assert code == 2
    err = capsys.readouterr().err
    assert "error (network_unavailable): cannot reach 127.0.0.1" in err
    assert "no network access" in err and "copy it into" in err
    assert not (tmp_path / "models" / TEXT_FILENAME).exists()


def test_pull_downloads_checks_and_places_the_pair(tmp_path, served):
    server, entry = served
    seen = []
    checks = models.pull(entry, tmp_path / "models",
                         progress=lambda name, done, total: seen.append((name, done, total)))
    assert [c.status for c in checks] == ["ok", "ok", "ok"]
    assert "sha256 matches the catalog" in checks[0].detail
    assert "n_embd 64" in checks[2].detail
    for file in entry.files:
        placed = tmp_path / "models" / file.file
        assert _sha(placed) == file.sha256
        assert not placed.with_name(placed.name + ".part").exists()
    assert seen[-1][1] == seen[-1][2] == entry.mmproj.size_bytes
    again = models.pull(entry, tmp_path / "models")
    assert "already present" in again[0].detail
    assert len(server.requests) == 2  # nothing downloaded twice


def test_pull_resumes_a_cut_download_with_a_range_request(tmp_path, served):
    server, entry = served
    server.cut_once.add("/" + TEXT_FILENAME)
    target = tmp_path / "models" / TEXT_FILENAME
    part = target.with_name(target.name + ".part")
    with pytest.raises(NetworkUnavailable, match="run the same pull again to resume"):
        models.pull(entry, tmp_path / "models")
    kept = part.stat().st_size
    assert 0 < kept < entry.text.size_bytes and not target.exists()

    checks = models.pull(entry, tmp_path / "models")
    assert ("/" + TEXT_FILENAME, f"bytes={kept}-") in server.requests
    assert [c.status for c in checks] == ["ok", "ok", "ok"]
    assert _sha(target) == entry.text.sha256 and not part.exists()
    inspect_model(target, tmp_path / "models" / MMPROJ_FILENAME)


def test_pull_finishes_a_part_that_is_already_whole(tmp_path, served):
    server, entry = served
    dest = tmp_path / "models"
    dest.mkdir()
    upstream = server.root / TEXT_FILENAME
    (dest / (TEXT_FILENAME + ".part")).write_bytes(upstream.read_bytes())
    checks = models.pull(entry, dest)
    assert checks[0].status == "ok" and _sha(dest / TEXT_FILENAME) == entry.text.sha256
    assert server.requests[0] == ("/" + TEXT_FILENAME,
                                  f"bytes={entry.text.size_bytes}-")  # answered 416


def test_pull_starts_over_when_the_server_ignores_ranges(tmp_path, served):
    server, entry = served
    server.ignore_range = True
    dest = tmp_path / "models"
    dest.mkdir()
    (dest / (TEXT_FILENAME + ".part")).write_bytes(b"stale bytes from another version")
    models.pull(entry, dest)
    assert _sha(dest / TEXT_FILENAME) == entry.text.sha256


def test_pull_refuses_a_file_with_the_wrong_checksum(tmp_path, served):
    _, entry = served
    wrong = replace(entry, text=replace(entry.text, sha256="0" * 64))
    with pytest.raises(ModelError, match="differs from the catalog's") as caught:
        models.pull(wrong, tmp_path / "models")
    assert caught.value.code == "model_error"
    assert not any((tmp_path / "models").iterdir())  # neither the file nor its .part


def test_pull_without_a_recorded_checksum_says_so(tmp_path, served):
    _, entry = served
    unknown = replace(entry, text=replace(entry.text, sha256="", size_bytes=0))
    checks = models.pull(unknown, tmp_path / "models")
    assert f"no published checksum recorded; its sha256 is {entry.text.sha256}" \
        in checks[0].detail


def test_pull_of_a_missing_upstream_file_is_an_error(tmp_path, served):
    server, entry = served
    gone = replace(entry, text=replace(entry.text, url=server.url("renamed.gguf")))
    with pytest.raises(ModelError, match="HTTP 404"):
        models.pull(gone, tmp_path / "models")


def test_pull_through_the_cli_shows_progress(capsys, tmp_path, served):
    _, entry = served
    catalog = _write_catalog(tmp_path / "catalog.toml", [entry])
    assert main(["models", "pull", "tiny", "--dir", str(tmp_path / "m"),
                 "--catalog", str(catalog)]) == 0
    captured = capsys.readouterr()
    assert TEXT_FILENAME in captured.err and "[####" in captured.err
    assert captured.out.splitlines()[0].startswith(f"ok   {TEXT_FILENAME}: downloaded")


# --- verify and make-test-model ------------------------------------------------------------


def test_verify_hashes_and_inspects_what_is_there(capsys, tmp_path, served):
    _, entry = served
    models_dir = tmp_path / "models"
    models.pull(entry, models_dir)
    unknown = replace(entry, name="tiny-unhashed", mmproj=replace(entry.mmproj, sha256=""))
    catalog = _write_catalog(tmp_path / "catalog.toml", [unknown])
    config = _config(tmp_path)
    args = ["models", "verify", "--dir", str(models_dir), "--catalog", str(catalog),
            "--config", str(config)]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert f"ok   {TEXT_FILENAME}: sha256 matches the catalog" in out
    assert f"warn {MMPROJ_FILENAME}: no published checksum recorded; its sha256 is " \
           f"{entry.mmproj.sha256}" in out
    assert "ok   tiny-unhashed: tiny-gemma3" in out

    with open(models_dir / TEXT_FILENAME, "r+b") as f:  # one flipped byte at the end
        f.seek(-1, 2)
        last = f.read(1)
        f.seek(-1, 2)
        f.write(bytes([last[0] ^ 0xFF]))
    assert main(args) == 1
    assert f"FAIL {TEXT_FILENAME}: sha256" in capsys.readouterr().out


def test_verify_checks_the_configured_pair(capsys, tmp_path, served):
    _, entry = served
    elsewhere = tmp_path / "elsewhere"
    model, mmproj = write_test_model(elsewhere)
    config = _config(tmp_path, model=str(model), mmproj=str(mmproj))
    catalog = _write_catalog(tmp_path / "catalog.toml", [entry])
    assert main(["models", "verify", "--dir", str(tmp_path / "empty"), "--catalog",
                 str(catalog), "--config", str(config)]) == 0
    out = capsys.readouterr().out
    assert f"ok   {TEXT_FILENAME}: sha256 matches the catalog" in out  # known by its name
    assert "ok   configured: tiny-gemma3" in out


def test_make_test_model_writes_the_pair(capsys, tmp_path):
    assert main(["models", "make-test-model", str(tmp_path / "tiny")]) == 0
    printed = [Path(line) for line in capsys.readouterr().out.splitlines()]
    assert printed == [tmp_path / "tiny" / TEXT_FILENAME, tmp_path / "tiny" / MMPROJ_FILENAME]
    assert inspect_model(*printed).n_embd == 64


def test_make_test_model_writes_a_pair_of_another_family(capsys, tmp_path):
    assert main(["models", "make-test-model", str(tmp_path / "p"), "--family",
                 "paddleocr_vl"]) == 0
    printed = [Path(line) for line in capsys.readouterr().out.splitlines()]
    assert inspect_model(*printed).family == "paddleocr_vl"
    with pytest.raises(SystemExit):  # argparse: not a family
        main(["models", "make-test-model", str(tmp_path / "x"), "--family", "llava"])
    assert "invalid choice: 'llava'" in capsys.readouterr().err


def test_list_names_each_family_and_what_it_is_good_at(capsys, tmp_path):
    assert main(["models", "list", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "PaddleOCR-VL" in out and "good at: dense text, tables (OTSL)" in out
    assert out.count("good at:") == len(models.load_catalog())


def test_a_catalog_family_the_appliance_does_not_run_is_refused(tmp_path, served):
    _, entry = served
    path = _write_catalog(tmp_path / "catalog.toml", [replace(entry, family="llava")])
    with pytest.raises(ConfigError, match=r"'family' must be one of gemma3, .*not 'llava'"):
        models.load_catalog(path)
