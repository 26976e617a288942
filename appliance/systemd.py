"""sd_notify: how the daemon tells systemd (``Type=notify``) what it is doing.

The protocol (sd_notify(3)) is one datagram of newline-separated ``KEY=VALUE``
lines to the AF_UNIX socket named in ``$NOTIFY_SOCKET``: a filesystem path, or an
abstract name written with a leading ``@``. The daemon sends ``READY=1`` once its
workers are warm, ``RELOADING=1`` / ``READY=1`` around a SIGHUP reload,
``STOPPING=1`` when it starts to drain, ``STATUS=...`` lines for ``systemctl
status``, and ``WATCHDOG=1`` from the dispatcher loop.

Without ``$NOTIFY_SOCKET`` (a terminal, the tests, `appliance ocr`) every call is a
no-op, so the daemon behaves the same everywhere. The unit sets
``NotifyAccess=main``: only the main process is heard, never an engine worker that
inherited the variable.

The watchdog: with ``WatchdogSec=`` systemd passes ``$WATCHDOG_USEC`` (and
``$WATCHDOG_PID``, the process it is meant for) and restarts the service when no
``WATCHDOG=1`` arrives for that long. ``Watchdog`` pings at half the interval,
called from the loop whose progress proves the daemon alive.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Mapping

log = logging.getLogger(__name__)


def _address(value: str) -> str | None:
    if value.startswith("@"):
        return "\0" + value[1:]  # abstract namespace
    if value.startswith("/"):
        return value
    return None  # vsock: and other forms this client does not speak


def notify(*states: str, environ: Mapping[str, str] | None = None) -> bool:
    """Send ``states`` (e.g. "READY=1", "STATUS=warming up") as one message; True if
    it was sent. Never raises: systemd being away must not stop the daemon."""
    value = (os.environ if environ is None else environ).get("NOTIFY_SOCKET", "")
    if not value or not states:
        return False
    address = _address(value)
    if address is None:
        log.warning("sd_notify: unsupported NOTIFY_SOCKET=%s", value)
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.connect(address)
            sock.sendall("\n".join(states).encode())
        return True
    except OSError as exc:
        log.warning("sd_notify failed socket=%s states=%s error=%s", value,
                    ",".join(s.split("=", 1)[0] for s in states), exc)
        return False


def monotonic_usec() -> str:
    """The ``MONOTONIC_USEC=`` field systemd wants with ``RELOADING=1``."""
    return f"MONOTONIC_USEC={time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000}"


def watchdog_interval_s(environ: Mapping[str, str] | None = None) -> float | None:
    """How often to send WATCHDOG=1 (half of ``$WATCHDOG_USEC``), or None when the
    watchdog is off or meant for another process (``$WATCHDOG_PID``)."""
    env = os.environ if environ is None else environ
    try:
        usec = int(env.get("WATCHDOG_USEC", "0"))
        pid = int(env.get("WATCHDOG_PID", "0") or 0)
    except ValueError:
        return None
    if usec <= 0 or (pid and pid != os.getpid()):
        return None
    return usec / 2e6


class Watchdog:
    """Pings at ``interval_s`` when asked often enough; ``due`` is pure (time passed in)."""

    def __init__(self, interval_s: float | None, environ: Mapping[str, str] | None = None):
        self.interval_s = interval_s
        self._environ = environ
        self._next = 0.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Watchdog:
        return cls(watchdog_interval_s(environ), environ)

    @property
    def enabled(self) -> bool:
        return self.interval_s is not None

    def due(self, now: float) -> bool:
        return self.interval_s is not None and now >= self._next

    def ping(self, now: float | None = None) -> bool:
        """WATCHDOG=1 if one is due: call it from every turn of the loop."""
        now = time.monotonic() if now is None else now
        if not self.due(now):
            return False
        self._next = now + self.interval_s
        return notify("WATCHDOG=1", environ=self._environ)
