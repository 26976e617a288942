"""API keys in the web UI: an administrator makes and revokes the REST API's keys, as
`appliance keys add` and `appliance keys remove` do, in the same file (the digests only,
``appliance.security.ApiKeys``). A new key is shown once, in the answer to the request
that made it, and kept nowhere.

Only a signed-in administrator may: a reviewer is refused (and not shown the panel), and
where no login is configured nobody may, since the first key closes the UI to anyone not
signed in and there would be no account to sign in with.
"""

from __future__ import annotations

import logging

import gradio as gr

from appliance.daemon import Appliance
from appliance.errors import ApplianceError
from ui.components import escape_markdown_text, safe_markdown, safe_markdown_view
from ui.i18n import EN, label, language_of, text

log = logging.getLogger(__name__)


def may_manage_keys(appliance: Appliance, username: str | None) -> bool:
    """A signed-in administrator's right."""
    user = appliance.users.get(username) if username else None
    return user is not None and user.role == "admin"


def keys_text(appliance: Appliance, lang: str = EN) -> str:
    """The keys there are, by name (Markdown, escaped)."""
    names = appliance.api_keys.names()
    if not names:
        return text("api_keys_none", lang)
    return text("api_keys_list", lang,
                names=", ".join(f"`{escape_markdown_text(name)}`" for name in names))


def make_key(appliance: Appliance, username: str | None, name: str, lang: str = EN
             ) -> tuple[str, str]:
    """(a Markdown line on what happened, the new key or "" when none was made)."""
    if not may_manage_keys(appliance, username):
        log.warning("ui api key refused user=%s", username)
        return text("api_keys_refused", lang), ""
    name = name.strip()
    if name in appliance.api_keys.names():  # the CLI replaces; a click should not
        return text("api_key_exists", lang, name=escape_markdown_text(name)), ""
    try:
        key = appliance.api_keys.add(name)
    except ApplianceError as exc:  # a name the file cannot take
        return escape_markdown_text(exc.message), ""
    log.info("ui api key added name=%s user=%s", name, username)
    return text("api_key_made", lang, name=escape_markdown_text(name)), key


def revoke_key(appliance: Appliance, username: str | None, name: str | None,
               lang: str = EN) -> str:
    """Revoke the key ``name``; a Markdown line on what happened."""
    if not may_manage_keys(appliance, username):
        log.warning("ui api key revoke refused user=%s", username)
        return text("api_keys_refused", lang)
    if not name:
        return text("api_key_none_chosen", lang)
    try:
        appliance.api_keys.remove(name)
    except ApplianceError as exc:  # revoked in the meantime
        return escape_markdown_text(exc.message)
    log.info("ui api key revoked name=%s user=%s", name, username)
    return text("api_key_revoked", lang, name=escape_markdown_text(name))


class ApiKeysPanel:
    """The panel, folded and hidden until an administrator's page loads
    (``shown``), built where it is made."""

    def __init__(self, appliance: Appliance):
        self.appliance = appliance
        with gr.Accordion(label("api_keys"), open=False, visible=False,
                          elem_id="api-keys") as self.box:
            self.listed = safe_markdown_view(elem_id="api-keys-list")
            with gr.Row(equal_height=True):
                self.name = gr.Textbox(label=label("api_key_name"), elem_id="api-key-name",
                                       placeholder="scanner-3", max_length=32)
                self.make = gr.Button(label("api_key_make"), scale=0, min_width=120,
                                      elem_id="api-key-make")
                self.which = gr.Dropdown(label=label("api_key_which"), choices=[],
                                         elem_id="api-key-which")
                self.revoke = gr.Button(label("api_key_revoke"), variant="stop", scale=0,
                                        min_width=120, elem_id="api-key-revoke")
            # the new key, this once: gone at the next action or reload
            self.secret = gr.Textbox(label=label("api_key_secret"), interactive=False,
                                     visible=False, buttons=["copy"], elem_id="api-key-secret")
            self.message = safe_markdown_view(elem_id="api-keys-message")
        private = dict(api_visibility="private")
        outputs = [self.listed, self.which, self.secret, self.message]
        self.make.click(self._on_make, inputs=self.name, outputs=[*outputs, self.name],
                        trigger_mode="once", **private)
        self.revoke.click(self._on_revoke, inputs=self.which, outputs=outputs,
                          trigger_mode="once", **private)

    def shown(self, username: str | None, lang: str) -> list:
        """[the panel, its list, its choice of keys] as the page loads for ``username``."""
        allowed = may_manage_keys(self.appliance, username)
        return [gr.Accordion(visible=allowed), *self._listing(username, lang)]

    def _listing(self, username: str | None, lang: str) -> list:
        if not may_manage_keys(self.appliance, username):  # not even the names
            return [gr.skip(), gr.skip()]
        return [safe_markdown(keys_text(self.appliance, lang)),
                gr.Dropdown(choices=self.appliance.api_keys.names(), value=None)]

    def _on_make(self, name: str, request: gr.Request):
        lang, username = language_of(request), getattr(request, "username", None)
        said, key = make_key(self.appliance, username, name or "", lang)
        return [*self._listing(username, lang), gr.Textbox(value=key, visible=bool(key)),
                safe_markdown(said), "" if key else gr.skip()]

    def _on_revoke(self, name: str | None, request: gr.Request):
        lang, username = language_of(request), getattr(request, "username", None)
        said = revoke_key(self.appliance, username, name, lang)
        return [*self._listing(username, lang), gr.Textbox(value="", visible=False),
                safe_markdown(said)]
