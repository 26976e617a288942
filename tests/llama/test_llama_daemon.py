"""The daemon with the llama engine on the tiny model: engine selection, warm-up
gating readiness, and the retry ladder end to end."""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient
from sqlmodel import select

from appliance.api import create_app
from appliance.daemon import Appliance
from appliance.engine_choice import resolve_engine
from appliance.errors import ConfigError, ModelError
from appliance.store import Database
from appliance.store.models import Page, PageResult
from tests.conftest import make_settings
from tests.daemon import Daemon
from tests.fixtures.documents import write_png


def llama_settings(tmp_path, tiny_model, name="llama", **engine):
    model, mmproj = tiny_model
    return make_settings(tmp_path, engine={"name": name, "model": str(model),
                                           "mmproj": str(mmproj), "threads": 1, **engine})


def test_auto_uses_a_verified_model_and_otherwise_says_why_not(tmp_path, tiny_model):
    spec, notice = resolve_engine(llama_settings(tmp_path, tiny_model, name="auto"))
    assert (spec.engine, notice) == ("llama", None)

    spec, notice = resolve_engine(make_settings(tmp_path, engine={"name": "auto"}))
    assert spec.engine == "classic" and notice.case == "no_model"
    assert str(notice).startswith("No vision model is configured, so the embedded classic")

    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"not a model")
    spec, notice = resolve_engine(make_settings(tmp_path, engine={
        "name": "auto", "model": str(broken), "mmproj": str(tiny_model[1])}))
    assert spec.engine == "classic" and notice.values["code"] == "model_not_gguf"
    assert "failed its checks" in str(notice)

    with pytest.raises(ModelError):
        resolve_engine(make_settings(tmp_path, engine={
            "name": "llama", "model": str(broken), "mmproj": str(tiny_model[1])}))
    with pytest.raises(ConfigError, match="needs engine.model and engine.mmproj"):
        resolve_engine(make_settings(tmp_path, engine={"name": "llama"}))


def test_readyz_stays_503_until_the_worker_has_warmed_up(tmp_path, tiny_model):
    appliance = Appliance(llama_settings(tmp_path, tiny_model))
    client = TestClient(create_app(appliance))
    appliance.start()
    try:
        early = client.get("/readyz")  # the spawned worker cannot have loaded a model yet
        assert early.status_code == 503
        assert early.json()["workers"][0]["warmed_up"] is False
        deadline = time.monotonic() + 120
        while client.get("/readyz").status_code != 200:
            assert time.monotonic() < deadline, "worker never warmed up"
            time.sleep(0.1)
        body = client.get("/readyz").json()
        assert body["engine"] == "llama" and body["workers"][0]["warmed_up"] is True
        assert body["workers"][0]["model_id"].startswith("tiny")
    finally:
        appliance.stop()


def test_daemon_climbs_the_retry_ladder_to_the_classic_fallback(tmp_path, tiny_model):
    # an invoice: on each page the vision model is also asked for the fields (it leaves
    # them empty, as random weights do here), and the rules read them from the text
    model, mmproj = tiny_model
    png = write_png(tmp_path / "invoice.png", ["ACME Trading GmbH", "Invoice No. 4711",
                                               "Date 03.11.2026", "Total 118.50 EUR"])
    daemon = Daemon(tmp_path, engine={"name": "llama", "model": str(model),
                                      "mmproj": str(mmproj)}).start()
    try:
        assert daemon.wait_ready()["engine"] == "llama"
        doc = daemon.upload(png, doc_type="invoice")
        final = daemon.wait_final([doc["id"]])[0]
        assert final["status"] == "done" and final["pages"][0]["attempts"] == 3
        page = daemon.client.get(f"/api/v1/documents/{doc['id']}/result?format=json").json()
        assert page["pages"][0]["flags"] == ["fallback"]
        assert page["pages"][0]["provenance"]["prompt_version"] == "gemma3/invoice/v1"
        assert page["pages"][0]["provenance"]["fields_question"] == "fields/v1"
        assert "4711" in page["pages"][0]["text"]
        fields = {f["name"]: f for f in page["document"]["fields"]}
        assert (fields["number"]["value"], fields["gross"]["value"]) == ("4711", "118.50")
        assert fields["gross"]["read_by"] == "rules"
    finally:
        daemon.stop()
    db = Database(daemon.data_dir / "appliance.db")
    with db.read() as session:
        attempts = session.exec(select(PageResult.attempt, PageResult.outcome,
                                       PageResult.field_answer)
                                .join(Page, Page.id == PageResult.page_id)
                                .where(Page.document_id == doc["id"])
                                .order_by(PageResult.attempt)).all()
    db.close()
    assert [(a, o) for a, o, _ in attempts] == [(1, "degenerate"), (2, "degenerate"), (3, "ok")]
    assert set(attempts[-1][2]) == {"number", "issue_date", "due_date", "seller", "buyer",
                                    "seller_vat_id", "net", "tax", "gross", "currency", "iban"}
