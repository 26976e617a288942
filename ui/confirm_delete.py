"""Delete asks first. Its question names the documents, and "Yes, delete" deletes the
documents the question named (kept when it was asked), not whatever is ticked or open
by the time the answer comes."""

from __future__ import annotations

from typing import Callable

import gradio as gr

from appliance.daemon import Appliance
from ui.actions import NOTHING_SELECTED_TEXT, delete_question
from ui.components import safe_markdown


class ConfirmDelete:
    """The question's row (hidden until asked), built where it is made."""

    def __init__(self, appliance: Appliance, elem_prefix: str):
        self.appliance = appliance
        with gr.Row(visible=False, equal_height=True, elem_id=f"{elem_prefix}-confirm") as self.row:
            self.question = gr.Markdown(elem_id=f"{elem_prefix}-confirm-question")
            self.yes = gr.Button("Yes, delete", variant="stop", size="sm", scale=0,
                                 min_width=120, elem_id=f"{elem_prefix}-confirm-yes")
            self.no = gr.Button("No, keep them", size="sm", scale=0, min_width=120,
                                elem_id=f"{elem_prefix}-confirm-no")
        self.asked = gr.State([])

    def wire(self, delete: gr.Button, inputs: list, to_ids: Callable[..., list[str]],
             message: gr.Markdown, on_yes: Callable[[list[str], str | None], list],
             yes_outputs: list):
        """``delete`` asks about ``to_ids(*inputs)``; the answer "yes" returns
        ``on_yes(ids, username)`` for ``yes_outputs``. Returns the answer's event, for
        what follows it."""
        private = dict(api_visibility="private")

        def ask(*values):
            ids = to_ids(*values)
            if not ids:
                return [], gr.Row(visible=False), "", safe_markdown(NOTHING_SELECTED_TEXT)
            return (ids, gr.Row(visible=True),
                    safe_markdown(delete_question(self.appliance, ids)), "")

        def yes(ids, request: gr.Request):
            return [[], gr.Row(visible=False),
                    *on_yes(ids, getattr(request, "username", None))]

        delete.click(ask, inputs=inputs, outputs=[self.asked, self.row, self.question, message],
                     **private)
        self.no.click(lambda: ([], gr.Row(visible=False)), outputs=[self.asked, self.row],
                      **private)
        return self.yes.click(yes, inputs=self.asked,
                              outputs=[self.asked, self.row, *yes_outputs],
                              trigger_mode="once", concurrency_limit=4,
                              concurrency_id="document-actions", **private)
