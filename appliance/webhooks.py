"""Completion webhooks: POST the finished document's JSON to the URL its submitter gave.

Deliveries run on a thread of their own, so a slow receiver never holds up pages.
A failed delivery is retried with exponential backoff; the outcome is recorded on
the document, and deliveries still owed after a restart are sent again.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Callable

import httpx

from appliance.store import Database, transitions

log = logging.getLogger(__name__)

ATTEMPTS = 5
FIRST_BACKOFF_S = 1.0
TIMEOUT_S = 10.0


class WebhookNotifier:
    def __init__(self, db: Database, payload: Callable[[str], dict], *,
                 first_backoff_s: float = FIRST_BACKOFF_S):
        self.db = db
        self.payload = payload  # document id -> the JSON body
        self.first_backoff_s = first_backoff_s
        self._queue: queue.Queue[tuple[str, str] | None] = queue.Queue()
        self._queued: set[str] = set()
        self._thread = threading.Thread(target=self._run, name="webhooks", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=TIMEOUT_S + 1)

    def notify(self, document_id: str, url: str) -> None:
        if document_id not in self._queued:  # the periodic finish may offer it again
            self._queued.add(document_id)
            self._queue.put((document_id, url))

    def _run(self) -> None:
        with httpx.Client(timeout=TIMEOUT_S, follow_redirects=False) as client:
            while (item := self._queue.get()) is not None:
                document_id, url = item
                try:
                    self._deliver(client, document_id, url)
                finally:
                    self._queued.discard(document_id)

    def _deliver(self, client: httpx.Client, document_id: str, url: str) -> None:
        body = {"event": "document.finished", "document": self.payload(document_id)}
        error = ""
        for attempt in range(1, ATTEMPTS + 1):
            try:
                response = client.post(url, json=body)
                if response.status_code < 300:
                    transitions.mark_webhook_done(self.db, document_id, True,
                                                  f"HTTP {response.status_code}")
                    log.info("webhook delivered doc=%s attempt=%d", document_id, attempt)
                    return
                error = f"HTTP {response.status_code}"
            except httpx.HTTPError as exc:
                error = f"{type(exc).__name__}: {exc}"
            log.warning("webhook failed doc=%s attempt=%d error=%s", document_id, attempt, error)
            if attempt < ATTEMPTS:
                time.sleep(self.first_backoff_s * 2 ** (attempt - 1))
        transitions.mark_webhook_done(self.db, document_id, False,
                                      f"gave up after {ATTEMPTS} attempts: {error}")
