"""Versioned prompt templates, one per document type.

A template's ``version`` goes into every result's provenance and into the result
cache key: change the wording, bump the version, re-run `appliance eval`.
``max_tokens`` bounds one page's answer for that type of document.

A general model (Gemma) gets these instructions. A specialist OCR model gets the
task prompt it was trained on (``gguf/families.py``: "OCR:", "Table Recognition:"),
which a chatty instruction or the previous page's end would only confuse; the
version then names its family.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from appliance.errors import InvalidRequest
from appliance.gguf.families import Family

_RULES = """Rules:
- Transcribe every piece of text you can see, in reading order, exactly as written. Do not translate, summarise, correct or complete anything.
- Use Markdown: # headings for titles, - for bullet lists, **bold** only where the page shows bold.
- Write every table as a Markdown table (| a | b |, with a | --- | separator row after the header), one row per line, keeping empty cells empty.
- Where text is unreadable, write [illegible] instead of guessing.
- Output only the transcription: no preamble, no explanation, no code fences."""


@dataclass(frozen=True)
class Prompt:
    doc_type: str
    version: str
    text: str
    max_tokens: int
    schema: dict | None = None  # the answer is a JSON object of this schema (a Question)
    # an instruction, which the previous page's end may precede; False: a trained
    # task prompt ("OCR:"), which follows the image alone
    takes_context: bool = True


def _prompt(doc_type: str, focus: str, max_tokens: int, version: str = "v1") -> Prompt:
    return Prompt(doc_type, f"{doc_type}/{version}",
                  f"Transcribe this {focus} into Markdown.\n{_RULES}", max_tokens)


PROMPTS: dict[str, Prompt] = {p.doc_type: p for p in (
    _prompt("generic", "document page", 1200),
    _prompt("receipt", "receipt, keeping every item line with its price and the totals", 600),
    _prompt("invoice", "invoice page, keeping the line items as a table and every amount, "
                       "date and number exactly", 800),
    _prompt("contract", "contract page, keeping clause numbers and paragraph breaks", 1500),
    _prompt("report", "report page, keeping headings, lists and tables", 1500),
    _prompt("table", "page, which is mostly one or more tables, as Markdown tables", 1500),
    _prompt("handwriting", "handwritten page, line by line", 800),
    _prompt("id_card", "identity document, one 'Label: value' line per field", 400),
    _prompt("fapiao", "Chinese VAT invoice (fapiao), keeping every box's label with its "
                      "value, the line items as a table and every amount, code and date "
                      "exactly", 1000),
)}

# Multi-page documents (seed 003 §5.3): the end of the previous page, so that a table
# running over the page break keeps its columns and header on this page too.
CONTEXT_VERSION = "ctx1"
CONTEXT_TEMPLATE = ("For context only, do not transcribe it: the previous page of this "
                    "document ended with\n---\n{tail}\n---\nIf a table continues on this "
                    "page, repeat its header row and keep its columns.")


def context_text(tail: str) -> str:
    return CONTEXT_TEMPLATE.format(tail=tail)


def prompt_for(doc_type: str, family: Family | None = None) -> Prompt:
    """The prompt for a page of ``doc_type``, as ``family`` wants it asked (None: a
    model of unknown family, behind an OpenAI-compatible server: the instructions)."""
    try:
        prompt = PROMPTS[doc_type]
    except KeyError:
        raise InvalidRequest(f"unknown doc_type '{doc_type}'; use one of "
                             f"{', '.join(PROMPTS)}") from None
    if family is None:
        return prompt
    task = "table" if doc_type == "table" else "text"
    trained = family.prompt(task)
    if trained is None:
        return replace(prompt, version=f"{family.name}/{prompt.version}")
    return replace(prompt, version=f"{family.name}/{task}/v1", text=trained,
                   takes_context=False)


def user_turn(prompt: Prompt, image_marker: str, context: str = "") -> str:
    """One page's user turn: the previous page's end (if any), the page image (where
    the marker stands) and the instructions; or, for a trained task prompt, the image
    followed directly by the prompt, as the model saw them in training."""
    if not prompt.takes_context:
        return image_marker + prompt.text
    return "\n\n".join([*([context_text(context)] if context else []), image_marker,
                         prompt.text])
