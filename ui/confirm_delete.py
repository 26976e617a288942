"""Delete asks first. Its question names the documents, and "Yes, delete" deletes the
documents the question named (kept when it was asked), not whatever is ticked or open
by the time the answer comes."""

from __future__ import annotations

from typing import Callable

import gradio as gr

from appliance.daemon import Appliance
from ui.actions import delete_question
from ui.components import safe_markdown
from ui.i18n import label, language_of, text


class ConfirmDelete:
    """The question's row (hidden until asked), built where it is made."""

    def __init__(self, appliance: Appliance, elem_prefix: str):
        self.appliance = appliance
        with gr.Row(visible=False, equal_height=True, elem_id=f"{elem_prefix}-confirm") as self.row:
            self.question = gr.Markdown(elem_id=f"{elem_prefix}-confirm-question")
            self.yes = gr.Button(label("confirm_yes"), variant="stop", size="sm", scale=0,
                                 min_width=120, elem_id=f"{elem_prefix}-confirm-yes")
            self.no = gr.Button(label("confirm_no"), size="sm", scale=0, min_width=120,
                                elem_id=f"{elem_prefix}-confirm-no")
        self.asked = gr.State([])

    def wire(self, delete: gr.Button, inputs: list, to_ids: Callable[..., list[str]],
             message: gr.Markdown, on_yes: Callable[[list[str], str | None, str], list],
             yes_outputs: list):
        """``delete`` asks about ``to_ids(*inputs)``; the answer "yes" returns
        ``on_yes(ids, username, language)`` for ``yes_outputs``. Returns the answer's event, for
        what follows it."""
        private = dict(api_visibility="private")

        def ask(value, request: gr.Request):  # one input: the ticked, or the open document
            lang = language_of(request)
            ids = to_ids(value)
            if not ids:
                return [], gr.Row(visible=False), "", safe_markdown(text("nothing_ticked", lang))
            return (ids, gr.Row(visible=True),
                    safe_markdown(delete_question(self.appliance, ids, lang)), "")

        def yes(ids, request: gr.Request):
            return [[], gr.Row(visible=False),
                    *on_yes(ids, getattr(request, "username", None), language_of(request))]

        delete.click(ask, inputs=inputs, outputs=[self.asked, self.row, self.question, message],
                     **private)
        self.no.click(lambda: ([], gr.Row(visible=False)), outputs=[self.asked, self.row],
                      **private)
        return self.yes.click(yes, inputs=self.asked,
                              outputs=[self.asked, self.row, *yes_outputs],
                              trigger_mode="once", concurrency_limit=4,
                              concurrency_id="document-actions", **private)
