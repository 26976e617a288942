"""The documents workspace's logic without a browser: the list's HTML and its escaping,
the query the controls make, paging, the time-left estimate, the page image's boxes,
and the actions on a real store (an Appliance that is never started; a generated
store of documents, as ``appliance bench --search`` makes them)."""

from __future__ import annotations

import re
import zipfile
from collections import Counter

import pytest
from PIL import Image

from appliance.library import DocStatus, DocumentPage, DocumentQuery, Hit, PageStatus, PageView
from appliance.measure.search_bench import generate_store
from appliance.store.models import Document, Page, PageResult
from appliance.store.queries import DocumentView, document_events
from appliance.users import Users
from tests.fixtures.documents import write_png
from tests.ui.test_ui_handlers import make_appliance
from ui.actions import (
    DELETE_REFUSED_TEXT, NO_LOGIN_ACTOR, delete_question, download_zip, may_delete, perform,
    picked_text,
)
from ui.components import escape_markdown_text
from ui.document_status import remaining_s
from ui.document_view import document_title, page_facts
from ui.i18n import ZH
from ui.listing import (
    DAY_S, PAGE_SIZE, Listed, browse_query, pager_offset, pager_text, results_html,
    snippet_html,
)
from ui.page_image import LINE_OUTLINE, annotate_page
from ui.workspace import user_line

HOSTILE = "<img src=x onerror=alert(1)>{{value}}${alert(2)}"
PASSWORD = "correct horse battery"


def view(name: str = "scan.pdf", status: DocStatus = DocStatus.DONE, **counts) -> DocumentView:
    doc = Document(id="d" * 32, name=name, sha256="0" * 64, page_count=sum(counts.values()),
                   source="watch", watch_folder=HOSTILE, tags=[HOSTILE, "finance"])
    return DocumentView(doc, status, Counter({PageStatus(k): v for k, v in counts.items()}))


def test_a_snippet_is_escaped_and_only_its_hits_are_marked():
    hit = Hit(2, f"…{HOSTILE} \x02invoice\x03 for <b>\x02chairs\x03</b>")
    assert snippet_html(hit) == (
        "…&lt;img src=x onerror=alert(1)&gt;&#123;&#123;value&#125;&#125;&#36;&#123;alert(2)"
        "&#125; <mark>invoice</mark> for &lt;b&gt;<mark>chairs</mark>&lt;/b&gt;")


def test_the_list_escapes_every_value_from_a_document():
    hostile = view(HOSTILE, done=1, queued=1, running=1)
    found = DocumentPage(total=1, documents=[hostile],
                         hits={hostile.doc.id: Hit(0, f"\x02{HOSTILE}\x03")})
    listed = Listed.of(DocumentQuery(q="chairs"), found)
    shown = results_html(listed, {hostile.doc.id: hostile}, remaining=lambda v: 42.0)
    assert "<img" not in shown and "{{" not in shown and "${" not in shown
    assert shown.count("<mark>") == 1
    assert 'data-open="' + "d" * 32 + '" data-page="0"' in shown
    assert '<progress value="1" max="3"' in shown and "about 42 s left" in shown
    assert "page 1:" in shown
    # deleted since: the row stays where it was, named (escaped), with nothing to tick
    gone = results_html(listed, {})
    assert "<img" not in gone and "data-pick=" not in gone and "data-open=" not in gone
    assert 'class="doc-deleted"' in gone and "&lt;img src=x" in gone and ">deleted<" in gone
    assert results_html(Listed.of(DocumentQuery(), DocumentPage(0, [])), {}) == \
        '<p class="doc-none">No document matches.</p>'


def test_pages_read_and_waiting_for_review_are_drawn_apart_from_pages_queued():
    """Issue 53: a page waiting for a reviewer showed the same empty 0/1 bar as a page
    still queued. Read and waiting, it fills the bar in another colour and says so."""
    waiting, queued = view("receipt.png", DocStatus.REVIEW, review=1), view(queued=1)
    for shown_view, bar, said in ((waiting, '<progress value="1" max="1" class="doc-waiting"',
                                   "0/1 pages · 1 read, waiting for review"),
                                  (queued, '<progress value="0" max="1" aria-label', "0/1 pages")):
        listed = Listed.of(DocumentQuery(), DocumentPage(total=1, documents=[shown_view]))
        shown = results_html(listed, {shown_view.doc.id: shown_view})
        assert bar in shown and said in shown, shown
    listed = Listed.of(DocumentQuery(), DocumentPage(total=1, documents=[waiting]))
    assert "1 页已识别，等待复核" in results_html(listed, {waiting.doc.id: waiting}, lang=ZH)


def test_a_redraw_keeps_the_rows_where_the_query_put_them():
    first, second, third = (view(f"{n}.pdf", done=1) for n in ("a", "b", "c"))
    for n, each in enumerate((first, second, third)):
        each.doc.id = str(n) * 32
    found = DocumentPage(total=3, documents=[first, second, third])
    listed = Listed.of(DocumentQuery(status=("partial",)), found)
    # the second left the filter and the first was deleted: the rows do not move
    moved = view("b.pdf", status=DocStatus.QUEUED, queued=1)
    moved.doc.id = second.doc.id
    shown = results_html(listed, {second.doc.id: moved, third.doc.id: third})
    assert re.findall(r'<tr data-document="(\w+)"', shown) == [d.doc.id for d in found.documents]
    assert ">queued<" in shown
    assert not listed.differs(found)
    assert listed.differs(DocumentPage(total=2, documents=[third]))
    assert pager_text(0, 3, 3, changed=True).endswith("Refresh list shows it")


def test_the_controls_make_one_query():
    query = browse_query("  invoice 4711 ", ["done", "partial"], "invoice", " hr ", "watch",
                         "scans", 1_700_000_000.0, 1_700_000_000.0, "classic", "invalid",
                         "name:asc", offset=100)
    assert query == DocumentQuery(
        q="invoice 4711", status=("done", "partial"), doc_type="invoice", tag="hr",
        source="watch", folder="scans", since=1_700_000_000.0, until=1_700_000_000.0 + DAY_S,
        engine="classic", fields_invalid=True, sort="name", descending=False,
        limit=PAGE_SIZE, offset=100)
    blank = browse_query("", [], "", "", "", "", None, None, "", "valid", None)
    assert blank == DocumentQuery(fields_invalid=False, limit=PAGE_SIZE)


def test_the_pager_stays_within_the_results():
    assert [pager_offset(move, 50, 1001) for move in ("first", "previous", "next", "last")] \
        == [0, 0, 100, 1000]
    assert pager_offset("next", 1000, 1001) == 1000
    assert pager_offset("last", 0, 0) == 0
    assert pager_text(1000, 1, 1001) == "1,001–1,001 of 1,001 documents"
    assert pager_text(0, 0, 0) == "No document matches."


def test_the_time_left_is_paced_by_the_pages_read_last():
    reading = view(status=DocStatus.PROCESSING, done=2, running=2, queued=3)
    assert remaining_s(reading, [1.0, 9.0, 2.0], readers=2) == 3 * 2.0
    assert remaining_s(reading, [], readers=2) is None  # nothing read lately
    waiting = view(status=DocStatus.QUEUED, queued=3)  # its wait is what is ahead of it
    assert remaining_s(waiting, [2.0], readers=1) is None


def test_every_line_is_outlined_under_the_doubtful_ones(tmp_path):
    image = write_png(tmp_path / "page.png", ["Some text"])
    drawn = annotate_page(image, [], lines=[[40, 40, 140, 80], None])
    with Image.open(image) as original:
        assert drawn.size == original.size
    assert drawn.getpixel((90, 60)) == (255, 255, 255)  # inside: untouched
    # the outline, just outside the line's box, in the outline's colour
    edge = [drawn.getpixel((x, 60)) for x in range(30, 41)]
    assert any(green > red and green > 150 and red < 150 for red, green, _blue in edge), edge
    assert LINE_OUTLINE[1] > LINE_OUTLINE[0]
    assert annotate_page(image, [], lines=[None]) == image


def test_a_title_escapes_the_document_s_facts():
    title = document_title(view(HOSTILE, done=1), reviewers_exist=True)
    assert re.search(r"(?<!\\)[<>{}$]", title) is None, title  # each one escaped


def test_a_page_s_codes_are_shown_escaped():
    """A barcode's value is whatever was printed: shown with the page's facts, escaped."""
    result = PageResult(page_id=1, attempt=1, outcome="ok", engine="classic", confidence=0.9,
                        barcodes=[{"format": "QRCode", "value": HOSTILE, "polygon": []}])
    facts = page_facts(PageView(Page(document_id="d" * 32, index=0), result, None), 1)
    assert "codes: QRCode " in facts
    assert re.search(r"(?<!\\)[<>{}$]", facts) is None, facts  # each one escaped


@pytest.fixture
def store(tmp_path):
    """An appliance with accounts (ada: admin, rita: reviewer) over 40 generated documents."""
    users = tmp_path / "users.toml"
    Users(users).add("ada", "admin", PASSWORD)
    Users(users).add("rita", "reviewer", PASSWORD)
    appliance = make_appliance(tmp_path, review={"enabled": False, "users_file": str(users)})
    generate_store(appliance.db, 40)
    try:
        yield appliance
    finally:
        appliance.db.close()


def ids(appliance, **query) -> list[str]:
    return [v.doc.id for v in appliance.library.find(DocumentQuery(**query)).documents]


def audit(appliance, document_id: str) -> list[tuple[str, str]]:
    return [(e.kind, e.actor) for e in document_events(appliance.db, document_id)]


def test_actions_are_done_under_the_signed_in_name(store):
    partial = ids(store, status=("partial",))[:2]
    assert partial
    message = perform(store, "retry", partial, "ada")
    assert message.startswith(f"**Retry failed pages:** {len(partial)} document")
    assert all(("retried", "ada") in audit(store, d) for d in partial)

    queued = ids(store, status=("queued",))[:1]
    assert perform(store, "cancel", queued, "ada") == "**Cancel:** 1 document cancelled."
    assert ("cancelled", "ada") in audit(store, queued[0])

    done = ids(store, status=("done",))
    assert perform(store, "delete", done[:1], "ada") == "**Delete:** 1 document deleted."
    assert ("deleted", "ada") in audit(store, done[0])
    gone = perform(store, "retry", done[:1], "ada")
    assert "not queued their failed pages again" in gone and "not\\_found" in gone
    assert perform(store, "retry", [], "ada").startswith("Tick the documents")


def test_delete_asks_naming_what_it_deletes(store):
    chosen = ids(store)[:7]
    with store.db.write() as session:  # a hostile file name
        session.get(Document, chosen[0]).name = HOSTILE
    question = delete_question(store, chosen)
    assert question.startswith("**Delete 7 documents for good?** ")
    assert re.search(r"(?<!\\)[<>{}$]", question) is None, question  # each one escaped
    named, more, _rest = re.split(r" and (\d+) more\. ", question)
    assert named.count(", ") == 4 and more == "2"
    names = {v.doc.id: escape_markdown_text(v.doc.name) for v in store.library.find().documents}
    assert names[chosen[1]] in question and names[chosen[6]] not in question
    perform(store, "delete", chosen[1:2], "ada")
    assert picked_text(store, chosen[:2]).endswith(", (deleted)")


def test_retry_gives_the_reason_files_were_refused_once_naming_them(store):
    refused = ids(store, status=("done",))[:7]
    why = "The file's content starts with no known file signature: it is damaged"
    with store.db.write() as session:
        for number, document_id in enumerate(refused):
            doc = session.get(Document, document_id)
            doc.name, doc.error_message = f"bad-{number}.pdf", why
            doc.error_code = "unrecognized_file"
    message = perform(store, "retry", refused, "ada")
    assert why not in message  # the document view has it, not seven times over
    lines = message.split("\n")
    assert lines[0] == ("**Retry failed pages:** 0 documents queued their failed pages again "
                        "(0 pages).")
    assert len(lines) == 2 and lines[1].count("unrecognized\\_file") == 1, message
    named = ", ".join(escape_markdown_text(f"bad-{n}.pdf") for n in range(5))
    assert lines[1].startswith(f"- not queued their failed pages again: {named} and 2 more: ")
    assert "refused when submitted" in lines[1]
    assert perform(store, "retry", refused, "ada", ZH).count("unrecognized\\_file") == 1


def test_the_delete_question_counts_one_document_as_one(store):
    one = delete_question(store, ids(store)[:1])
    assert one.startswith("**Delete 1 document for good?** ")
    assert "Its pages" in one and "deleted it." in one and "Their" not in one
    assert "这些" not in delete_question(store, ids(store)[:1], ZH)
    two = delete_question(store, ids(store)[:2], ZH)
    assert two.startswith("**永久删除 2 个文档？** ") and "这些文档的页面" in two


def test_a_reviewer_may_not_delete(store):
    done = ids(store, status=("done",))[:1]
    assert may_delete(store, "ada") and not may_delete(store, "rita")
    assert not may_delete(store, None)  # logins are configured: nobody unnamed
    assert perform(store, "delete", done, "rita") == DELETE_REFUSED_TEXT
    assert store.library.document(done[0])  # still there
    assert "deleting is for administrators" in user_line(store, "rita")
    assert user_line(store, "ada") == "Signed in as **ada** (admin)"


def test_without_logins_anyone_may_delete_and_is_named_so(tmp_path):
    appliance = make_appliance(tmp_path)
    generate_store(appliance.db, 5)
    try:
        done = ids(appliance, status=("done",))[:1]
        assert may_delete(appliance, None) and user_line(appliance, None) == ""
        perform(appliance, "delete", done, None)
        assert ("deleted", NO_LOGIN_ACTOR) in audit(appliance, done[0])
    finally:
        appliance.db.close()


def test_the_ticked_documents_outputs_in_one_zip(store, tmp_path):
    done = ids(store, status=("done",))[:2]
    queued = ids(store, status=("queued",))[:1]
    path, message = download_zip(store, done + queued, tmp_path / "zips")
    assert "outputs of 2 documents" in message and "not finished yet" in message
    # the generated documents have no originals: no searchable PDF, and it says so
    assert "no searchable PDF" in message
    with zipfile.ZipFile(path) as archive:
        names = archive.namelist()
    names_of = {v.doc.id: v.doc.name for v in store.library.find().documents}
    for document_id in done:
        stem = names_of[document_id].removesuffix(".pdf")
        assert f"{stem}-{document_id[:8]}/{stem}.md" in names
        assert f"{stem}-{document_id[:8]}/{stem}.json" in names
    assert download_zip(store, queued, tmp_path / "zips")[0] is None
