"""Load: two clients submit for a minute to a daemon on loopback. The only errors
are 429s, and the daemon's metrics agree with what the clients saw.

The figures (requests, 429s, pages completed, submit latency P95) are printed and
written to $APPLIANCE_LOAD_REPORT when set; the assertions are about correctness,
not speed.
"""

from __future__ import annotations

import io
import json
import os
import threading
import time
from collections import Counter

import httpx
from prometheus_client.parser import text_string_to_metric_families

from appliance.raster.synthetic import render_text_page
from tests.daemon import Daemon

LOAD_S = 60
CLIENTS = 2


def png(i: int) -> bytes:
    buffer = io.BytesIO()
    render_text_page([f"Load slip {i:05d}"], width=320, height=90, font_size=28,
                     margin=10).save(buffer, format="PNG")
    return buffer.getvalue()


def metric_samples(text: str) -> dict[tuple[str, tuple], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_two_clients_for_a_minute_only_429s_and_the_metrics_agree(tmp_path):
    d = Daemon(tmp_path, queue={"max_queued_pages_interactive": 4, "retry_after_s": 1}).start()
    try:
        d.wait_ready()
        codes: Counter = Counter()
        latencies: list[float] = []
        accepted: list[str] = []
        lock = threading.Lock()
        deadline = time.monotonic() + LOAD_S

        def client(number: int) -> None:
            with httpx.Client(base_url=d.client.base_url, timeout=30) as http:
                i = 0
                while time.monotonic() < deadline:
                    body = png(number * 100_000 + i)
                    i += 1
                    start = time.perf_counter()
                    response = http.post("/api/v1/documents",
                                         files={"file": (f"slip-{number}-{i}.png", body)})
                    with lock:
                        latencies.append(time.perf_counter() - start)
                        codes[response.status_code] += 1
                        if response.status_code == 201:
                            accepted.append(response.json()["id"])
                    if response.status_code == 429:
                        time.sleep(0.05)  # a polite client would honour Retry-After

        threads = [threading.Thread(target=client, args=(n,)) for n in range(CLIENTS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert set(codes) <= {201, 429}, codes
        assert codes[201] > 0 and codes[429] > 0, codes  # the cap was reached
        docs = d.wait_final(accepted, timeout_s=600)
        assert all(doc["status"] == "done" for doc in docs)

        samples = metric_samples(d.client.get("/metrics").text)
        assert samples[("ocr_documents_accepted_total", (("source", "api"),))] == codes[201]
        refused = sum(value for (name, labels), value in samples.items()
                      if name == "ocr_documents_refused_total"
                      and dict(labels).get("code") == "queue_full")
        assert refused == codes[429]
        read = samples[("ocr_pages_total", (("engine", "classic"), ("outcome", "ok")))]
        assert read == len(accepted)
        assert samples[("ocr_queue_depth", (("lane", "interactive"),))] == 0

        latencies.sort()
        report = {"seconds": LOAD_S, "clients": CLIENTS, "requests": sum(codes.values()),
                  "accepted": codes[201], "refused_429": codes[429],
                  "pages_completed": int(read),
                  "submit_latency_p95_ms": round(latencies[int(0.95 * len(latencies)) - 1]
                                                 * 1000, 1)}
        print("load:", json.dumps(report))
        if os.environ.get("APPLIANCE_LOAD_REPORT"):
            with open(os.environ["APPLIANCE_LOAD_REPORT"], "w") as out:
                json.dump(report, out)
    finally:
        d.stop()
