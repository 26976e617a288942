"""API keys made and revoked by the web UI's handlers (ui.api_keys), in the keys file
the daemon's AccessGuard reads: an administrator may, a reviewer and an unnamed visitor
may not. The browser test is test_workspace_browser's
test_an_administrator_makes_a_key_that_opens_the_api_docs."""

from __future__ import annotations

import pytest

from appliance.users import Users
from tests.ui.test_ui_handlers import make_appliance
from ui.api_keys import keys_text, make_key, may_manage_keys, revoke_key
from ui.i18n import ZH

PASSWORD = "correct horse battery"


@pytest.fixture
def appliance(tmp_path):
    users = tmp_path / "users.toml"
    Users(users).add("ada", "admin", PASSWORD)
    Users(users).add("rita", "reviewer", PASSWORD)
    made = make_appliance(tmp_path, review={"users_file": str(users)},
                          auth={"api_keys_file": str(tmp_path / "api-keys.toml")})
    try:
        yield made
    finally:
        made.db.close()


def test_an_administrator_makes_a_key_shown_once_and_revokes_it(appliance):
    said, key = make_key(appliance, "ada", " scanner-3 ")
    assert "Key **scanner\\-3** made" in said
    assert appliance.api_keys.find(key).name == "scanner-3"  # the AccessGuard's lookup
    assert key not in appliance.api_keys.path.read_text()  # its digest only
    assert "`scanner\\-3`" in keys_text(appliance)
    # a second key of that name would revoke the first without a word: refused
    said, again = make_key(appliance, "ada", "scanner-3")
    assert again == "" and "exists already" in said
    assert appliance.api_keys.find(key) is not None
    said, none = make_key(appliance, "ada", "Bad Name!")
    assert none == "" and "must be 2\\-32 characters" in said
    assert "吊销" in revoke_key(appliance, "ada", "scanner-3", ZH)
    assert appliance.api_keys.find(key) is None and appliance.api_keys.names() == []
    assert "No API key yet" in keys_text(appliance)
    assert "no key named" in revoke_key(appliance, "ada", "scanner-3")


def test_a_reviewer_or_nobody_may_not_make_or_revoke_a_key(appliance):
    _said, key = make_key(appliance, "ada", "paperless")
    assert may_manage_keys(appliance, "ada")
    for who in ("rita", None, "someone-removed"):
        assert not may_manage_keys(appliance, who)
        said, made = make_key(appliance, who, "mine")
        assert made == "" and said.startswith("Only a signed-in administrator")
        assert revoke_key(appliance, who, "paperless").startswith("Only a signed-in admin")
    assert appliance.api_keys.names() == ["paperless"] and appliance.api_keys.find(key)
