"""The HTTP daemon (`appliance serve`): uvicorn serving the REST API and the web UIs in
front of one ``Appliance``, with the process's signals, logging and temporary files.

Signals (``Server``): SIGTERM and SIGINT drain, then stop. Intake closes at once (new
submissions get ``ShuttingDown``, 503; watched folders stop), the pages being read get
``server.drain_timeout_s`` to finish, the rest go back to the queue without counting
an attempt, and only then does uvicorn stop, so the API answers throughout and the
process exits 0. SIGHUP re-reads ``[[watch]]`` and ``[review]`` from the config file;
a file that does not load changes nothing. Each step is told to systemd
(``appliance.systemd``): READY=1 once the workers are warm, RELOADING=1 and READY=1
around a reload, STOPPING=1 at the first stop signal.
"""

from __future__ import annotations

import contextlib
import ipaddress
import logging
import os
import shutil
import signal
import tempfile
import threading
from pathlib import Path

from appliance import systemd
from appliance.config import Settings
from appliance.daemon import Appliance
from appliance.docintel import PREFIX as DOCINTEL_PREFIX
from appliance.errors import ConfigError

log = logging.getLogger(__name__)

HTTP_SHUTDOWN_S = 5  # open connections (the UI's event streams) after the drain
READY_POLL_S = 0.2


class ApiAccessOnly(logging.Filter):
    """uvicorn's access log keeps the requests of the APIs at INFO (the REST API's and
    the Document Intelligence API's, its polls and PDF downloads too); everything else
    (the web UIs polling every second or two, their assets, health and metrics probes)
    is a DEBUG line, so that one open browser tab does not fill the journal."""

    def filter(self, record: logging.LogRecord) -> bool:
        path = record.args[2] if isinstance(record.args, tuple) and len(record.args) > 2 else ""
        if str(path).startswith(("/api/", DOCINTEL_PREFIX + "/")):
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger().isEnabledFor(logging.DEBUG)


def uvicorn_config(settings: Settings, app):
    """How uvicorn serves ``app``: the daemon's, and the tests' that serve it in a thread.

    uvicorn would take X-Forwarded-For from any loopback peer by default, so that any
    local process could choose its address for the allow-list and the login throttle:
    forwarded headers count only from ``server.trusted_proxies``."""
    import uvicorn

    # uvicorn reads "10.0.0.1/8" as no network at all: each entry as its network
    proxies = [str(ipaddress.ip_network(entry, strict=False))
               for entry in settings.server.trusted_proxies]
    return uvicorn.Config(app, host=settings.server.host, port=settings.server.port,
                          log_level=settings.logging.level.lower(),
                          timeout_graceful_shutdown=HTTP_SHUTDOWN_S,
                          proxy_headers=bool(proxies), forwarded_allow_ips=proxies)


class Server:
    """uvicorn with the appliance's signal handling and systemd notifications.

    uvicorn's own handlers would stop the HTTP server at once and then re-raise the
    signal, so the process would die of it before the workers were stopped. Here the
    first SIGTERM or SIGINT starts a drain in a thread while the API keeps answering
    (503 for new work), and uvicorn is told to exit only when the drain is over. A
    second SIGINT (Ctrl-C again) skips the rest of the drain. SIGHUP reloads.
    """

    def __init__(self, appliance: Appliance, app):
        import uvicorn

        outer = self

        class _Uvicorn(uvicorn.Server):
            def handle_exit(self, sig, frame):  # called by uvicorn's signal handlers
                outer._on_stop_signal(sig)

            @contextlib.contextmanager
            def capture_signals(self):
                with outer._hangup_handler(), super().capture_signals():
                    yield

        self.appliance = appliance
        self.uvicorn = _Uvicorn(uvicorn_config(appliance.settings, app))
        logging.getLogger("uvicorn.access").addFilter(ApiAccessOnly())  # after uvicorn's setup
        self._stopping = threading.Event()
        self._ready_sent = False
        self._reload_lock = threading.Lock()

    def run(self) -> None:
        threading.Thread(target=self._notify_when_ready, name="notify-ready", daemon=True).start()
        self.uvicorn.run()

    # --- readiness

    def _notify_when_ready(self) -> None:
        """READY=1 once uvicorn listens and every worker has warmed up."""
        systemd.notify("STATUS=starting: warming up the engine workers")
        while not self._stopping.wait(READY_POLL_S):
            if self.uvicorn.started and self.appliance.ready:
                self._ready_sent = True
                systemd.notify("READY=1", self._status())
                return

    def _status(self) -> str:
        appliance = self.appliance
        return (f"STATUS=ready: engine={appliance.engine_label} "
                f"workers={len(appliance.workers)} watched_folders={len(appliance.watch.folders)}")

    # --- stop

    def _on_stop_signal(self, sig: int) -> None:
        """Runs in the signal handler (main thread): flags and a thread, nothing slow."""
        if self._stopping.is_set():
            if sig == signal.SIGINT:
                log.warning("second interrupt: stopping without waiting for the drain")
                self.uvicorn.force_exit = self.uvicorn.should_exit = True
            return
        self._stopping.set()
        self.appliance.draining = True  # intake refuses from this moment
        systemd.notify("STOPPING=1", "STATUS=stopping: letting the pages in flight finish")
        log.info("stop requested signal=%s", signal.Signals(sig).name)
        threading.Thread(target=self._drain_then_exit, name="drain", daemon=True).start()

    def _drain_then_exit(self) -> None:
        try:
            self.appliance.drain(self.appliance.settings.server.drain_timeout_s)
        except Exception:
            log.exception("drain failed")
        finally:
            self.uvicorn.should_exit = True

    # --- reload

    @contextlib.contextmanager
    def _hangup_handler(self):
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = signal.signal(signal.SIGHUP, self._on_hangup)
        try:
            yield
        finally:
            signal.signal(signal.SIGHUP, previous)

    def _on_hangup(self, _sig, _frame) -> None:
        threading.Thread(target=self.reload, name="reload", daemon=True).start()

    def reload(self) -> None:
        """SIGHUP: the config's [[watch]] and [review] again; never raises."""
        with self._reload_lock:
            if self._stopping.is_set():
                return
            told = self._ready_sent  # systemd hears of reloads once it has READY=1
            if told:
                systemd.notify("RELOADING=1", systemd.monotonic_usec(),
                               "STATUS=reloading the configuration")
            status = None
            try:
                self.appliance.reload()
            except ConfigError as exc:
                log.error("config reload refused, the running settings stay: %s", exc.message)
                status = f"STATUS=reload refused, running settings kept: {exc.message}"
            except Exception:
                log.exception("config reload failed, the running settings stay")
                status = "STATUS=reload failed, running settings kept: see the journal"
            if told:
                systemd.notify("READY=1", status or self._status())


def use_run_temp_dir(temp: Path) -> Path:
    """Point this process's temporary files (request bodies being received, the web
    UI's uploads and downloads) at a folder of its own under the data directory, where
    the disk floor and the operator can see them, instead of the system's /tmp."""
    run_dir = temp / f"run-{os.getpid()}"
    run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
    tempfile.tempdir = os.environ["TMPDIR"] = str(run_dir)  # the workers' too
    return run_dir


def remove_stale_temp_dirs(temp: Path, keep: Path) -> None:
    """What earlier runs left (a kill -9 cleans up nothing); call it holding the data
    directory's lock, so no other daemon's folder can be among them."""
    for stale in temp.glob("run-*"):
        if stale != keep:
            shutil.rmtree(stale, ignore_errors=True)


def serve(settings: Settings) -> None:
    """Run the HTTP daemon (REST API + web UI) until SIGTERM or SIGINT."""
    run_temp = use_run_temp_dir(settings.paths.temp)  # before Gradio is imported: it reads it once
    systemd.notify("STATUS=starting")
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGHUP, signal.SIG_IGN)  # too early to reload: ignored
    appliance = Appliance(settings)
    appliance.check_exposure()  # before the API and the UI are imported: a refusal is quick
    # the workers load their engines while this process imports and builds the API and
    # the UI (seconds of Gradio), on the other cores
    appliance.start()
    try:
        from appliance.api import create_app
        from ui.app import mount_ui

        app = create_app(appliance)
        mount_ui(app, appliance)
        server = Server(appliance, app)
        remove_stale_temp_dirs(settings.paths.temp, keep=run_temp)
        log.info("serving url=http://%s:%d", settings.server.host, settings.server.port)
        server.run()
    finally:
        appliance.stop()
        shutil.rmtree(run_temp, ignore_errors=True)
