"""A page as one OpenAI-style chat turn, the form every chat-completions API takes:
llama-cpp-python's ``create_chat_completion``, llama-server, vLLM, Ollama.

Only Pillow and the prompts: `appliance bench` drives a llama-server on a GPU host
with this too.
"""

from __future__ import annotations

import base64
import io

from PIL import Image

from appliance.engines.prompts import context_text


def png_data_uri(image: Image.Image, side: int) -> str:
    """The image at the model's square input size, as a PNG data URI.

    Resizing here (Lanczos) instead of on the server keeps the PNG small and fast to
    encode and to send.
    """
    square = image.resize((side, side), Image.Resampling.LANCZOS).convert("RGB")
    buffer = io.BytesIO()
    square.save(buffer, format="PNG", compress_level=1)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def page_messages(image: Image.Image, prompt_text: str, side: int,
                  context: str = "") -> list[dict]:
    """One user turn: the previous page's end (if any), the page image and the document
    type's instructions."""
    parts = [{"type": "text", "text": context_text(context)}] if context else []
    return [{"role": "user", "content": [
        *parts,
        {"type": "image_url", "image_url": {"url": png_data_uri(image, side)}},
        {"type": "text", "text": prompt_text},
    ]}]
