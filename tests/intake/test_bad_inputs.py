"""Bad input end to end: every kind of broken or wrong file ends ``failed`` with its own
reason code, its original stays in the spool, and the daemon keeps serving.

The first tests pin the decoder's mapping of damage to codes (truncated vs otherwise
corrupt) without a daemon; the last uploads a whole bad-input set to one real daemon
over its REST API.
"""

from __future__ import annotations

import hashlib
import io
import random
from pathlib import Path

import pytest
from PIL import Image

from appliance.errors import CorruptFile, TruncatedFile
from appliance.intake.sniff import HEAD_BYTES, sniff_kind
from appliance.raster import count_pages, render_page
from appliance.raster.synthetic import render_text_page
from tests.daemon import Daemon
from tests.fixtures.documents import (
    text_similarity,
    write_encrypted_pdf,
    write_jpeg,
    write_pdf,
    write_png,
    write_png_header_only,
)

MAX_PIXELS = 50_000_000
GOOD_PAGE = ["Receipt from the bakery", "Two loaves of bread", "Paid in cash"]


def _cut(path: Path, dest: Path, fraction: float = 0.5) -> Path:
    """``dest`` holds the first ``fraction`` of ``path``: an interrupted copy."""
    data = path.read_bytes()
    dest.write_bytes(data[: int(len(data) * fraction)])
    return dest


def _decode(path: Path) -> None:
    """What intake and a worker do with a file: sniff, count pages, render every page."""
    with path.open("rb") as fh:
        kind = sniff_kind(fh.read(HEAD_BYTES))
    for index in range(count_pages(path, kind, MAX_PIXELS)):
        render_page(path, kind, index, dpi=72, max_pixels=MAX_PIXELS)


# --- the decoder's mapping, without a daemon -----------------------------------------


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "GIF", "TIFF", "BMP", "WEBP", "PDF"])
@pytest.mark.parametrize("fraction", [0.05, 0.5, 0.95])
def test_cut_files_are_truncated(tmp_path, fmt, fraction):
    full = tmp_path / f"full.{fmt.lower()}"
    page = render_text_page(GOOD_PAGE, width=600, height=400, font_size=28, margin=20)
    page.save(full, format=fmt)
    with pytest.raises(TruncatedFile) as caught:
        _decode(_cut(full, tmp_path / f"cut.{fmt.lower()}", fraction))
    assert caught.value.code == "truncated_file" and not caught.value.retryable
    assert "ends early" in caught.value.message and "again" in caught.value.message


def test_other_damage_stays_corrupt(tmp_path):
    png = bytearray(write_png(tmp_path / "full.png", GOOD_PAGE).read_bytes())
    at = png.index(b"IDAT") + 200
    png[at:at + 64] = b"\x55" * 64  # scrambled pixel data, every byte still there
    (tmp_path / "scrambled.png").write_bytes(bytes(png))
    pdf = tmp_path / "garbage.pdf"  # complete (it has its end marker) but not a PDF inside
    pdf.write_bytes(b"%PDF-1.7\n" + random.Random(5).randbytes(2000) + b"\n%%EOF\n")
    for path in (tmp_path / "scrambled.png", pdf):
        with pytest.raises(CorruptFile) as caught:
            _decode(path)
        assert type(caught.value) is CorruptFile, path.name
        assert caught.value.code == "corrupt_file"


# --- the whole set through one real daemon ---------------------------------------------


def _bad_inputs(folder: Path) -> dict[str, tuple[Path, str]]:
    """name -> (file, the reason code its document must end with)."""
    folder.mkdir()
    full_png = write_png(folder / "source.png", GOOD_PAGE)
    full_jpeg = write_jpeg(folder / "source.jpg", GOOD_PAGE)
    empty = folder / "empty.png"
    empty.write_bytes(b"")
    random_pdf = folder / "random.pdf"
    random_pdf.write_bytes(b"\x00" + random.Random(42).randbytes(64 * 1024))
    notes = folder / "notes.txt"
    notes.write_text("Meeting notes\nThe invoices are in the shared folder.\n", encoding="utf-8")
    inputs = {
        "empty": (empty, "empty_file"),
        "cut_png": (_cut(full_png, folder / "cut.png"), "truncated_file"),
        "cut_jpeg": (_cut(full_jpeg, folder / "cut.jpg"), "truncated_file"),
        "random_pdf": (random_pdf, "unrecognized_file"),
        "encrypted": (write_encrypted_pdf(folder / "locked.pdf"), "encrypted_pdf"),
        "huge": (write_png_header_only(folder / "huge.png", 30_000, 30_000), "too_many_pixels"),
        "long": (write_pdf(folder / "long.pdf", [["one"], ["two"], ["three"], ["four"]]),
                 "too_many_pages"),
        "text": (notes, "unsupported_type"),
    }
    full_png.unlink()
    full_jpeg.unlink()
    return inputs


def _failure_code(doc: dict) -> str | None:
    """The document's reason: its own (refused at intake), which for a document whose
    pages failed sums theirs up; one page code, so the summary carries it."""
    codes = {page["error"]["code"] for page in doc.get("pages", []) if page["error"]}
    assert len(codes) <= 1, doc
    assert doc["error"]["code"] == (codes.pop() if codes else doc["error"]["code"]), doc
    return doc["error"]["code"]


def test_bad_inputs_fail_with_their_own_code_and_the_daemon_keeps_serving(tmp_path):
    inputs = _bad_inputs(tmp_path / "inputs")
    good = write_png(tmp_path / "good.png", GOOD_PAGE)
    daemon = Daemon(tmp_path, limits={"max_pages": 3}).start()
    try:
        daemon.wait_ready()
        uploaded = {name: daemon.upload(path) for name, (path, _code) in inputs.items()}
        final = dict(zip(uploaded, daemon.wait_final([d["id"] for d in uploaded.values()])))

        codes = {}
        for name, doc in final.items():
            path, expected = inputs[name]
            assert doc["status"] == "failed", (name, doc)
            codes[name] = _failure_code(doc)
            assert codes[name] == expected, (name, doc)
            if doc["page_count"]:  # failed while decoding: bad input is never retried
                assert doc["pages"] and all(p["status"] == "failed" and p["attempts"] == 1
                                            for p in doc["pages"]), (name, doc)
                assert "ends early" in doc["pages"][0]["error"]["message"]
            else:  # refused at intake: no pages, and no result but the reason
                assert doc["error"]["message"], (name, doc)
                result = daemon.client.get(f"/api/v1/documents/{doc['id']}/result")
                assert result.status_code == 409, (name, result.text)
                assert result.json()["error"]["code"] == "no_result", (name, result.text)
                assert f"({expected})" in result.json()["error"]["message"], (name, result.text)
            # the original stays in the spool, byte for byte
            data = path.read_bytes()
            assert doc["sha256"] == hashlib.sha256(data).hexdigest() and doc["size_bytes"] == len(data)
            original = daemon.data_dir / "spool" / "originals" / doc["sha256"][:2] / doc["sha256"]
            assert original.is_file(), (name, original)
            assert original.read_bytes() == data, name

        # one code per kind of problem, and no two kinds share one
        assert codes["cut_png"] == codes["cut_jpeg"]
        kinds = {name: code for name, code in codes.items() if name != "cut_jpeg"}
        assert len(set(kinds.values())) == len(kinds) == 7
        assert final["empty"]["size_bytes"] == 0
        assert "PDF" in final["text"]["error"]["message"]  # says what the appliance reads
        assert "text" in final["text"]["error"]["message"]  # and what the file is
        # random bytes named .pdf: not a PDF, which no copy cut short would explain
        random_reason = final["random_pdf"]["error"]["message"]
        assert "named as a PDF but is not one" in random_reason, random_reason
        assert "cut short" not in random_reason and "interrupted" not in random_reason
        # a cut image is refused as it is submitted (its header alone looks whole), not
        # accepted and then failed by the worker
        for name in ("cut_png", "cut_jpeg"):
            assert final[name]["page_count"] == 0 and not final[name].get("pages"), final[name]
            assert "ends early" in final[name]["error"]["message"]

        # still serving: health, readiness, and a good page all the way through
        assert daemon.process.poll() is None, daemon.log()
        assert daemon.client.get("/healthz").json() == {"status": "ok"}
        assert daemon.client.get("/readyz").status_code == 200
        doc = daemon.upload(good)
        assert daemon.wait_final([doc["id"]])[0]["status"] == "done", daemon.log()
        text = daemon.client.get(f"/api/v1/documents/{doc['id']}/result?format=txt").text
        assert text_similarity(text, " ".join(GOOD_PAGE)) > 0.7, text
    finally:
        daemon.stop()


def test_cut_bytes_are_not_an_image_pillow_can_read(tmp_path):
    """Guards the fixture: the cut files really are broken for Pillow, not just for us."""
    inputs = _bad_inputs(tmp_path / "inputs")
    for name in ("cut_png", "cut_jpeg"):
        with pytest.raises((OSError, SyntaxError)):
            with Image.open(io.BytesIO(inputs[name][0].read_bytes())) as image:
                image.load()


def test_an_encrypted_pdf_uploaded_with_its_password_is_read_and_the_password_kept_nowhere(
        tmp_path):
    import pikepdf

    secret = "Tr0ub4dor-and-3"
    locked = tmp_path / "locked.pdf"
    with pikepdf.open(write_pdf(tmp_path / "plain.pdf", [GOOD_PAGE])) as pdf:
        pdf.save(locked, encryption=pikepdf.Encryption(user=secret, owner=secret + "!"))
    daemon = Daemon(tmp_path).start()
    try:
        daemon.wait_ready()
        opened = daemon.upload(locked, password=secret)
        with locked.open("rb") as fh:  # the request retried: its document, not a second one
            retried = daemon.client.post("/api/v1/documents", files={"file": ("locked.pdf", fh)},
                                         data={"password": secret},
                                         headers={"Idempotency-Key": "upload-1"})
        with locked.open("rb") as fh:
            again = daemon.client.post("/api/v1/documents", files={"file": ("locked.pdf", fh)},
                                       data={"password": secret},
                                       headers={"Idempotency-Key": "upload-1"})
        assert (retried.status_code, again.status_code) == (201, 200)
        assert again.json()["id"] == retried.json()["id"]
        refused = daemon.upload(locked)  # the same content, no password
        wrong = daemon.upload(locked, password="guess")
        # a NUL opens no PDF (qpdf's passwords are C strings); one not needed is ignored
        nul = daemon.upload(locked, password=secret + "\0")
        unneeded = daemon.upload(write_pdf(tmp_path / "open.pdf", [GOOD_PAGE]), password="\0")
        read, without, mistaken, nul, unneeded = daemon.wait_final(
            [opened["id"], refused["id"], wrong["id"], nul["id"], unneeded["id"]])
        text = daemon.client.get(f"/api/v1/documents/{opened['id']}/result",
                                 params={"format": "txt"}).text
    finally:
        daemon.stop()
    assert read["status"] == "done" and text_similarity(text, "\n".join(GOOD_PAGE)) > 0.8
    assert _failure_code(without) == _failure_code(mistaken) == "encrypted_pdf"
    assert "password field" in without["error"]["message"]
    assert "The password given does not open this PDF" in mistaken["error"]["message"]
    assert nul["error"] == mistaken["error"] and unneeded["status"] == "done"
    original = daemon.data_dir / "spool" / "originals" / read["sha256"][:2] / read["sha256"]
    with pikepdf.open(original) as kept:  # kept decrypted: no password is needed again
        assert not kept.is_encrypted
    assert read["sha256"] != without["sha256"]  # the encrypted copy is kept for its own
    assert read["sha256"] == retried.json()["sha256"]
    for path in [daemon.log_path, *daemon.data_dir.rglob("*")]:
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
