"""A final document's remaining steps, on a thread of their own.

Export, the watched original's disposition and the webhook each happen once per final
state of a document. Many callers ask for them: the dispatcher as a document's last
page settles, a reviewer's decision, the watcher once a file proved whole, intake for
a document refused at once, and the periodic sweep for steps a crash or a full disk
cut short. Here they are run one document at a time, each from the store's state as
it is then, so that no two callers run them at once (a doubled export, a second
webhook POST), and off the dispatcher's thread, so that a large PDF/A export or a slow
move to a network share never holds up pages or systemd's watchdog.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable

log = logging.getLogger(__name__)


class Finisher:
    def __init__(self, steps: Callable[[str, bool], None]):
        self.steps = steps  # (document id, source confirmed): Appliance.finish_steps
        self._pending: dict[str, bool] = {}  # in the order offered; a repeat joins the first
        self._busy = False
        self._stopping = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="finisher", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Finish the document at hand and stop; what is still waiting is found again
        by the sweep at the next start (the store says what is unfinished)."""
        with self._changed:
            self._stopping = True
            self._changed.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout_s)

    def offer(self, document_id: str, source_confirmed: bool = False) -> None:
        """Run the document's remaining steps soon. ``source_confirmed``: the watcher saw
        its file unchanged for one more window (``WatchService.disposal``)."""
        with self._changed:
            self._pending[document_id] = self._pending.get(document_id, False) or source_confirmed
            self._changed.notify_all()

    def wait_idle(self, timeout_s: float) -> bool:
        """Whether everything offered so far was finished within ``timeout_s``."""
        with self._changed:
            return self._changed.wait_for(lambda: not self._pending and not self._busy,
                                          timeout_s)

    def _run(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._pending or self._stopping)
                if self._stopping:
                    return
                document_id = next(iter(self._pending))
                source_confirmed = self._pending.pop(document_id)
                self._busy = True
            try:
                self.steps(document_id, source_confirmed)
            except Exception:  # e.g. the output disk is full: the periodic sweep tries again
                log.exception("finishing failed doc=%s", document_id)
            finally:
                with self._changed:
                    self._busy = False
                    self._changed.notify_all()
