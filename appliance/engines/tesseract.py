"""Tesseract 5 (Debian's ``tesseract-ocr``) as the classic engine's second reader.

A page the classic engine is unsure of is read again by a recogniser built another
way (an LSTM line model with its own layout analysis, not PP-OCR's detector and
CRNN); where the two agree word for word, an error both made is unlikely, and where
they disagree a reviewer should look (``appliance.quality.confidence``). Only pages in
doubt pay for it.

It runs as the ``tesseract`` command, one process per page, the image on its standard
input: no Python binding to build, and a crash costs that page's second opinion only.
"""

from __future__ import annotations

import io
import logging
import os
import shutil
import subprocess

from PIL import Image

from appliance.page import Recognition

log = logging.getLogger(__name__)

COMMAND = "tesseract"
# A page takes Tesseract 0.2-1 s on one core; far beyond that it is stuck.
TIMEOUT_S = 60.0
# Page segmentation 3: find the page's blocks and columns itself, as for a scan.
PAGE_SEGMENTATION = "3"


def tesseract_problem(languages: str) -> str | None:
    """Why Tesseract cannot read in ``languages`` here (not installed, a language
    missing), with what to do; None when it can."""
    if shutil.which(COMMAND) is None:
        return "tesseract is not installed (apt-get install tesseract-ocr)"
    try:
        listed = subprocess.run([COMMAND, "--list-langs"], capture_output=True, text=True,
                                timeout=TIMEOUT_S, check=False).stdout.splitlines()
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"tesseract does not run: {exc}"
    missing = [lang for lang in languages.split("+") if lang not in listed[1:]]
    if missing:
        return (f"tesseract lacks the language(s) {', '.join(missing)} "
                f"(apt-get install {' '.join(f'tesseract-ocr-{lang}' for lang in missing)})")
    return None


class TesseractReader:
    """Reads page images with the ``tesseract`` command in ``languages`` (Tesseract's
    form: ``eng``, ``eng+deu``); each must be installed (``tesseract-ocr-<lang>``)."""

    def __init__(self, languages: str = "eng"):
        self.languages = languages

    def read(self, image: Image.Image) -> Recognition | None:
        """The page's text, or None when Tesseract failed on it (logged): a missing
        second opinion leaves the page's confidence as it was."""
        buffer = io.BytesIO()
        image.convert("L").save(buffer, format="PNG")
        # one thread: the worker's cores belong to the main engine, and Tesseract's
        # OpenMP threads slow a single page down more often than they help
        environment = {**os.environ, "OMP_THREAD_LIMIT": "1"}
        try:
            done = subprocess.run(
                [COMMAND, "stdin", "stdout", "-l", self.languages, "--psm", PAGE_SEGMENTATION],
                input=buffer.getvalue(), capture_output=True, timeout=TIMEOUT_S,
                env=environment, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            log.warning("tesseract second opinion failed: %s", exc)
            return None
        if done.returncode != 0:
            log.warning("tesseract second opinion failed (exit %d): %s", done.returncode,
                        done.stderr.decode("utf-8", "replace").strip()[-300:])
            return None
        text = done.stdout.decode("utf-8", "replace").strip()
        return Recognition(text=text, markdown=text)
