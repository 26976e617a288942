"""The upload size limit is enforced while the body arrives, not after: a real daemon,
spoken to over raw sockets so the test controls exactly what is sent and when."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest

from tests.daemon import Daemon
from tests.fixtures.documents import write_png

MAX_BYTES = 2_000_000
BOUNDARY = "limit-test-boundary"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("limits")
    (tmp / "system-tmp").mkdir()
    # the daemon's TMPDIR is watched: nothing of an upload may land there
    d = Daemon(tmp, env={"TMPDIR": str(tmp / "system-tmp")}, limits={"max_bytes": MAX_BYTES})
    with d.running():
        yield d


def multipart_head(name: str = "big.pdf") -> bytes:
    return (f"--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; "
            f"filename=\"{name}\"\r\nContent-Type: application/pdf\r\n\r\n").encode()


def multipart_tail() -> bytes:
    return f"\r\n--{BOUNDARY}--\r\n".encode()


def request_head(daemon: Daemon, headers: dict[str, str]) -> bytes:
    lines = ["POST /api/v1/documents HTTP/1.1", f"Host: 127.0.0.1:{daemon.port}",
             f"Content-Type: multipart/form-data; boundary={BOUNDARY}",
             *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def read_response(sock: socket.socket, timeout_s: float) -> tuple[int, dict]:
    sock.settimeout(timeout_s)
    data = b""
    while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < _length(data):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    return int(head.split()[1]), json.loads(body[:_length(data)])


def _length(data: bytes) -> int:
    head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").lower()
    return next(int(line.split(":")[1]) for line in head.split("\r\n")
                if line.startswith("content-length:"))


def test_an_oversized_content_length_is_refused_before_the_body_is_read(daemon):
    with socket.create_connection(("127.0.0.1", daemon.port)) as sock:
        sock.sendall(request_head(daemon, {"Content-Length": str(60_000_000)}))
        sock.sendall(multipart_head() + b"%PDF-1.4\n" + b"x" * 100_000)  # then nothing more
        started = time.monotonic()
        status, body = read_response(sock, timeout_s=10)
    assert status == 413 and body["error"]["code"] == "too_large"
    assert "limits.max_bytes" in body["error"]["message"]
    assert time.monotonic() - started < 5  # answered without waiting for the 60 MB
    assert daemon.client.get("/api/v1/documents").json()["documents"] == []


def test_a_chunked_body_is_not_read_past_the_limit(daemon):
    chunk = b"x" * 1_000_000
    sent = 0
    with socket.create_connection(("127.0.0.1", daemon.port)) as sock:
        sock.sendall(request_head(daemon, {"Transfer-Encoding": "chunked"}))
        first = multipart_head() + b"%PDF-1.4\n"
        sock.sendall(b"%x\r\n%s\r\n" % (len(first), first))
        sock.settimeout(0.05)
        try:
            while sent < 60_000_000:
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                sent += len(chunk)
                try:
                    if sock.recv(1, socket.MSG_PEEK):
                        break  # the answer came while we were still sending
                except (TimeoutError, BlockingIOError):
                    pass
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server stopped reading and closed: what it should do
        status, body = read_response(sock, timeout_s=10)
    assert status == 413 and body["error"]["code"] == "too_large"
    assert sent < 30_000_000, sent  # refused long before the 60 MB were all sent


def test_an_upload_on_its_way_is_held_under_the_data_directory(daemon, tmp_path):
    page = write_png(tmp_path / "page.png", ["Held under the data directory"])
    payload = multipart_head("page.png") + page.read_bytes() + b"\0" * 1_500_000 + \
        multipart_tail()
    before = open_files(daemon)
    with socket.create_connection(("127.0.0.1", daemon.port)) as sock:
        sock.sendall(request_head(daemon, {"Content-Length": str(len(payload))}))
        sock.sendall(payload[:-len(multipart_tail()) - 1000])  # all but the end: it waits
        deadline = time.monotonic() + 20
        while not (held := open_files(daemon) - before):
            assert time.monotonic() < deadline, "the body never reached a temporary file"
            time.sleep(0.1)
        assert all(str(daemon.data_dir / "tmp") in path for path in held), held
        assert not list((daemon.tmp / "system-tmp").rglob("*"))
        sock.sendall(payload[-len(multipart_tail()) - 1000:])
        status, body = read_response(sock, timeout_s=30)
    assert status == 201 and body["name"] == "page.png"


def open_files(daemon: Daemon) -> set[str]:
    """The files the daemon holds open (an unlinked temporary file as "... (deleted)")."""
    targets = set()
    for fd in Path(f"/proc/{daemon.process.pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("/") and not target.startswith(("/dev/", "/proc/")):
            targets.add(target)
    return targets
