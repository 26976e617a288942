"""What happens to an engine's reading before it is stored: its form is repaired.

Runs in the worker, right after recognition (or a result-cache hit), so a cached
reading gets today's repair. Repair (seed 000 §6.3) fixes the Markdown in place
(level 1, flag ``repaired``) or, when that fails, degrades the page to plain text
(level 2, flag ``degraded``); either way the page's provenance says what was done.
"""

from __future__ import annotations

from appliance.page import Recognition
from appliance.quality.markdown import escape_markdown, markdown_to_text
from appliance.quality.repair import repair

REPAIR_FLAGS = {1: "repaired", 2: "degraded"}


def postprocess(recognition: Recognition) -> None:
    """Repair ``recognition``'s Markdown in place and record it."""
    repaired = repair(recognition.markdown, recognition.lines)
    recognition.provenance["repair"] = {"level": repaired.level, "fixes": repaired.fixes,
                                        "problems": repaired.problems}
    if repaired.level == 0:
        return
    if repaired.level == 1:
        recognition.markdown = repaired.markdown
        recognition.text = markdown_to_text(repaired.markdown)
    else:  # plain text, one line per line read; the Markdown output shows it literally
        recognition.text = repaired.markdown
        recognition.markdown = "\n\n".join(
            escape_markdown(line) for line in repaired.markdown.splitlines() if line.strip())
    recognition.flags = [*recognition.flags, REPAIR_FLAGS[repaired.level]]
