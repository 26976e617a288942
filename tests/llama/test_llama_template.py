"""Rendering a chat template llama.cpp does not know: the GGUF's own Jinja text."""

from __future__ import annotations

import pytest

from appliance.engines.llama.template import JinjaTemplate
from appliance.errors import ModelError

PARTS_ONLY = ("{% for m in messages %}User: {% for c in m['content'] %}"
              "{% if c['type'] == 'text' %}{{ c['text'] }}{% endif %}{% endfor %}{{ '\\n' }}"
              "{% endfor %}Assistant: ")
STRING_ONLY = "{% for m in messages %}<|user|>\n{{ '' + m.content }}{% endfor %}<|assistant|>"


def test_a_template_gets_the_content_in_the_form_it_takes():
    assert JinjaTemplate(PARTS_ONLY, bos="", eos="").render("<__media__>OCR:") == \
        "User: <__media__>OCR:\nAssistant: "
    assert JinjaTemplate(STRING_ONLY, bos="", eos="").render("<__media__>OCR:") == \
        "<|user|>\n<__media__>OCR:<|assistant|>"


def test_a_template_that_drops_or_refuses_the_turn_is_a_model_error():
    with pytest.raises(ModelError, match="leaves out the page's turn"):
        JinjaTemplate("{{ bos_token }}Assistant:", bos="<s>", eos="").render("<__media__>OCR:")
    with pytest.raises(ModelError, match="refused the page's turn: system only"):
        JinjaTemplate("{{ raise_exception('system only') }}", bos="", eos="").render("x")
    with pytest.raises(ModelError, match="cannot be read"):
        JinjaTemplate("{% for %}", bos="", eos="")


def test_the_sandbox_keeps_a_template_from_reaching_python():
    hostile = "{{ ''.__class__.__mro__[1].__subclasses__() }}{{ messages[0].content }}"
    with pytest.raises(ModelError):
        JinjaTemplate(hostile, bos="", eos="").render("x")
