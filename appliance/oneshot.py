"""`appliance ocr`: read files now, without a daemon, through the same pipeline.

A throw-away data directory holds one ``Appliance`` for the run. Nobody is there to
review, so no page waits for review: each is scored and routed as the daemon would,
and those that would have gone to review are named on stderr with their reasons
(exit code 3). An engine that cannot start ends the run with its reason, where the
daemon would try again. SIGINT and SIGTERM unwind the run, so its temporary data goes
too.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from appliance.config import Settings
from appliance.daemon import Appliance
from appliance.errors import EngineUnavailable, InvalidRequest
from appliance.export import write_atomic
from appliance.intake import SubmitOptions
from appliance.quality.routing import review_reasons
from appliance.store import queries
from appliance.store.queries import DocumentView

POLL_S = 0.2


def _progress(done: int, total: int, width: int = 30) -> None:
    filled = width * done // max(total, 1)
    sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} pages")
    sys.stderr.flush()


# `appliance ocr` exit codes (README, "Command line")
OCR_OK, OCR_FAILED, OCR_NEEDS_REVIEW = 0, 1, 3


class Interrupted(Exception):
    """SIGINT or SIGTERM during a one-shot run: unwind, so its temporary data goes too."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class _Stop:
    """The first SIGINT or SIGTERM, noted by the handler and acted on by the run
    between its steps (``check``). Raising inside the handler instead surfaced in
    whatever library call was running: SQLAlchemy wrapped it in its own error, and
    the run ended with a traceback and exit code 1."""

    def __init__(self):
        self.signum: int | None = None

    def check(self) -> None:
        if self.signum is not None:
            raise Interrupted(self.signum)


@contextlib.contextmanager
def _interruptible():
    """A _Stop that SIGINT and SIGTERM set once; later signals are ignored, so that the
    clean-up the first one started is not cut short."""
    stop = _Stop()

    def handler(signum, _frame):
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_IGN)
        stop.signum = signum

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, action in previous.items():
            signal.signal(sig, action)


def run_once(settings: Settings, files: list[Path], fmt: str, output: Path | None = None,
             doc_type: str = "generic", text_layer: str | None = None) -> int:
    """Read ``files`` (as documents of ``doc_type``: a typed document's key fields are
    in its JSON; a PDF's own text as ``text_layer`` asks, else as the config does) with ``settings`` in a throw-away data directory; the results to
    stdout (or to ``output``, one file's: the PDF goes nowhere else), progress and
    problems to stderr. Answers the exit code."""
    if output is None and fmt == "pdf":
        raise InvalidRequest("a PDF is not for a terminal: write it to a file with -o OUT.pdf")
    if output is not None and len(files) != 1:
        raise InvalidRequest("-o takes the result of one file; give one file, or leave -o out")
    try:
        with _interruptible() as stop, \
                tempfile.TemporaryDirectory(prefix="appliance-ocr-") as tmp:
            paths = replace(settings.paths, data_dir=Path(tmp) / "data",
                            output_dir=Path(tmp) / "output")
            appliance = Appliance(replace(settings, paths=paths,
                                          review=replace(settings.review, enabled=False)))
            started = False
            try:
                appliance.start()
                started = True
                views = _read_all(appliance, files, doc_type, text_layer, stop)
                return _report(appliance, views, fmt, output)
            finally:
                if started:
                    appliance.stop()
    except Interrupted as exc:
        sys.stderr.write(f"\ninterrupted ({exc}); nothing was kept\n")
        return 128 + exc.signum


def _read_all(appliance: Appliance, files: list[Path], doc_type: str, text_layer: str | None,
              stop: _Stop) -> list[DocumentView]:
    """Submit ``files`` and wait, with a progress bar, until each is final."""
    docs = []
    for path in files:
        stop.check()
        docs.append(appliance.submit_path(path, SubmitOptions(source="cli", doc_type=doc_type,
                                                              text_layer=text_layer)))
    total, shown = sum(d.page_count for d in docs), -1
    while True:
        stop.check()
        if not appliance.ready and (failed := appliance.dispatcher.last_start_error):
            # a daemon tries again and again; nobody waits on a one-shot run that long
            raise EngineUnavailable(f"the engine could not start ({failed['code']}): "
                                    f"{failed['message']}; `appliance doctor` says more")
        views = [queries.get_document(appliance.db, d.id) for d in docs]
        done = sum(1 for v in views for p in v.pages if p.status in ("done", "failed"))
        if done != shown:
            _progress(done, total)
            shown = done
        if all(v.is_final for v in views):
            sys.stderr.write("\n")
            return views
        time.sleep(POLL_S)


def _report(appliance: Appliance, views: list[DocumentView], fmt: str,
            output: Path | None) -> int:
    """Each document's result to stdout; failures, and the pages that would have gone
    to review with their reasons, to stderr. Answers the exit code."""
    code = OCR_OK
    for view in views:
        if view.doc.error_code:
            code = OCR_FAILED
            sys.stderr.write(f"{view.doc.name}: failed ({view.doc.error_code}): "
                             f"{view.doc.error_message}\n")
            continue
        content = appliance.exporter.rendered(view.doc.id, [fmt])[fmt]
        if output is not None:
            write_atomic(output, content)
        else:
            if len(views) > 1 and fmt != "json":
                sys.stdout.write(f"==> {view.doc.name} <==\n")
            sys.stdout.write(content)
        if view.status != "done":
            code = OCR_FAILED
        for page, result in queries.accepted_results(appliance.db, view.doc.id):
            held = review_reasons(result.reasons) if result and page.status == "done" else []
            if held:
                code = code or OCR_NEEDS_REVIEW
                sys.stderr.write(f"{view.doc.name}: page {page.index + 1} would go to review: "
                                 f"{'; '.join(held)}\n")
    return code
