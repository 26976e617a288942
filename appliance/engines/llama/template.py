"""A model's own chat template around one user turn.

llama.cpp renders the templates it recognises by their marks
(``llama_chat_apply_template``: Gemma's, ChatML, GLM-4's, DeepSeek-OCR's, ...). A
template it does not know, such as PaddleOCR-VL's, is rendered here from the GGUF's
own Jinja text in a sandbox, as llama-cpp-python's chat handlers and
``llama-server --jinja`` do. Either way the image stays the media marker in the user's
text: mtmd puts the model's image tokens around it.

The template is read, and a Jinja one compiled, once when the model loads: a template
that cannot be read refuses the model then, not at its first page.
"""

from __future__ import annotations

import ctypes

from appliance.errors import ModelError


class ChatTemplate:
    """The chat template of a loaded model. ``L`` is llama_cpp."""

    def __init__(self, L, model, vocab):
        self._L = L
        self._template = L.llama_model_chat_template(model, None)
        if not self._template:
            raise ModelError("the model's GGUF carries no chat template "
                             "(tokenizer.chat_template); download the model again from "
                             "its publisher")
        self._jinja = None
        if _builtin(L, self._template, "") is None:  # llama.cpp does not know it
            bos, eos = (_piece(L, vocab, token) for token in (L.llama_vocab_bos(vocab),
                                                               L.llama_vocab_eos(vocab)))
            self._jinja = JinjaTemplate(self._template.decode(), bos=bos, eos=eos)
            # the tokenizer adds the BOS itself where the model wants one: not twice
            self._added_bos = bos if bos and L.llama_vocab_get_add_bos(vocab) else ""

    def prompt(self, user_text: str) -> str:
        """The prompt for one user turn, ready for the answer."""
        if self._jinja is None:
            return _builtin(self._L, self._template, user_text)
        text = self._jinja.render(user_text)
        if self._added_bos and text.startswith(self._added_bos):
            text = text[len(self._added_bos):]
        return text


class JinjaTemplate:
    """A Jinja chat template compiled in a sandbox."""

    def __init__(self, template: str, *, bos: str, eos: str):
        # jinja2 comes with llama-cpp-python; imported here, as llama_cpp is, by the engine
        import jinja2
        from jinja2.sandbox import ImmutableSandboxedEnvironment
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        environment = ImmutableSandboxedEnvironment(
            trim_blocks=True, lstrip_blocks=True,
            extensions=[Jinja2ChatFormatter.IgnoreGenerationTags, jinja2.ext.loopcontrols])
        environment.filters["tojson"] = Jinja2ChatFormatter.tojson
        try:
            self._compiled = environment.from_string(template)
        except jinja2.TemplateError as exc:
            raise ModelError(f"the model's chat template cannot be read ({exc}); use a "
                             f"GGUF from the family's publisher or from ggml-org") from None
        self._errors = (jinja2.TemplateError, TypeError)
        self._names = {"bos_token": bos, "eos_token": eos, "raise_exception": _refuse,
                       "strftime_now": Jinja2ChatFormatter.strftime_now}

    def render(self, user_text: str) -> str:
        failure = "it leaves out the page's turn"
        # templates take the user's content as a string or as a list of parts; the turn
        # is in the one that keeps it
        for content in (user_text, [{"type": "text", "text": user_text}]):
            try:
                text = self._compiled.render(
                    messages=[{"role": "user", "content": content}],
                    add_generation_prompt=True, **self._names)
            except self._errors as exc:
                failure = str(exc)
                continue
            if user_text in text:
                return text
        raise ModelError(f"the model's chat template cannot take the page's turn "
                         f"({failure}); use a GGUF from the family's publisher or from "
                         f"ggml-org")


def _refuse(message: str):
    """The templates' ``raise_exception``."""
    import jinja2

    raise jinja2.TemplateError(f"it refused the page's turn: {message}")


def _builtin(L, template: bytes, user_text: str) -> str | None:
    """llama.cpp's rendering, or None when it does not recognise the template."""
    message = (L.llama_chat_message * 1)(L.llama_chat_message(b"user", user_text.encode()))
    size = len(user_text) * 2 + 256
    for _ in range(2):
        buffer = ctypes.create_string_buffer(size)
        n = L.llama_chat_apply_template(template, message, 1, True, buffer, size)
        if n < 0:
            return None
        if n <= size:
            return buffer.raw[:n].decode()
        size = n
    raise ModelError("the chat template kept growing")  # pragma: no cover


def _piece(L, vocab, token: int) -> str:
    if token < 0:
        return ""
    buffer = ctypes.create_string_buffer(64)
    n = L.llama_token_to_piece(vocab, token, buffer, len(buffer), 0, True)
    return buffer.raw[:max(n, 0)].decode("utf-8", errors="replace")
