"""Signing in to the web UI at "/" and the review console at "/review", once for both:
wrong names and passwords refused (over HTTP and in a real Chromium), Gradio's API
closed without a session, sign-out ending it for both, a removed account's session
ending at once, no open redirect, the first account protecting a running daemon at
once, and the throttle that slows guessing without locking the real user out."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from appliance.users import MAX_FAILED_LOGINS, MAX_TRACKED, LoginThrottle, Users
from tests.browser import UI_TIMEOUT_MS, launched_chromium, screenshot_on_failure
from tests.daemon import Daemon

PASSWORD = "correct horse battery"
WRONG_LOGINS = [("nobody", "guess-xyz-1"), ("anna", "wrong password 2"), ("anna", "")]


@pytest.fixture(scope="module")
def daemon(tmp_path_factory):
    """A daemon that starts with no account and no key: its UI is open until one exists."""
    tmp = tmp_path_factory.mktemp("login-daemon")
    d = Daemon(tmp, review={"users_file": str(tmp / "users.toml")},
               auth={"api_keys_file": str(tmp / "api-keys.toml")})
    d.users = Users(tmp / "users.toml")
    with d.running():
        yield d


@pytest.fixture
def anna(daemon):
    daemon.users.add("anna", "reviewer", PASSWORD)
    return daemon


def ui_routes_status(client) -> dict[str, int]:
    """What Gradio's own routes answer this client: the page config, an upload, the queue."""
    return {
        "config": client.get("/config").status_code,
        "upload": client.post("/gradio_api/upload",
                              files={"files": ("a.png", b"\x89PNG\r\n\x1a\n")}).status_code,
        "queue": client.post("/gradio_api/queue/join",
                             json={"data": [], "fn_index": 0, "session_hash": "x"}).status_code,
    }


def test_the_first_account_protects_the_running_ui_at_once(daemon):
    assert not daemon.users.names()
    assert ui_routes_status(daemon.client)["config"] == 200  # open: no account, no key yet
    daemon.users.add("anna", "reviewer", PASSWORD)  # as `appliance users add` does
    assert set(ui_routes_status(daemon.client).values()) == {401}


def review_routes_status(client) -> dict[str, int]:
    return {"config": client.get("/review/config").status_code,
            "queue": client.post("/review/gradio_api/queue/join",
                                 json={"data": [], "fn_index": 0, "session_hash": "x"}
                                 ).status_code}


def sign_in(client, name: str, password: str, target: str = "/"):
    return client.post("/login", data={"username": name, "password": password,
                                       "next": target}, follow_redirects=False)


def test_wrong_logins_are_refused_and_their_sessions_open_nothing(anna):
    for name, password in WRONG_LOGINS:
        response = sign_in(anna.client, name, password)
        assert response.status_code == 401, (name, response.text)
        assert "Wrong name or password" in response.text
        assert "appliance-session" not in response.headers.get("set-cookie", "")
        # whatever the failed login left in the client's cookie jar opens nothing
        assert set(ui_routes_status(anna.client).values()) == {401}, name
        assert set(review_routes_status(anna.client).values()) == {401}, name
    log = anna.log()
    assert "ui login refused user='nobody' address=127.0.0.1" in log
    assert "guess-xyz-1" not in log and "wrong password 2" not in log
    anna.client.cookies.set("appliance-session", "made-up-token")
    assert anna.client.get("/config").status_code == 401
    anna.client.cookies.clear()


def test_one_sign_in_opens_both_uis_and_sign_out_closes_both(anna):
    client = anna.client
    page = client.get("/review/", headers={"accept": "text/html"}, follow_redirects=False)
    assert page.status_code == 303 and page.headers["location"] == "/login?next=/review/"
    ok = sign_in(client, "anna", PASSWORD, "/review/")
    assert ok.status_code == 303 and ok.headers["location"] == "/review/"
    cookie = ok.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=lax" in cookie
    assert ui_routes_status(client)["config"] == 200
    assert review_routes_status(client)["config"] == 200
    out = client.get("/logout", follow_redirects=False)
    assert out.status_code == 303 and out.headers["location"] == "/login"
    assert set(ui_routes_status(client).values()) == {401}
    assert set(review_routes_status(client).values()) == {401}
    # a sign-in never sends the browser off this server
    for target in ("https://evil.example/", "//evil.example/x", "/\\evil.example"):
        assert sign_in(client, "anna", PASSWORD, target).headers["location"] == "/"
    client.get("/logout")
    client.cookies.clear()


def test_a_removed_account_is_signed_out_at_once(daemon):
    daemon.users.add("bert", "reviewer", PASSWORD)
    assert sign_in(daemon.client, "bert", PASSWORD).status_code == 303
    assert ui_routes_status(daemon.client)["config"] == 200
    daemon.users.remove("bert")
    assert set(ui_routes_status(daemon.client).values()) == {401}
    daemon.client.cookies.clear()


def test_the_log_names_the_address_and_never_the_password(anna):
    anna.client.post("/login", data={"username": "anna", "password": "Tr0ub4dor&3-secret"})
    log = anna.log_path.read_text()
    assert "ui login refused user='anna' address=127.0.0.1" in log
    assert "Tr0ub4dor" not in log


def test_wrong_logins_fail_in_chromium(anna, tmp_path):
    with launched_chromium() as chromium:
        context = chromium.new_context(viewport={"width": 1280, "height": 1000})
        context.set_default_timeout(UI_TIMEOUT_MS)
        page = context.new_page()
        with screenshot_on_failure(page, tmp_path, anna):
            page.goto(f"http://127.0.0.1:{anna.port}/", wait_until="domcontentloaded")
            for name, password in WRONG_LOGINS:
                log_in(page, name, password)
                expect(page.get_by_label("username")).to_be_visible()
                # the name stays for the next try; the password is typed again
                expect(page.get_by_label("username")).to_have_value(name)
                expect(page.get_by_label("password")).to_have_value("")
                page.wait_for_timeout(500)  # an app that appeared would have by now
                assert page.locator("#status-line").count() == 0, (name, password)
            log_in(page, "anna", PASSWORD)
            expect(page.locator("#status-line")).to_be_visible()
            expect(page.locator("#workspace-user")).to_contain_text("Signed in as anna")
            page.goto(f"http://127.0.0.1:{anna.port}/review/", wait_until="domcontentloaded")
            expect(page.locator("#review-counts")).to_contain_text("signed in as anna")
            page.get_by_role("link", name="Log out").click()  # out of both
            expect(page.get_by_label("username")).to_be_visible()
            page.goto(f"http://127.0.0.1:{anna.port}/", wait_until="domcontentloaded")
            expect(page.get_by_label("username")).to_be_visible()
        context.close()


def log_in(page: Page, name: str, password: str) -> None:
    expect(page.get_by_label("username")).to_be_visible()
    page.get_by_label("username").fill(name)
    page.get_by_label("password").fill(password)
    page.get_by_role("button", name="Login").click()


# --- the throttle: pure, with the clock stepped by hand ---------------------------


def test_a_lock_runs_a_fixed_window_that_further_guesses_do_not_extend():
    throttle = LoginThrottle(per_pair=3, per_address=100, window_s=300)
    for t in (0, 1, 2):
        assert not throttle.locked("anna", "10.0.0.66", t)
        throttle.failed("anna", "10.0.0.66", t)
    for t in (3, 100, 250, 299):  # the attacker keeps trying during the lock
        assert throttle.locked("anna", "10.0.0.66", t)
        # refused attempts are not checked, so they never count as failures
    assert not throttle.locked("anna", "10.0.0.66", 302)  # 300 s after the lock began


def test_a_guessing_address_never_locks_the_real_user_out():
    throttle = LoginThrottle(per_pair=3, per_address=100, window_s=300)
    for t in range(3):
        throttle.failed("anna", "10.0.0.66", t)
    assert throttle.locked("anna", "10.0.0.66", 5)
    assert not throttle.locked("anna", "10.0.0.5", 5)  # anna at her own desk


def test_an_address_that_sprays_many_names_is_locked_for_all_of_them():
    throttle = LoginThrottle(per_pair=3, per_address=4, window_s=300)
    for t, name in enumerate(("anna", "ben", "carl", "dora")):
        throttle.failed(name, "10.0.0.66", t)
    assert throttle.locked("erik", "10.0.0.66", 10)
    assert not throttle.locked("erik", "10.0.0.7", 10)


def test_failures_older_than_the_window_do_not_add_up_and_success_clears_them():
    throttle = LoginThrottle(per_pair=3, per_address=100, window_s=300)
    throttle.failed("anna", "a", 0)
    throttle.failed("anna", "a", 1)
    throttle.failed("anna", "a", 400)  # the first two are older than the window
    assert not throttle.locked("anna", "a", 401)
    throttle.failed("anna", "a", 402)
    throttle.succeeded("anna", "a")
    throttle.failed("anna", "a", 403)
    assert not throttle.locked("anna", "a", 404)


def test_guesses_from_ever_new_addresses_are_remembered_within_a_bound():
    throttle = LoginThrottle()
    addresses = [f"10.{i >> 16}.{i >> 8 & 255}.{i & 255}" for i in range(MAX_TRACKED + 500)]
    for i, address in enumerate(addresses):
        for _ in range(MAX_FAILED_LOGINS):  # each locks anna for its address
            throttle.failed("anna", address, i / 1000)  # all within one lock's window
    assert len(throttle._failures) <= MAX_TRACKED
    assert len(throttle._locked_until) <= MAX_TRACKED
    now = len(addresses) / 1000
    assert throttle.locked("anna", addresses[-1], now)  # the newest lock holds
    assert not throttle.locked("anna", addresses[0], now)  # the oldest is forgotten
