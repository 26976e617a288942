"""The daemon reading through remote endpoints: a real daemon, real servers on loopback.

The pages of a server killed mid-page are read again elsewhere, once each; a server
that fails or hangs is taken out; the load follows the endpoints' capacity; and with
`auto` a document may name the local model, the endpoints or the classic reader.
"""

from __future__ import annotations

import sqlite3
import time
from collections import Counter

from appliance.raster.preprocess import to_original
from appliance.raster.synthetic import render_text_page, text_page_words
from tests.daemon import Daemon
from tests.fixtures.documents import write_png
from tests.openai_servers import ScriptedServer, endpoint, tiny_server
from tests.outputs.test_page_tree import iou

# no auto-tiling and no second opinion: one request per page, so counts are exact
PLAIN = {"threads": 1, "auto_tiling": False, "max_tokens": 48}
NO_SECOND_OPINION = {"enabled": False, "second_opinion": False}


def remote_daemon(tmp_path, *endpoints, name="openai", **engine) -> Daemon:
    return Daemon(tmp_path, engine={"name": name, **PLAIN, "remote": list(endpoints), **engine},
                  review=NO_SECOND_OPINION, workers={"page_timeout_s": 60})


def pages(tmp_path, count: int) -> list:
    return [write_png(tmp_path / f"page{i}.png", [f"Invoice {4700 + i}", "Total 118.50"])
            for i in range(count)]


def endpoints_that_read(daemon: Daemon, doc_ids: list[str]) -> list[str]:
    names = []
    for doc_id in doc_ids:
        result = daemon.client.get(f"/api/v1/documents/{doc_id}/result?format=json").json()
        names += [page["provenance"].get("endpoint") for page in result["pages"]]
    return names


def attempts(daemon: Daemon) -> list[tuple]:
    """(page id, outcome, error code) of every stored attempt."""
    with sqlite3.connect(daemon.data_dir / "appliance.db") as db:
        return db.execute("SELECT page_id, outcome, error_code FROM pageresult").fetchall()


def worker(daemon: Daemon, name: str) -> dict:
    return next(w for w in daemon.client.get("/readyz").json()["workers"]
                if w["endpoint"] == name)


def wait_for(condition, timeout_s: float = 60, what: str = "") -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_pages_of_a_server_killed_mid_page_are_read_elsewhere_once_each(tmp_path, tiny_model):
    with (tiny_server(*tiny_model, tmp_path) as first,
          tiny_server(*tiny_model, tmp_path) as second):
        # long answers, so that the kill lands while pages are being read
        daemon = remote_daemon(tmp_path, endpoint(first.url, "tiny", "first", max_concurrency=2),
                               endpoint(second.url, "tiny", "second", max_concurrency=2),
                               max_tokens=400)
        with daemon.running():
            docs = [daemon.upload(png)["id"] for png in pages(tmp_path, 10)]
            wait_for(lambda: worker(daemon, "first")["in_flight"] > 0, what="a page at first")
            first.kill()
            finals = daemon.wait_final(docs)
            assert [d["status"] for d in finals] == ["done"] * 10
            assert worker(daemon, "first")["state"] == "out"
            read_by = endpoints_that_read(daemon, docs)
            stored = attempts(daemon)
            first.start()  # back on the same port: the probe brings it into service
            wait_for(lambda: worker(daemon, "first")["out"] is None, what="first back")
            again = daemon.upload(write_png(tmp_path / "after.png", ["Invoice 5000"]))["id"]
            assert daemon.wait_final([again])[0]["status"] == "done"
    # the killed server's pages went back uncharged and were read once, elsewhere
    released = [row for row in stored if row[2] == "endpoint_unavailable"]
    assert released and all(outcome == "preempted" for _, outcome, _ in released)
    accepted = Counter(page for page, outcome, _ in stored if outcome == "ok")
    assert len(accepted) == 10 and set(accepted.values()) == {1}  # nothing lost, nothing doubled
    assert {page for page, _, _ in released} <= set(accepted)
    assert Counter(read_by)["second"] >= len(released)


def test_a_failing_or_hanging_endpoint_is_taken_out_and_the_others_read(tmp_path,
                                                                        llama_cpp_server):
    with ScriptedServer("error500") as failing, ScriptedServer("hang") as hanging:
        daemon = remote_daemon(tmp_path,
                               endpoint(failing.url, "scripted", "failing", timeout_s=2),
                               endpoint(hanging.url, "scripted", "hanging", timeout_s=2),
                               endpoint(llama_cpp_server.url, "tiny", "good", max_concurrency=1))
        with daemon.running():
            docs = [daemon.upload(png)["id"] for png in pages(tmp_path, 4)]
            finals = daemon.wait_final(docs)
            assert [d["status"] for d in finals] == ["done"] * 4
            assert set(endpoints_that_read(daemon, docs)) == {"good"}
            for name in ("failing", "hanging"):  # probes keep failing: still out
                state = worker(daemon, name)
                assert state["state"] == "out" and name in state["out"]
            assert "HTTP 500" in worker(daemon, "failing")["out"]
            assert "did not answer within its timeout_s" in worker(daemon, "hanging")["out"]
            with pages(tmp_path, 1)[0].open("rb") as png:  # no local model runs here
                refused = daemon.client.post("/api/v1/documents", files={"file": png},
                                             data={"engine": "llama"})
            assert refused.status_code == 409
            assert refused.json()["error"]["code"] == "engine_unavailable"
    assert all(d["pages"][0]["attempts"] == 1 for d in finals)  # none was charged


def test_the_load_follows_the_endpoints_capacity(tmp_path):
    # The servers hold every completion until the test releases it, so the pages'
    # turns are set by the servers' slots and the test's rounds: this machine's load
    # (a page's raster, preprocessing and placement here) only delays each round.
    with ScriptedServer("ok") as large, ScriptedServer("ok") as small:
        daemon = remote_daemon(tmp_path, endpoint(large.url, "scripted", "large", max_concurrency=3),
                               endpoint(small.url, "scripted", "small", max_concurrency=1))
        with daemon.running():
            large.hold()  # warmed up: from here on each page waits at its server
            small.hold()
            docs = [daemon.upload(png)["id"] for png in pages(tmp_path, 15)]

            def full() -> bool:
                return (large.held, small.held) == (3, 1)

            wait_for(full, what="3 pages at the large server and 1 at the small one")
            # the large server answers: its slots fill again while the small one still
            # reads its first page, which nobody waits for
            assert large.release() == 3
            wait_for(full, what="the large server's slots filled again")
            for _ in range(2):  # both answer: the 8 pages left fill both twice over
                assert (large.release(), small.release()) == (3, 1)
                wait_for(full, what="both servers' slots filled again")
            assert (large.release(), small.release()) == (3, 1)
            assert {d["status"] for d in daemon.wait_final(docs)} == {"done"}
            read_by = Counter(endpoints_that_read(daemon, docs))
    # never more at once than a server's slots, and each slot kept busy: 4 rounds of
    # 3 pages at the large server, 3 of 1 at the small one
    assert (large.peak_in_flight, small.peak_in_flight) == (3, 1)
    assert read_by == {"large": 12, "small": 3}


def test_a_reading_without_logprobs_is_compared_with_the_classic_one(tmp_path):
    text = "Invoice 4700 Total 118.50"
    with ScriptedServer("ok", text=text, logprobs=False) as server:
        daemon = Daemon(tmp_path, engine={"name": "openai", **PLAIN,
                                          "remote": [endpoint(server.url, "scripted", "ollama")]})
        with daemon.running():
            doc = daemon.upload(pages(tmp_path, 1)[0])["id"]
            daemon.wait_final([doc])
            page = daemon.client.get(f"/api/v1/documents/{doc}/result?format=json").json()["pages"][0]
    assert page["provenance"]["logprobs"] is False
    signals = page["signals"]
    # no token evidence, said so; the classic reading of the same page agrees with it
    assert signals["source"] == "none" and signals["agreement"] > 0.9
    assert page["confidence"] > 0.75


def test_a_vision_reading_is_placed_on_the_classic_words(tmp_path):
    lines = ["Invoice number 4711 for office chairs", "Total amount 118.50 EUR"]
    with ScriptedServer("ok", text=" ".join(lines)) as server:  # reads this page right
        daemon = Daemon(tmp_path, engine={"name": "openai", **PLAIN,
                                          "remote": [endpoint(server.url, "scripted", "gpu2")]},
                        review=NO_SECOND_OPINION)
        good = tmp_path / "good.png"
        render_text_page(lines, font_size=36).save(good)
        other = write_png(tmp_path / "other.png", ["Quarterly report", "Signed by the board"])
        with daemon.running():
            docs = [daemon.upload(path)["id"] for path in (good, other)]
            daemon.wait_final(docs)
            placed, misplaced = (daemon.client.get(f"/api/v1/documents/{doc}/result?format=json")
                                 .json()["pages"][0] for doc in docs)
            hocr = daemon.client.get(f"/api/v1/documents/{docs[0]}/result?format=hocr").text
    assert placed["provenance"]["placement"]["rate"] == 1.0 and placed["positioned"]
    words = [w for line in placed["lines"] for w in line["words"]]
    truth = text_page_words(lines, 36)
    assert [w["text"] for w in words] == [text for text, _ in truth]
    # the lines' boxes are on the page the engine read: back onto the page as submitted
    back = to_original(placed["provenance"]["preprocess"])
    for word, (_, box) in zip(words, truth):
        (x0, y0), (x1, y1) = (back @ [*word["box"][:2], 1])[:2], (back @ [*word["box"][2:], 1])[:2]
        assert iou((x0, y0, x1, y1), box) >= 0.5, (word, box)
    assert ">4711</span>" in hocr
    # the model's text is not what the page says: placed, but flagged
    assert misplaced["provenance"]["placement"]["rate"] < 0.6
    assert "poorly_placed" in misplaced["flags"]


def test_auto_combines_the_local_model_with_endpoints_and_a_document_picks_one(
        tmp_path, tiny_model, llama_cpp_server):
    model, mmproj = tiny_model
    daemon = remote_daemon(tmp_path, endpoint(llama_cpp_server.url, "tiny", "gpu2"), name="auto",
                           model=str(model), mmproj=str(mmproj), retry_ladder=["tiled"])
    png = pages(tmp_path, 1)[0]
    with daemon.running():
        assert daemon.wait_ready()["engine"] == "llama+openai"
        docs = {engine: daemon.upload(png, engine=engine)["id"]
                for engine in ("openai", "llama", "classic")}
        daemon.wait_final(list(docs.values()))
        read = {engine: daemon.client.get(f"/api/v1/documents/{doc}/result?format=json")
                .json()["pages"][0]["provenance"] for engine, doc in docs.items()}
    assert read["openai"]["engine"] == "openai" and read["openai"]["endpoint"] == "gpu2"
    assert read["openai"]["model_id"] == "tiny@gpu2"
    assert read["llama"]["engine"] == "llama" and "endpoint" not in read["llama"]
    # the classic reader kept inside a vision worker, and so recorded
    assert read["classic"]["engine"] == "classic" and "endpoint" not in read["classic"]
