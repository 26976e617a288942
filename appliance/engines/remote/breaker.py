"""A circuit breaker for one remote endpoint.

Closed, pages go out. A request the endpoint fails (refused, reset, 5xx, silence past
its timeout) opens it: pages are refused at once, and a probe thread sends the
server a tiny page, waiting a little longer after each miss, until it is read; then
the breaker closes. A listener (the worker, which tells the supervisor) hears every
change, so no page is given to an endpoint that is out.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

PROBE_FIRST_S = 1.0
PROBE_MAX_S = 30.0


class CircuitBreaker:
    def __init__(self, name: str, probe: Callable[[], None], *,
                 first_s: float = PROBE_FIRST_S, max_s: float = PROBE_MAX_S):
        self.name = name
        self._probe = probe  # raises while the endpoint does not answer
        self._first_s, self._max_s = first_s, max_s
        self._lock = threading.Lock()
        self._reason: str | None = None  # why it is open; None: closed
        self._listener: Callable[[bool, str], None] | None = None
        self._stopping = threading.Event()

    @property
    def reason(self) -> str | None:
        """Why the endpoint is out, or None while pages may go to it."""
        return self._reason

    def listen(self, listener: Callable[[bool, str], None]) -> None:
        """``listener(available, reason)`` hears every change from now on, and the
        current state at once if the endpoint is out."""
        with self._lock:
            self._listener = listener
            reason = self._reason
        if reason is not None:
            listener(False, reason)

    def trip(self, reason: str) -> None:
        """The endpoint failed a request: take it out and start probing it."""
        with self._lock:
            if self._reason is not None:
                return
            self._reason = reason
            listener = self._listener
        log.warning("endpoint out endpoint=%s reason=%s", self.name, reason)
        if listener:
            listener(False, reason)
        threading.Thread(target=self._probe_until_back, name=f"probe-{self.name}",
                         daemon=True).start()

    def _probe_until_back(self) -> None:
        wait = self._first_s
        while not self._stopping.wait(wait):
            try:
                self._probe()
            except Exception as exc:  # any failure to answer keeps it out
                log.info("endpoint still out endpoint=%s probe=%s next_probe_s=%.0f",
                         self.name, exc, min(wait * 2, self._max_s))
                wait = min(wait * 2, self._max_s)
                continue
            with self._lock:
                self._reason = None
                listener = self._listener
            log.info("endpoint back endpoint=%s", self.name)
            if listener:
                listener(True, "")
            return

    def close(self) -> None:
        self._stopping.set()
