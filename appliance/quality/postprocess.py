"""What happens to an engine's reading before it is stored: its form is repaired.

Runs in the worker, right after recognition (or a result-cache hit), so a cached
reading gets today's repair. Repair (seed 000 §6.3) fixes the Markdown in place
(level 1, flag ``repaired``) or, when that fails, degrades the page to plain text
(level 2, flag ``degraded``); either way the page's provenance says what was done.
"""

from __future__ import annotations

from dataclasses import replace

from appliance.page import Recognition
from appliance.quality.markdown import escape_markdown, markdown_to_text
from appliance.quality.repair import repair

REPAIR_FLAGS = {1: "repaired", 2: "degraded"}


def postprocess(recognition: Recognition) -> Recognition:
    """``recognition`` with its Markdown repaired, and the repair recorded."""
    repaired = repair(recognition.markdown, recognition.lines)
    recognition = recognition.noted({"repair": {"level": repaired.level,
                                                "fixes": repaired.fixes,
                                                "problems": repaired.problems}})
    if repaired.level == 0:
        return recognition
    if repaired.level == 1:
        text, markdown = markdown_to_text(repaired.markdown), repaired.markdown
    else:  # plain text, one line per line read; the Markdown output shows it literally
        text, markdown = repaired.markdown, "\n\n".join(
            escape_markdown(line) for line in repaired.markdown.splitlines() if line.strip())
    return replace(recognition, text=text, markdown=markdown).flagged(
        REPAIR_FLAGS[repaired.level])
