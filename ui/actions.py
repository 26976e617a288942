"""What a person can do with documents from the web UI, to one (the document view) or
to those ticked in the list: read failed pages again, cancel, send to review, delete,
and download their outputs as one zip; and to the page shown, turn it and read it again.

The backend audits each action under the actor it is given: the signed-in user's
name (``gr.Request.username``), or ``NO_LOGIN_ACTOR`` where no login is configured.
Deleting is an administrator's: a reviewer is refused (and the UI does not offer
it); with no login configured, whoever reaches the UI may delete. Turning a page needs
the review console's rights (a signed-in account), so with no login nobody may.
"""

from __future__ import annotations

import logging
import tempfile
import time
from pathlib import Path

from appliance.daemon import Appliance
from appliance.errors import ApplianceError, NotFound
from appliance.library import DocumentView, PageStatus
from ui.components import escape_markdown_text
from ui.document_status import error_text
from ui.i18n import EN, plural, text
from ui.downloads import zip_outputs

log = logging.getLogger(__name__)

NO_LOGIN_ACTOR = "web-ui"
ACTIONS = ("retry", "cancel", "review", "delete")  # each: action_X (its button), done_X (done)
NOTHING_SELECTED_TEXT = text("nothing_ticked")
DELETE_REFUSED_TEXT = text("delete_refused")
INTERNAL_ERROR_TEXT = text("action_internal_error")


NAMED = 5  # documents named in a line about several; more are counted


def names_text(appliance: Appliance, document_ids: list[str], lang: str = EN) -> str:
    """The documents' names as Markdown text (escaped: a file name is untrusted), e.g.
    "a.pdf, b.pdf and 4 more"."""
    names = []
    for document_id in document_ids[:NAMED]:
        try:
            names.append(escape_markdown_text(appliance.library.document(document_id).doc.name))
        except NotFound:
            names.append(text("names_deleted", lang))  # our words: no markup
    return _named(names, len(document_ids), lang)


def _named(names: list[str], count: int, lang: str = EN) -> str:
    """The first NAMED of ``count`` names (Markdown: escaped), and how many more."""
    more = text("names_more", lang, n=count - NAMED) if count > NAMED else ""
    return ("，" if lang != EN else ", ").join(names[:NAMED]) + more


def _documents(count: int, lang: str = EN) -> str:
    return plural("documents", count, lang)


def picked_text(appliance: Appliance, chosen: list[str], lang: str = EN) -> str:
    """How many documents are ticked, and which: an action acts on these names."""
    if not chosen:
        return text("none_ticked", lang)
    return text("ticked", lang, documents=_documents(len(chosen), lang),
                names=names_text(appliance, chosen, lang))


def delete_question(appliance: Appliance, document_ids: list[str], lang: str = EN) -> str:
    """What Delete asks before it deletes."""
    return plural("delete_question", len(document_ids), lang,
                  names=names_text(appliance, document_ids, lang))


def actor_of(username: str | None) -> str:
    """Whom the audit trail names for an action from the UI."""
    return username or NO_LOGIN_ACTOR


def may_delete(appliance: Appliance, username: str | None) -> bool:
    """An administrator may delete; so may anyone where no login is configured."""
    if not username:
        return not appliance.auth_on()
    user = appliance.users.get(username)
    return user is not None and user.role == "admin"


def may_review(appliance: Appliance, username: str | None) -> bool:
    """The review console's rights: a signed-in account, a reviewer's or an
    administrator's. Where no login is configured nobody has them (the console always
    wants a sign-in)."""
    return bool(username) and appliance.users.get(username) is not None


def turn_page(appliance: Appliance, document_id: str | None, index: int, degrees: int,
              username: str | None, lang: str = EN) -> str:
    """Turn the document's page at ``index`` (0-based) ``degrees`` clockwise and have it
    read again, as the review console does; a Markdown line on what happened."""
    if not document_id:
        return text("no_document", lang)
    if not may_review(appliance, username):
        log.warning("ui turn refused user=%s doc=%s", username, document_id)
        return text("turn_refused", lang)
    try:
        appliance.review.turn(username, document_id, index + 1, degrees)
    except ApplianceError as exc:  # queued, being read, open in the console, deleted
        return text("turn_not", lang, n=index + 1,
                    why=escape_markdown_text(error_text(exc.code, exc.message, lang)))
    log.info("ui page turned doc=%s page=%d degrees=%d user=%s", document_id, index + 1,
             degrees, username)
    return text("turn_done", lang, n=index + 1)


def not_retried(view: DocumentView, lang: str = EN) -> str:
    """Why Retry would read nothing of the document again; "" when it would. A file
    refused at intake is named by its reason code: a message of its own would be said
    again for each of the files ticked, and the document view has it."""
    if view.doc.error_code:
        return text("not_retried_refused", lang, code=view.doc.error_code)
    if not view.page_counts[PageStatus.FAILED]:
        return text("not_retried_none", lang)
    return ""


def _act(appliance: Appliance, action: str, document_id: str, actor: str) -> int:
    """Do ``action`` to one document; how many pages it queued again (retry)."""
    if action == "retry":
        return appliance.retry(document_id, actor)
    if action == "cancel":
        appliance.cancel(document_id, actor)
    elif action == "review":
        appliance.send_to_review(document_id, actor)
    elif action == "delete":
        appliance.delete(document_id, actor)
    else:
        raise ValueError(f"unknown document action {action!r}")
    return 0


def perform(appliance: Appliance, action: str, document_ids: list[str],
            username: str | None, lang: str = EN) -> str:
    """Do ``action`` to each document; a Markdown line on what happened (names and
    reasons escaped: a file name is untrusted)."""
    if not document_ids:
        return text("nothing_ticked", lang)
    if action == "delete" and not may_delete(appliance, username):
        log.warning("ui delete refused user=%s documents=%d", username, len(document_ids))
        return text("delete_refused", lang)
    actor = actor_of(username)
    done, pages = 0, 0
    refused: dict[str, list[str]] = {}  # why -> the names of the documents it holds back
    for document_id in document_ids:
        name = document_id
        try:
            view = appliance.library.document(document_id)
            name = view.doc.name
            if action == "retry" and (why := not_retried(view, lang)):
                refused.setdefault(why, []).append(name)
                continue
            pages += _act(appliance, action, document_id, actor)
            done += 1
        except ApplianceError as exc:  # deleted since, a page being read, ...
            refused.setdefault(error_text(exc.code, exc.message, lang), []).append(name)
        except Exception:
            log.exception("ui action failed action=%s doc=%s", action, document_id)
            refused.setdefault(text("action_internal_error", lang), []).append(name)
    past = text(f"done_{action}", lang)
    line = text("action_line", lang, label=text(f"action_{action}", lang),
                documents=_documents(done, lang), past=past)
    if action == "retry":
        line += text("action_pages", lang, pages=plural("pages", pages, lang))
    return line + ("。" if lang != EN else ".") + "".join(
        text("action_not", lang, past=past, why=escape_markdown_text(why),
             names=_named([escape_markdown_text(n) for n in names[:NAMED]], len(names), lang))
        for why, names in refused.items())


def download_zip(appliance: Appliance, document_ids: list[str], folder: Path, lang: str = EN
                 ) -> tuple[Path | None, str]:
    """The selected documents' outputs as one zip in ``folder``: (the zip, or None when
    none of them is finished; a Markdown line on what it holds)."""
    if not document_ids:
        return None, text("nothing_ticked", lang)
    folder.mkdir(parents=True, exist_ok=True)
    # a folder per request: two people zipping at once never share a file
    zip_path = Path(tempfile.mkdtemp(dir=folder)) / f"documents-{time.strftime('%Y%m%d-%H%M%S')}.zip"
    added, left_out = zip_outputs(appliance, document_ids, zip_path, lang)
    notes = "".join(f"\n- {escape_markdown_text(why)}" for why in left_out)
    if not added:
        zip_path.unlink(missing_ok=True)
        return None, text("zip_none", lang) + notes
    return zip_path, text("zip_done", lang, documents=_documents(added, lang)) + notes
