"""Rendering a chat template llama.cpp does not know: the GGUF's own Jinja text."""

from __future__ import annotations

import pytest

from appliance.engines.llama.template import render_jinja
from appliance.errors import ModelError

PARTS_ONLY = ("{% for m in messages %}User: {% for c in m['content'] %}"
              "{% if c['type'] == 'text' %}{{ c['text'] }}{% endif %}{% endfor %}{{ '\\n' }}"
              "{% endfor %}Assistant: ")
STRING_ONLY = "{% for m in messages %}<|user|>\n{{ '' + m.content }}{% endfor %}<|assistant|>"


def test_a_template_gets_the_content_in_the_form_it_takes():
    assert render_jinja(PARTS_ONLY, "<__media__>OCR:", bos="", eos="") == \
        "User: <__media__>OCR:\nAssistant: "
    assert render_jinja(STRING_ONLY, "<__media__>OCR:", bos="", eos="") == \
        "<|user|>\n<__media__>OCR:<|assistant|>"


def test_a_template_that_drops_or_refuses_the_turn_is_a_model_error():
    with pytest.raises(ModelError, match="leaves out the page's turn"):
        render_jinja("{{ bos_token }}Assistant:", "<__media__>OCR:", bos="<s>", eos="")
    with pytest.raises(ModelError, match="refused the page's turn: system only"):
        render_jinja("{{ raise_exception('system only') }}", "x", bos="", eos="")
    with pytest.raises(ModelError, match="cannot be read"):
        render_jinja("{% for %}", "x", bos="", eos="")


def test_the_sandbox_keeps_a_template_from_reaching_python():
    hostile = "{{ ''.__class__.__mro__[1].__subclasses__() }}{{ messages[0].content }}"
    with pytest.raises(ModelError):
        render_jinja(hostile, "x", bos="", eos="")
