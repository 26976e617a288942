"""What a PDF page's content shows, read from its content streams (pikepdf): whether it
shows text of its own, in which text render mode each string is shown, and the forms
it draws. The searchable PDF asks it where a text layer would make a page's text
extract twice; the text-layer reader, whether a page it reads shows its text.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pikepdf

log = logging.getLogger(__name__)

# the operators that show text, and how many forms a page's check looks into
_SHOW_TEXT = "Tj TJ ' \""
INVISIBLE = 3  # the text render mode that neither fills nor strokes: an OCR layer's
_MAX_FORMS = 256


def shows_text(page: pikepdf.Dictionary) -> bool:
    """Whether the page's content, or a form it draws, shows a string: a text layer
    added to it would make its text extract twice."""
    import pikepdf

    seen: set[tuple[int, int]] = set()
    pending = [page]
    while pending:
        container = pending.pop()
        try:
            for operands, _operator in pikepdf.parse_content_stream(container, _SHOW_TEXT):
                if any(has_string(operand) for operand in operands):
                    return True
        except pikepdf.PdfError:  # content pdfium still displays as far as it can
            log.info("event=unparsed_content page_text_check=skipped", exc_info=True)
        for _name, form in drawn_forms(container, page):
            if form.objgen not in seen and len(seen) < _MAX_FORMS:
                seen.add(form.objgen)
                pending.append(form)
    return False


def drawn_forms(container: pikepdf.Object, page: pikepdf.Dictionary
                 ) -> list[tuple[pikepdf.Name, pikepdf.Stream]]:
    """The form XObjects the page's content (``container`` is ``page``) or a form's
    content may draw, by their resource names."""
    import pikepdf

    resources = inherited(container, "/Resources") if container is page \
        else container.get("/Resources")
    xobjects = resources.get("/XObject") if isinstance(resources, pikepdf.Dictionary) \
        else None
    return [(name, form)
            for name, form in (xobjects.items() if isinstance(xobjects, pikepdf.Dictionary)
                               else [])
            if isinstance(form, pikepdf.Stream) and form.get("/Subtype") == "/Form"]


def text_modes(container: pikepdf.Object) -> list[tuple[object, int | None]]:
    """Each instruction of the content with, where it shows a string, the text render
    mode (Tr) it is shown in; Tr is graphics state, saved and restored by q and Q.
    PdfError for content that cannot be parsed."""
    import pikepdf

    mode, saved, out = 0, [], []
    for instruction in pikepdf.parse_content_stream(container):
        operator, operands = str(instruction.operator), instruction.operands
        if operator == "q":
            saved.append(mode)
        elif operator == "Q":
            mode = saved.pop() if saved else 0
        elif operator == "Tr" and operands:
            mode = int(operands[0])
        shown = operator in _SHOW_TEXT.split() and any(has_string(o) for o in operands)
        out.append((instruction, mode if shown else None))
    return out


def has_string(operand) -> bool:
    import pikepdf

    if isinstance(operand, pikepdf.Array):  # TJ: strings and kerning
        return any(has_string(item) for item in operand)
    return isinstance(operand, pikepdf.String) and len(bytes(operand)) > 0


def inherited(page: pikepdf.Dictionary, key: str):
    import pikepdf

    node, seen = page, 0
    while isinstance(node, pikepdf.Dictionary) and seen < 64:
        if key in node:
            return node[key]
        node, seen = node.get("/Parent"), seen + 1
    return None
