"""systemd integration: the unit and its snippets (checked by systemd's own tools),
the install command, the sd_notify protocol against a real datagram socket, and the
daemon's signals: SIGTERM drains, SIGHUP reloads."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import statistics
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest

from appliance import systemd
from appliance.cli import main
from appliance.config import DEFAULT_CONFIG, dump_toml, load_settings
from appliance.daemon import Appliance
from appliance.errors import ConfigError
from appliance.install import CONFIG, SHIPPED, TMPFILES, SYSUSERS, UNIT, load_installed
from appliance.store import Database, queries
from tests.daemon import Daemon
from tests.fixtures.documents import write_pdf, write_png

LINES = ["Packing list 77", "Two pallets of paper"]


def dense(n: int) -> list[str]:
    """A page of about 2-4 s of OCR on one thread, different for each ``n``."""
    return [" ".join([f"Invoice number {4711 + n}", "Delivery of office chairs",
                      "Quarterly report", "Revenue grew by twelve percent"])] * 40


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} not found: run `make systemd` (apt-get install systemd)")
    return path


def unit_keys(text: str) -> dict[str, list[str]]:
    keys: dict[str, list[str]] = {}
    for line in text.splitlines():
        if line and not line.startswith(("#", ";", "[")):
            key, _, value = line.partition("=")
            keys.setdefault(key, []).append(value)
    return keys


def install(root: Path, *extra: str, capsys=None) -> str:
    assert main(["install-service", "--root", str(root), *extra]) == 0
    return capsys.readouterr().out if capsys else ""


def under(root: Path, path: Path) -> Path:
    return root / path.relative_to("/")


# --------------------------------------------------------------------------- the files


def test_shipped_unit_has_the_promised_settings():
    keys = unit_keys((SHIPPED / "ocr-appliance.service").read_text())
    assert keys["Type"] == ["notify"] and keys["NotifyAccess"] == ["main"]
    assert keys["ExecReload"] == ["/bin/kill -HUP $MAINPID"]
    assert keys["Restart"] == ["on-failure"] and keys["User"] == ["ocr-appliance"]
    assert keys["KillMode"] == ["mixed"]  # SIGTERM to the daemon, not to its workers
    for key in ("NoNewPrivileges", "PrivateTmp"):
        assert keys[key] == ["yes"]
    assert keys["ProtectSystem"] == ["strict"] and keys["ProtectHome"] == ["yes"]
    assert keys["ReadWritePaths"] == ["/var/lib/ocr-appliance"]
    # DeviceAllow narrows access only with a closed policy; PrivateDevices would hide
    # the NVIDIA nodes altogether
    assert keys["DevicePolicy"] == ["closed"] and "PrivateDevices" not in keys
    assert {v.split()[0] for v in keys["DeviceAllow"]} >= {"char-nvidia-frontend",
                                                          "char-nvidia-uvm"}
    assert int(keys["LimitNOFILE"][0]) >= 65536
    assert keys["WatchdogSec"] and keys["TimeoutStopSec"] == ["2min"]
    assert load_settings(DEFAULT_CONFIG).server.drain_timeout_s + 30 <= 120


def test_installed_unit_passes_systemd_analyze_verify(tmp_path, capsys):
    analyze = tool("systemd-analyze")
    install(tmp_path, capsys=capsys)
    unit = under(tmp_path, UNIT)
    keys = unit_keys(unit.read_text())
    command = keys["ExecStart"][0].split()
    assert Path(command[0]).is_file()  # this installation's own `appliance`
    assert command[1:] == ["serve", "--config", str(CONFIG)]
    run = subprocess.run([analyze, "verify", "--man=no", "--generators=no", str(unit)],
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "SYSTEMD_LOG_LEVEL": "notice"})
    complaints = [line for line in (run.stdout + run.stderr).splitlines()
                  if "ocr-appliance" in line]
    assert run.returncode == 0 and not complaints, run.stdout + run.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="setting owners needs root")
def test_sysusers_and_tmpfiles_snippets_apply_to_a_root(tmp_path, capsys):
    sysusers, tmpfiles = tool("systemd-sysusers"), tool("systemd-tmpfiles")
    install(tmp_path, capsys=capsys)
    for cmd in ([sysusers, f"--root={tmp_path}", str(under(tmp_path, SYSUSERS))],
                [tmpfiles, f"--root={tmp_path}", "--create", str(under(tmp_path, TMPFILES))]):
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert run.returncode == 0, run.stderr
        assert "ignoring" not in run.stderr.lower(), run.stderr
    passwd = (tmp_path / "etc/passwd").read_text()
    assert any(line.startswith("ocr-appliance:") and line.endswith(":/usr/sbin/nologin")
               for line in passwd.splitlines())
    for path, mode in (("var/lib/ocr-appliance/data", 0o750),
                       ("var/lib/ocr-appliance/output", 0o750), ("etc/ocr-appliance", 0o770)):
        assert (tmp_path / path).stat().st_mode & 0o7777 == mode, path


def test_install_service_lays_out_the_files_and_keeps_an_existing_config(tmp_path, capsys):
    root = tmp_path / "root"
    out = install(root, "--dry-run", capsys=capsys)
    assert "would install" in out and not root.exists()

    out = install(root, capsys=capsys)
    assert "systemctl daemon-reload && systemctl enable --now ocr-appliance" in out
    for path in (UNIT, SYSUSERS, TMPFILES):
        assert under(root, path).read_text() != ""
    shipped_sysusers = (SHIPPED / "ocr-appliance.sysusers.conf").read_text()
    assert under(root, SYSUSERS).read_text() == shipped_sysusers
    for sub in ("data", "output"):
        assert (root / "var/lib/ocr-appliance" / sub).is_dir()
    config = under(root, CONFIG)
    assert config.stat().st_mode & 0o777 == 0o640
    settings = load_installed(config.read_text(), CONFIG)
    assert settings.paths.data_dir == Path("/var/lib/ocr-appliance/data")
    assert settings.paths.output_dir == Path("/var/lib/ocr-appliance/output")
    assert settings.review.users_file == Path("/etc/ocr-appliance/users.toml")
    assert settings.server.host == "127.0.0.1"
    shipped = load_settings(DEFAULT_CONFIG)  # the rest is the shipped default, comments too
    assert (settings.engine, settings.workers, settings.server.port) == \
        (shipped.engine, shipped.workers, shipped.server.port)
    assert "# Every key is optional" in config.read_text()

    # an operator's config is never overwritten; the unit follows it
    share = tmp_path / "share"
    config.write_text(config.read_text().replace("drain_timeout_s = 60", "drain_timeout_s = 300")
                      + f'\n[[watch]]\npath = "{share}"\ndisposition = "delete"\n')
    edited = config.read_text()
    out = install(root, capsys=capsys)
    assert f"kept     {CONFIG}: it exists and is not overwritten" in out
    assert config.read_text() == edited
    keys = unit_keys(under(root, UNIT).read_text())
    assert keys["TimeoutStopSec"] == ["360s"]
    assert keys["ReadWritePaths"] == ["/var/lib/ocr-appliance", f"-{share}"]


# --------------------------------------------------------------------------- sd_notify


class NotifySocket:
    """A stand-in for systemd's notification socket: collects what arrives."""

    def __init__(self, path: Path, on_message=None):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.2)
        self.messages: list[tuple[float, str]] = []
        self.on_message = on_message
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._receive, daemon=True)
        self._thread.start()

    def _receive(self) -> None:
        while not self._closed.is_set():
            try:
                data = self.sock.recv(65536).decode()
            except (TimeoutError, socket.timeout):
                continue
            except OSError:
                return
            if self.on_message:
                self.on_message(data)
            self.messages.append((time.monotonic(), data))

    def states(self, key: str) -> list[tuple[float, str]]:
        return [(t, m) for t, m in self.messages if f"{key}=" in m]

    def wait_for(self, text: str, timeout_s: float = 60, after: int = 0) -> str:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for _t, message in self.messages[after:]:
                if text in message.splitlines():
                    return message
            time.sleep(0.05)
        raise AssertionError(f"no {text} in {[m for _t, m in self.messages]}")

    def close(self) -> None:
        self._closed.set()
        self._thread.join(2)
        self.sock.close()


def test_notify_speaks_to_path_and_abstract_sockets_and_is_silent_without_one(tmp_path):
    assert systemd.notify("READY=1", environ={}) is False
    receiver = NotifySocket(tmp_path / "notify")
    try:
        assert systemd.notify("READY=1", "STATUS=ok", environ={"NOTIFY_SOCKET": str(receiver.path)})
        assert receiver.wait_for("STATUS=ok") == "READY=1\nSTATUS=ok"
    finally:
        receiver.close()
    name = f"appliance-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as abstract:
        abstract.bind("\0" + name)
        abstract.settimeout(5)
        assert systemd.notify("WATCHDOG=1", environ={"NOTIFY_SOCKET": "@" + name})
        assert abstract.recv(100) == b"WATCHDOG=1"
    # systemd gone away: logged, never raised
    assert systemd.notify("READY=1", environ={"NOTIFY_SOCKET": str(tmp_path / "gone")}) is False


def test_watchdog_pings_at_half_the_interval_for_this_process_only(tmp_path):
    assert systemd.watchdog_interval_s({}) is None
    assert systemd.watchdog_interval_s({"WATCHDOG_USEC": "4000000"}) == 2.0
    assert systemd.watchdog_interval_s({"WATCHDOG_USEC": "4000000",
                                        "WATCHDOG_PID": str(os.getpid())}) == 2.0
    assert systemd.watchdog_interval_s({"WATCHDOG_USEC": "4000000", "WATCHDOG_PID": "1"}) is None
    receiver = NotifySocket(tmp_path / "notify")
    try:
        dog = systemd.Watchdog.from_env({"WATCHDOG_USEC": "4000000",
                                         "NOTIFY_SOCKET": str(receiver.path)})
        sent = [t for t in (100.0, 100.5, 101.9, 102.0, 103.0, 104.1) if dog.ping(t)]
        assert sent == [100.0, 102.0, 104.1]
        receiver.wait_for("WATCHDOG=1")
        assert not systemd.Watchdog.from_env({}).ping(0.0)
    finally:
        receiver.close()


def test_daemon_notifies_ready_when_warm_pings_the_watchdog_and_stops_cleanly(tmp_path):
    readyz_at_ready: list[int] = []
    daemon = Daemon(tmp_path, env={"NOTIFY_SOCKET": str(tmp_path / "notify"),
                                   "WATCHDOG_USEC": "1000000"})

    def on_message(message: str) -> None:
        if "READY=1" in message.splitlines():  # what does the daemon say right now?
            readyz_at_ready.append(httpx.get(f"http://127.0.0.1:{daemon.port}/readyz").status_code)

    receiver = NotifySocket(tmp_path / "notify", on_message)
    try:
        daemon.start()
        receiver.wait_for("READY=1", timeout_s=240)
        assert readyz_at_ready == [200]  # the workers were warm when READY=1 came
        assert daemon.client.get("/readyz").json()["workers"][0]["warmed_up"]
        time.sleep(2.5)
        pings = [t for t, m in receiver.states("WATCHDOG")]
        assert len(pings) >= 4
        gaps = [b - a for a, b in zip(pings, pings[1:])]
        assert 0.3 < statistics.median(gaps) < 1.0, gaps  # half of WATCHDOG_USEC
        daemon.signal(signal.SIGTERM)
        assert daemon.wait_exit() == 0
        assert receiver.wait_for("STOPPING=1")
        [ready_at] = [t for t, m in receiver.states("READY")]
        [stopping_at] = [t for t, m in receiver.states("STOPPING")]
        assert ready_at < stopping_at
        assert "appliance stopped" in daemon.log()
    finally:
        daemon.stop()
        receiver.close()


# --------------------------------------------------------------------------- SIGTERM


def wait_running(daemon: Daemon, doc_id: str) -> int:
    deadline = time.monotonic() + 120
    while True:
        pages = daemon.document(doc_id)["pages"]
        running = [i for i, p in enumerate(pages) if p["status"] == "running"]
        if running:
            return running[0]
        assert time.monotonic() < deadline, daemon.log()
        time.sleep(0.05)


def pages_in_store(daemon: Daemon, doc_id: str) -> list[tuple[str, int]]:
    db = Database(daemon.data_dir / "appliance.db")
    try:
        return [(p.status, p.attempts) for p in queries.get_document(db, doc_id).pages]
    finally:
        db.close()


def test_sigterm_drains_the_page_in_flight_and_requeues_the_rest(tmp_path):
    pdf = write_pdf(tmp_path / "dense.pdf", [dense(0), dense(1), dense(2)], dpi=150)
    no_cache = {"result_cache": False}  # every page is read, none answered from the cache
    # 1. a drain long enough: the page in flight finishes, the others stay queued
    first = Daemon(tmp_path, server={"drain_timeout_s": 120}, engine=no_cache).start()
    try:
        first.wait_ready()
        doc_id = first.upload(pdf)["id"]
        running = wait_running(first, doc_id)
        first.signal(signal.SIGTERM)
        deadline = time.monotonic() + 10
        while not first.client.get("/readyz").json().get("draining"):
            assert time.monotonic() < deadline, first.log()
            time.sleep(0.05)
        with write_png(tmp_path / "late.png", LINES).open("rb") as fh:
            refused = first.client.post("/api/v1/documents", files={"file": ("late.png", fh)})
        assert refused.status_code == 503, refused.text
        assert refused.json()["error"]["code"] == "shutting_down"
        assert "shutting down" in refused.json()["error"]["message"]
        assert first.client.get("/readyz").status_code == 503
        assert first.wait_exit(timeout_s=150) == 0
    finally:
        first.stop()
    pages = pages_in_store(first, doc_id)
    assert pages[running] == ("done", 1)
    assert sorted(p for i, p in enumerate(pages) if i != running) == [("queued", 0)] * 2
    assert "drained requeued=0" in first.log_path.read_text()

    # 2. a drain too short: the page in flight goes back to the queue, uncharged
    second = Daemon(tmp_path, server={"drain_timeout_s": 0.5}, engine=no_cache).start()
    try:
        second.wait_ready()
        running = wait_running(second, doc_id)
        second.signal(signal.SIGTERM)
        assert second.wait_exit() == 0
    finally:
        second.stop()
    assert "drained requeued=1" in second.log_path.read_text()
    pages = pages_in_store(second, doc_id)
    assert pages[running] == ("queued", 0)
    assert sum(status == "done" for status, _ in pages) == 1

    # 3. a restart reads them, each once
    third = Daemon(tmp_path, engine=no_cache).start()
    try:
        third.wait_ready()
        final = third.wait_final([doc_id])[0]
        assert final["status"] == "done"
        assert [p["attempts"] for p in final["pages"]] == [1, 1, 1]
    finally:
        third.stop()


# --------------------------------------------------------------------------- SIGHUP


def test_sighup_reloads_watched_folders_and_keeps_them_when_the_config_is_broken(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()

    def folder(path: Path) -> dict:
        return {"path": str(path), "mode": "events", "stability_s": 0.5,
                "disposition": "delete"}

    daemon = Daemon(tmp_path, env={"NOTIFY_SOCKET": str(tmp_path / "notify")},
                    watch=[folder(first)])
    receiver = NotifySocket(tmp_path / "notify")

    def names() -> set[str]:
        return {d["name"] for d in daemon.client.get("/api/v1/documents").json()["documents"]}

    def wait_for(predicate, what: str) -> None:
        deadline = time.monotonic() + 120
        while not predicate():
            assert time.monotonic() < deadline, f"timed out: {what}\n{daemon.log()}"
            time.sleep(0.2)

    def reload() -> str:
        seen = len(receiver.messages)
        daemon.signal(signal.SIGHUP)
        receiver.wait_for("RELOADING=1", after=seen)
        return receiver.wait_for("READY=1", after=seen)

    try:
        daemon.start()
        daemon.wait_ready()
        receiver.wait_for("READY=1", timeout_s=60)
        write_png(second / "early.png", [*LINES, "early"])  # not watched yet
        daemon.config["watch"] = [folder(first), folder(second)]
        daemon.config_path.write_text(dump_toml(daemon.config))
        assert "STATUS=ready" in reload()
        write_png(second / "new.png", [*LINES, "new"])
        wait_for(lambda: {"early.png", "new.png"} <= names(), "files in the added folder")

        daemon.config_path.write_text("[watch\nthis is not TOML\n")
        status = reload()
        assert "reload refused" in status and "not valid TOML" in status
        assert "config reload refused, the running settings stay" in daemon.log()
        assert daemon.client.get("/healthz").status_code == 200
        write_png(second / "after.png", [*LINES, "after"])  # the old config still watches it
        wait_for(lambda: "after.png" in names(), "a file after the refused reload")
        assert daemon.process.poll() is None
    finally:
        daemon.stop()
        receiver.close()


def test_reload_applies_review_thresholds_and_refuses_a_bad_file(tmp_path):
    config = tmp_path / "config.toml"
    base = {"paths": {"data_dir": str(tmp_path / "data"), "output_dir": str(tmp_path / "out")},
            "engine": {"name": "classic", "threads": 1}}
    config.write_text(dump_toml(base))
    appliance = Appliance(load_settings(config))
    try:
        assert appliance.dispatcher.routing_rules.accept_from == 0.75
        config.write_text(dump_toml({**base, "review": {"review_below": 0.3, "accept_from": 0.9,
                                                        "lock_minutes": 5.0},
                                     "workers": {"count": 2}}))
        started = appliance.settings
        appliance.reload()
        rules = appliance.dispatcher.routing_rules
        assert (rules.review_below, rules.accept_from) == (0.3, 0.9)
        assert appliance.settings.review.lock_minutes == 5.0  # the review console reads it
        assert appliance.review.settings is appliance.settings is appliance.dispatcher.settings
        assert appliance.settings.workers.count == 1  # needs a restart
        # new settings are handed over; the object the parts started with is as it was
        assert started.review.accept_from == 0.75 and started.review.lock_minutes != 5.0

        inbox = tmp_path / "inbox"
        inbox.mkdir()
        config.write_text(dump_toml({**base, "review": {"review_below": 0.95},
                                     "watch": [{"path": str(inbox), "disposition": "delete"}]}))
        with pytest.raises(ConfigError, match="review_below"):
            appliance.reload()
        config.write_text(dump_toml({**base, "watch": [{"path": str(inbox), "ignore": ["(["],
                                                        "disposition": "delete"}]}))
        with pytest.raises(ConfigError, match="ignore pattern"):
            appliance.reload()
        assert appliance.dispatcher.routing_rules is rules  # nothing changed
        assert appliance.watch.watchers == [] and appliance.settings.watch == []
    finally:
        appliance.db.close()
