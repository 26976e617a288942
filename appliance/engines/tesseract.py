"""Tesseract 5 (Debian's ``tesseract-ocr``) as the classic engine's second reader.

A page the classic engine is unsure of is read again by a recogniser built another
way (an LSTM line model with its own layout analysis, not PP-OCR's detector and
CRNN); where the two agree word for word, an error both made is unlikely, and where
they disagree a reviewer should look (``appliance.quality.confidence``). Only pages in
doubt pay for it.

Each page thread that asks has a Tesseract of its own, kept loaded in a process of its
own (``engines.tesseract_process``, libtesseract through its C API) and handed the
page's grey pixels: a crash or a hang costs that page's second opinion only, and no
native library joins the worker's (``engines.native``). Loading the languages once
instead of per page (the ``tesseract`` command) saves about a fifth of each reading,
with the same text (README, issue 54).
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import struct
import subprocess
import sys
import threading
from multiprocessing.connection import Connection
from pathlib import Path

from PIL import Image

from appliance.engines import tesseract_process
from appliance.page import Recognition

log = logging.getLogger(__name__)

COMMAND = "tesseract"
# A page takes Tesseract 0.2-1 s on one core; far beyond that it is stuck.
TIMEOUT_S = 60.0
PROGRAM = Path(tesseract_process.__file__)
# What an ended process may take to go once its connection is closed.
EXIT_WAIT_S = 5.0


# The script each of Tesseract's languages reads, named as the first word of its
# letters' Unicode names (``quality.text_checks.script_of``: kana count as CJK); a
# language not listed reads Latin. A page is read again only in the configured
# languages of its own script: English cannot confirm a Chinese page (it agreed with
# none of 55), and Chinese costs a Latin form twice the time English does (README).
_SCRIPT_LANGUAGES = {
    "CJK": ("chi_sim", "chi_sim_vert", "chi_tra", "chi_tra_vert", "jpn", "jpn_vert"),
    "HANGUL": ("kor", "kor_vert"),
    "CYRILLIC": ("aze_cyrl", "bel", "bul", "kaz", "kir", "mkd", "mon", "rus", "srp", "tat",
                 "tgk", "ukr", "uzb_cyrl"),
    "ARABIC": ("ara", "fas", "pus", "snd", "uig", "urd"),
    "DEVANAGARI": ("hin", "mar", "nep", "san"),
    "BENGALI": ("asm", "ben"),
    "ETHIOPIC": ("amh", "tir"),
    "GREEK": ("ell", "grc"),
    "HEBREW": ("heb", "yid"),
    "TIBETAN": ("bod", "dzo"),
    "GEORGIAN": ("kat", "kat_old"),
    "ARMENIAN": ("hye",), "CANADIAN": ("iku",), "CHEROKEE": ("chr",), "GUJARATI": ("guj",),
    "GURMUKHI": ("pan",), "KANNADA": ("kan",), "KHMER": ("khm",), "LAO": ("lao",),
    "MALAYALAM": ("mal",), "MYANMAR": ("mya",), "ORIYA": ("ori",), "SINHALA": ("sin",),
    "SYRIAC": ("syr",), "TAMIL": ("tam",), "TELUGU": ("tel",), "THAANA": ("div",),
    "THAI": ("tha",),
}
SCRIPT_OF_LANGUAGE = {language: script for script, languages in _SCRIPT_LANGUAGES.items()
                      for language in languages}
LATIN = "LATIN"


def languages_by_script(languages: str) -> dict[str, str]:
    """The scripts Tesseract reads pages of in ``languages`` ("eng+chi_sim"), each with
    those of them that read it ({"LATIN": "eng", "CJK": "chi_sim"}), in their order."""
    found: dict[str, list[str]] = {}
    for language in languages.split("+"):
        found.setdefault(SCRIPT_OF_LANGUAGE.get(language, LATIN), []).append(language)
    return {script: "+".join(chosen) for script, chosen in found.items()}


def tesseract_languages(languages: str) -> tuple[str, str | None]:
    """Those of ``languages`` Tesseract can read here, in their order ("" for none), and
    why it cannot read the others (not installed, a language missing) with what to do,
    None when it reads them all."""
    if shutil.which(COMMAND) is None:
        return "", "tesseract is not installed (apt-get install tesseract-ocr)"
    try:
        listed = subprocess.run([COMMAND, "--list-langs"], capture_output=True, text=True,
                                timeout=TIMEOUT_S, check=False).stdout.splitlines()[1:]
    except (OSError, subprocess.TimeoutExpired) as exc:
        return "", f"tesseract does not run: {exc}"
    wanted = languages.split("+")
    missing = [lang for lang in wanted if lang not in listed]
    installed = "+".join(lang for lang in wanted if lang in listed)
    if missing:
        return installed, (f"tesseract lacks the language(s) {', '.join(missing)} (apt-get "
                           f"install {' '.join(f'tesseract-ocr-{lang}' for lang in missing)})")
    return installed, None


class ReadingFailed(Exception):
    """A Tesseract process did not read the page (it failed, ended or hung)."""


class _TesseractProcess:
    """One ``tesseract_process`` and the reader's end of its connection."""

    def __init__(self, languages: str, timeout_s: float):
        self.timeout_s = timeout_s
        mine, theirs = socket.socketpair()
        try:
            # one thread: the worker's cores belong to the main engine, and Tesseract's
            # OpenMP threads slow a single page down more often than they help
            self.process = subprocess.Popen(
                [sys.executable, "-I", str(PROGRAM), str(theirs.fileno()), languages],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                env={**os.environ, "OMP_THREAD_LIMIT": "1"})
        except OSError as exc:  # out of processes or memory: this page goes without
            mine.close()
            raise ReadingFailed(f"it did not start: {exc}") from exc
        finally:
            theirs.close()
        # a page it does not take (stopped, stuck) must not block the sender for good
        seconds = int(timeout_s)
        mine.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO,
                        struct.pack("ll", seconds, int((timeout_s - seconds) * 1e6)))
        self.connection = Connection(mine.detach())
        try:
            self._answer()  # its languages loaded
        except ReadingFailed:
            self.kill()
            raise

    def read(self, image: Image.Image) -> str:
        grey = image.convert("L")
        try:
            self.connection.send_bytes(tesseract_process.HEADER.pack(*grey.size)
                                       + grey.tobytes())
        except BlockingIOError as exc:
            raise ReadingFailed(f"it took no page in {self.timeout_s:g} s") from exc
        except OSError as exc:
            raise ReadingFailed(self._ended() or str(exc)) from exc
        return self._answer().decode("utf-8", "replace")

    def _answer(self) -> bytes:
        try:
            if not self.connection.poll(self.timeout_s):
                raise ReadingFailed(f"no answer in {self.timeout_s:g} s")
            answer = self.connection.recv_bytes()
        except (EOFError, OSError) as exc:
            raise ReadingFailed(self._ended() or str(exc)) from exc
        if answer[:1] != tesseract_process.OK:
            raise ReadingFailed(answer[1:].decode("utf-8", "replace"))
        return answer[1:]

    def _ended(self) -> str | None:
        try:
            code = self.process.wait(EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            return None
        return f"it ended with signal {-code}" if code < 0 else f"it ended (exit {code})"

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        self.connection.close()  # it ends at the end of its page
        try:
            self.process.wait(EXIT_WAIT_S)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self) -> None:
        self.connection.close()
        self.process.kill()
        self.process.wait()


class TesseractReader:
    """Reads page images with Tesseract in ``languages`` (Tesseract's form: ``eng``,
    ``eng+chi_sim``); each must be installed (``tesseract-ocr-<lang>``). A page is read
    in those of them that read its script. As many pages at once as threads ask, each
    in a process of its own, started when first needed and kept for the next page in
    the same languages."""

    def __init__(self, languages: str = "eng", timeout_s: float = TIMEOUT_S):
        self.languages = languages
        self._by_script = languages_by_script(languages)
        self.timeout_s = timeout_s
        self._idle: dict[str, list[_TesseractProcess]] = {}
        self._lock = threading.Lock()

    def languages_for(self, script: str | None) -> str | None:
        """Those of the reader's languages that read ``script`` (a page's dominant one,
        as ``quality.text_checks.script_of`` names it), None when none does. A page
        without letters (figures only) in the Latin ones, where there are any: every
        language reads figures, and Latin models are the quickest (README)."""
        if script is None:
            return self._by_script.get(LATIN, self.languages)
        return self._by_script.get(script)

    def read(self, image: Image.Image, script: str | None = None) -> Recognition | None:
        """The page's text in the languages that read ``script`` (see
        ``languages_for``), or None when none does or Tesseract failed on it (logged):
        a missing second opinion leaves the page's confidence as it was."""
        languages = self.languages_for(script)
        if languages is None:
            return None
        try:
            process = self._take(languages)
            try:
                text = process.read(image).strip()
            except ReadingFailed:
                process.kill()  # a stuck one too; the next page gets a new one
                raise
        except ReadingFailed as exc:
            log.warning("tesseract second opinion failed: %s", exc)
            return None
        with self._lock:
            self._idle.setdefault(languages, []).append(process)
        return Recognition(text=text, markdown=text)

    def _take(self, languages: str) -> _TesseractProcess:
        with self._lock:
            idle = self._idle.get(languages, [])
            while idle:
                process = idle.pop()
                if process.alive:
                    return process
                process.kill()  # ended while idle (killed from outside): not this page's loss
        return _TesseractProcess(languages, self.timeout_s)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, {}
        for processes in idle.values():
            for process in processes:
                process.close()
