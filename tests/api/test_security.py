"""Who may talk to the daemon: every route without a key, with a wrong key, with a
right key, and from outside the allow-list; rate limits; the keys file."""

from __future__ import annotations

import subprocess
import sys

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from appliance.api import create_app
from appliance.config import dump_toml
from appliance.daemon import Appliance
from appliance.security import ApiKeys, RateLimiter
from appliance.users import Users
from tests.conftest import make_settings
from tests.daemon import Daemon
from tests.fixtures.documents import write_png


def api_routes(app) -> list[tuple[str, str]]:
    """(method, path) of every API route the app serves, path parameters filled in."""
    routes = []
    for route in app.routes:
        if isinstance(route, APIRoute):
            path = (route.path.replace("{document_id}", "0" * 32).replace("{rest:path}", "x")
                    .replace("{model_id}", "prebuilt-read").replace("{result_id}", "0" * 32))
            routes.extend((method, path) for method in sorted(route.methods))
    return routes


@pytest.fixture
def secured(tmp_path):
    settings = make_settings(tmp_path, auth={"rate_per_minute": 1000})
    key = ApiKeys(settings.auth.api_keys_file).add("scanner")
    appliance = Appliance(settings)
    app = create_app(appliance)
    yield app, key
    appliance.db.close()


def test_every_route_but_healthz_needs_a_valid_key(secured):
    app, key = secured
    client = TestClient(app)
    routes = api_routes(app)
    assert len(routes) >= 8 and ("GET", "/healthz") in routes
    for method, path in routes:
        kwargs = {"files": {"file": ("a.png", b"x")}} if method == "POST" and path.endswith(
            "documents") else {}
        anonymous = client.request(method, path, **kwargs)
        wrong = client.request(method, path, headers={"X-API-Key": "ocr_not-a-key"}, **kwargs)
        right = client.request(method, path, headers={"X-API-Key": key}, **kwargs)
        bearer = client.request(method, path, headers={"Authorization": f"Bearer {key}"},
                                **kwargs)
        # the header Document Intelligence clients send their key in
        azure = client.request(method, path, headers={"Ocp-Apim-Subscription-Key": key},
                               **kwargs)
        if path == "/healthz":
            assert anonymous.status_code == wrong.status_code == 200
            continue
        assert anonymous.status_code == 401, (method, path)
        # the Document Intelligence API answers in that service's terms
        assert anonymous.json()["error"]["code"] == (
            "Unauthorized" if path.startswith("/documentintelligence") else "unauthorized")
        assert wrong.status_code == 401, (method, path)
        assert right.status_code not in (401, 403), (method, path, right.text)
        assert bearer.status_code == azure.status_code == right.status_code, (method, path)
    for path in ("/docs", "/openapi.json"):
        assert client.get(path).status_code == 401
        assert client.get(path, headers={"X-API-Key": key}).status_code == 200


def test_the_allow_list_refuses_other_addresses_everywhere_but_healthz(tmp_path):
    settings = make_settings(tmp_path, auth={"allow_from": ["10.0.0.0/8"]})
    appliance = Appliance(settings)
    app = create_app(appliance)
    client = TestClient(app)  # its requests come from "testclient", not a 10.x address
    try:
        for method, path in api_routes(app):
            response = client.request(method, path)
            if path == "/healthz":
                assert response.status_code == 200
            else:
                assert response.status_code == 403, (method, path)
                assert response.json()["error"]["code"] == (
                    "Forbidden" if path.startswith("/documentintelligence")
                    else "forbidden_address")
    finally:
        appliance.db.close()


def test_without_keys_or_accounts_the_api_is_open(tmp_path):
    settings = make_settings(tmp_path)
    appliance = Appliance(settings)
    try:
        assert not appliance.auth_on()
        client = TestClient(create_app(appliance))
        assert client.get("/api/v1/documents").status_code == 200
        Users(settings.review.users_file).add("anna", "reviewer", "correct horse battery")
        assert appliance.auth_on()  # an account alone turns auth on: the API needs keys
        assert client.get("/api/v1/documents").status_code == 401
    finally:
        appliance.db.close()


def test_rate_limit_per_key(tmp_path):
    settings = make_settings(tmp_path)
    keys = ApiKeys(settings.auth.api_keys_file)
    slow, fast = keys.add("slow", rate_per_minute=3), keys.add("fast")
    appliance = Appliance(settings)
    try:
        client = TestClient(create_app(appliance))
        codes = [client.get("/api/v1/documents", headers={"X-API-Key": slow}).status_code
                 for _ in range(4)]
        assert codes == [200, 200, 200, 429]
        limited = client.get("/api/v1/documents", headers={"X-API-Key": slow})
        assert limited.json()["error"]["code"] == "rate_limited"
        assert 1 <= int(limited.headers["Retry-After"]) <= 20
        # another key has its own bucket
        assert client.get("/api/v1/documents", headers={"X-API-Key": fast}).status_code == 200
    finally:
        appliance.db.close()


def test_token_bucket_refills():
    limiter = RateLimiter()
    assert [limiter.take("k", 120) for _ in range(120)] == [0.0] * 120
    wait_s = limiter.take("k", 120)
    assert 0 < wait_s <= 0.5  # 120 a minute: one token every half second


def test_keys_file_holds_digests_only(tmp_path):
    config = tmp_path / "c.toml"
    config.write_text(dump_toml({"auth": {"api_keys_file": "keys.toml"}}))
    run = subprocess.run([sys.executable, "-m", "appliance.cli", "keys", "add", "scanner",
                          "--rate", "30", "--config", str(config)],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    key = run.stdout.strip()
    stored = (tmp_path / "keys.toml").read_text()
    assert key.startswith("ocr_") and key not in stored and "sha256:" in stored
    assert (tmp_path / "keys.toml").stat().st_mode & 0o777 == 0o600
    keys = ApiKeys(tmp_path / "keys.toml")
    assert keys.find(key).name == "scanner" and keys.find(key).rate_per_minute == 30
    subprocess.run([sys.executable, "-m", "appliance.cli", "keys", "remove", "scanner",
                    "--config", str(config)], check=True, capture_output=True, timeout=60)
    assert keys.find(key) is None


def test_a_real_daemon_on_loopback_with_a_key_and_an_allow_list(tmp_path):
    key = ApiKeys(tmp_path / "keys.toml").add("scanner")
    d = Daemon(tmp_path, auth={"api_keys_file": str(tmp_path / "keys.toml"),
                               "allow_from": ["127.0.0.0/8"]}).start()
    try:
        d.client.headers["X-API-Key"] = key
        d.wait_ready()
        d.client.headers.pop("X-API-Key")
        assert d.client.get("/healthz").status_code == 200
        assert d.client.get("/readyz").status_code == 401
        d.client.headers["X-API-Key"] = key
        marker = "Zebra quartz 90210 marker"
        doc = d.upload(write_png(tmp_path / "p.png", [marker]))["id"]
        d.wait_final([doc])
        assert marker in d.client.get(f"/api/v1/documents/{doc}/result").text
        d.client.headers.pop("X-API-Key")
        assert d.client.get(f"/api/v1/documents/{doc}/result").status_code == 401
    finally:
        d.stop()
    # logs never hold document text
    assert "Zebra" not in d.log_path.read_text(errors="replace")
