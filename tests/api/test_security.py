"""Who may talk to the daemon: every route without a key, with a wrong key, with a
right key, and from outside the allow-list; rate limits; the keys file."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from fastapi.routing import APIRoute, iter_route_contexts
from fastapi.testclient import TestClient
from starlette.routing import Mount

from appliance.api import create_app
from appliance.config import dump_toml
from appliance.daemon import Appliance
from appliance.security import ApiKeys, RateLimiter
from appliance.users import MAX_FAILED_LOGINS, Users
from tests.conftest import make_settings
from tests.daemon import Daemon, serving
from tests.fixtures.documents import write_png


def api_routes(app) -> list[tuple[str, str]]:
    """(method, path) of every API route the app serves, path parameters filled in."""
    routes = []
    for route in app.routes:
        if isinstance(route, APIRoute):
            path = (route.path.replace("{document_id}", "0" * 32).replace("{rest:path}", "x")
                    .replace("{model_id}", "prebuilt-read").replace("{number}", "1").replace("{result_id}", "0" * 32))
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


def every_route(routes, prefix: str = "") -> list[tuple[str, str]]:
    """(method, path) of every route, the mounted apps' too (the UIs' Gradio routes),
    path parameters filled in."""
    found = []
    for route in iter_route_contexts(routes):
        mounted = route.original_route
        if isinstance(mounted, Mount):
            inner = getattr(mounted.app, "ui_app", mounted.app)  # past ui.auth's gate
            below = every_route(getattr(inner, "routes", None) or [], prefix + mounted.path)
            found += below or [("GET", f"{prefix}{mounted.path}/x")]  # static files
            continue
        assert route.methods, f"{route.path}: a WebSocket route; call it here too"
        path = re.sub(r"\{[^}]+\}", "x", prefix + route.path)
        found += [(method, path) for method in sorted(route.methods)]
    return found


# Routes that answer without a session or a key: the sign-in page, and health.
OPEN_ROUTES = {("GET", "/healthz"), ("GET", "/login")}


def test_every_route_of_the_whole_app_refuses_a_caller_without_credentials(tmp_path):
    """Every route the running daemon serves, the REST API's, the sign-in's and each
    mounted Gradio app's, with each method it takes: without a key or a session it
    answers 401 or 403, or sends the browser to the sign-in page."""
    from ui.app import mount_ui

    settings = make_settings(tmp_path)
    ApiKeys(settings.auth.api_keys_file).add("scanner")
    Users(settings.review.users_file).add("anna", "reviewer", "correct horse battery")
    appliance = Appliance(settings)
    app = create_app(appliance)
    mount_ui(app, appliance)
    routes = every_route(app.routes)
    assert len(routes) > 150 and ("GET", "/gradio_api/heartbeat/x") in routes
    assert ("POST", "/review/gradio_api/cancel") in routes
    answered = []
    try:
        with serving(app, settings) as client:
            for method, path in routes:
                for accept in ("*/*", "text/html"):  # an API client's, and a browser's
                    # streamed: an event stream (the heartbeat) is judged by its headers
                    with client.stream(method, path, headers={"Accept": accept},
                                       follow_redirects=True) as response:
                        refused = response.status_code in (401, 403) or (
                            response.history and response.url.path == "/login")
                        if not refused and (method, path) not in OPEN_ROUTES:
                            answered.append((method, path, accept, response.status_code))
    finally:
        appliance.db.close()
    assert not answered, f"{len(answered)} answers without credentials: {answered}"


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


@pytest.mark.parametrize("host, allow_from, allowed", [
    ("127.0.0.1", "127.0.0.0/8", True), ("127.0.0.1", "10.0.0.0/8", False),
    ("::1", "::/120", True), ("::1", "fd00::/8", False),
    ("::1", "127.0.0.0/8", False)])  # an IPv6 peer is not in an IPv4 network
def test_the_allow_list_judges_a_real_peer_by_each_network(tmp_path, host, allow_from, allowed):
    settings = make_settings(tmp_path, server={"host": host}, auth={"allow_from": [allow_from]})
    appliance = Appliance(settings)
    try:
        with serving(create_app(appliance), settings) as client:
            listing = client.get("/api/v1/documents")
            assert client.get("/healthz").status_code == 200
    finally:
        appliance.db.close()
    if allowed:
        assert listing.status_code == 200, listing.text
    else:
        assert listing.status_code == 403
        assert listing.json()["error"]["code"] == "forbidden_address"
        assert host in listing.json()["error"]["message"]


def test_forwarded_for_from_a_peer_that_is_no_trusted_proxy_changes_nothing(tmp_path, caplog):
    """Any local process can send X-Forwarded-For: with server.trusted_proxies empty (the
    default) the allow-list and the login lock-out see the real peer, 127.0.0.1."""
    from ui.auth import Sessions, mount_sign_in

    settings = make_settings(tmp_path, auth={"allow_from": ["127.0.0.0/8"]})
    appliance = Appliance(settings)
    app = create_app(appliance)
    mount_sign_in(app, Sessions(appliance.users))
    try:
        with serving(app, settings) as client:
            outside = client.get("/api/v1/documents", headers={"X-Forwarded-For": "10.1.2.3"})
            assert outside.status_code == 200, outside.text  # judged as 127.0.0.1
            appliance.users.add("anna", "reviewer", "correct horse battery")
            for i in range(MAX_FAILED_LOGINS):  # a fresh "address" for every guess
                guess = client.post("/login", data={"username": "anna", "password": f"guess {i}"},
                                    headers={"X-Forwarded-For": f"127.0.5.{i}"})
                assert guess.status_code == 401
            right = client.post("/login", data={"username": "anna",
                                                "password": "correct horse battery"},
                                headers={"X-Forwarded-For": "127.0.5.99"}, follow_redirects=False)
            assert right.status_code == 401  # 127.0.0.1 is locked out for anna
    finally:
        appliance.db.close()
    assert "address=127.0.0.1" in caplog.text and "127.0.5." not in caplog.text


def test_forwarded_for_from_a_trusted_proxy_names_the_client(tmp_path):
    settings = make_settings(tmp_path, server={"trusted_proxies": ["127.0.0.1"]},
                             auth={"allow_from": ["10.0.0.0/8"]})
    appliance = Appliance(settings)
    try:
        with serving(create_app(appliance), settings) as client:
            inside = client.get("/api/v1/documents", headers={"X-Forwarded-For": "10.1.2.3"})
            outside = client.get("/api/v1/documents", headers={"X-Forwarded-For": "192.0.2.7"})
            proxy_itself = client.get("/api/v1/documents")
    finally:
        appliance.db.close()
    assert inside.status_code == 200, inside.text
    assert outside.status_code == 403 and "192.0.2.7" in outside.json()["error"]["message"]
    assert proxy_itself.status_code == 403


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


def test_on_a_network_address_no_account_and_no_key_closes_everything(tmp_path):
    """A lost or emptied users or keys file closes a daemon other hosts can reach; it
    never opens it, unless auth.open = true says so."""
    closed = Appliance(make_settings(tmp_path / "closed", server={"host": "0.0.0.0"}))
    opened = Appliance(make_settings(tmp_path / "open", server={"host": "0.0.0.0"},
                                     auth={"open": True}))
    try:
        assert closed.auth_on() and not opened.auth_on()
        assert TestClient(create_app(closed)).get("/api/v1/documents").status_code == 401
        assert TestClient(create_app(opened)).get("/api/v1/documents").status_code == 200
    finally:
        closed.db.close()
        opened.db.close()


def test_a_daemon_on_a_network_address_without_account_or_key_refuses_to_start(tmp_path):
    d = Daemon(tmp_path, server={"host": "0.0.0.0"}).start()
    try:
        assert d.wait_exit(timeout_s=30) == 2
    finally:
        d.stop()
    log = d.log()
    assert "error (config_error): server.host = '0.0.0.0'" in log
    assert "`appliance users add NAME`" in log and "`appliance keys add NAME`" in log
    assert "auth.open = true" in log


def test_a_daemon_on_a_network_address_with_auth_open_starts_and_warns(tmp_path):
    with Daemon(tmp_path, server={"host": "0.0.0.0"}, auth={"open": True}).running() as d:
        assert d.client.get("/api/v1/documents").status_code == 200  # open, as asked
    assert "WARNING appliance.daemon: auth.open = true" in d.log()


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
