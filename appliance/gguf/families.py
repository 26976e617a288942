"""The model families the appliance runs, as data: how each is recognised in its GGUF
headers, and how it wants to be asked and read.

A family is detected from the pair's headers alone: the text model's
``general.architecture`` and the mmproj's ``clip.projector_type``. The projector
decides (it is what makes a Qwen-2 text model dots.ocr, or a Qwen-3 one
LightOnOCR); the architecture must then be the one that projector was made for.

Names come from the llama.cpp vendored in llama-cpp-python 0.3.36:
architectures from ``src/llama-arch.cpp``, projector types from
``tools/mtmd/clip-impl.h``, the tensor whose size is the projector's output
(``clip_n_mmproj_embd``) and the default merge factors and token budgets from
``tools/mtmd/clip.cpp``. Prompts, output formats and sampling come from each
family's model card or reference code (named per family below).

A :class:`Family` says:

- ``prompts``: ``None`` for a general model, which gets the appliance's own
  instructions per document type (``engines/prompts.py``); otherwise the task
  prompts the model was trained on, by task (``text``, ``table``, ``formula``).
- ``output``: the format its answers are in, which ``engines/converters.py``
  turns into the appliance's Markdown.
- ``temperature`` and ``repeat_penalty`` for the ladder's sampled rung. An answer
  ends at any of the model's end-of-generation tokens, which llama.cpp takes from
  the vocabulary and from the eos/eot ids the converter writes (GLM-OCR's
  ``<|endoftext|>`` and ``<|user|>``), so no family needs stop strings of its own.
- ``good_at``: what `appliance models list` and the README say it is for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping


@dataclass(frozen=True)
class Projector:
    """What the pair check needs to know of one mmproj projector type."""

    name: str
    # the tensor whose size is the image embeddings' width, and which of its ggml
    # dimensions that is (clip_n_mmproj_embd)
    output_tensor: str
    output_dim: int
    n_merge: int  # patches merged per side into one token, when the file does not say
    # None: every image is resized to a square of the file's image_size. Otherwise
    # any size within (min, max) image tokens, unless the file bounds the pixels
    # (clip.vision.image_min/max_pixels); (0, 0): up to image_size on the longest edge
    dynamic_tokens: tuple[int, int] | None = None
    # (image size, patch size) that clip.cpp uses whatever the file says
    fixed_view: tuple[int, int] | None = None


PROJECTORS: dict[str, Projector] = {p.name: p for p in (
    Projector("gemma3", "mm.input_projection.weight", 0, 4),
    Projector("gemma3nv", "mm.input_projection.weight", 0, 1),
    Projector("gemma4v", "mm.input_projection.weight", 1, 3, (70, 1120)),
    Projector("gemma4uv", "mm.input_projection.weight", 1, 3, (70, 1120)),
    Projector("paddleocr", "mm.2.weight", 1, 2, (8, 4096)),
    Projector("lightonocr", "mm.2.weight", 1, 1, (0, 0)),
    Projector("dots_ocr", "mm.2.weight", 1, 2, (8, 4096)),
    Projector("glm4v", "mm.down.weight", 1, 2, (8, 4096)),
    Projector("hunyuanvl", "mm.model.fc.weight", 1, 2, (256, 16384)),
    # one 1024 px global view; the 640 px tiles mtmd adds for larger images are not
    # used, as the page is given at the view's size
    Projector("deepseekocr", "mm.model.fc.weight", 1, 4, fixed_view=(1024, 16)),
)}


@dataclass(frozen=True)
class Family:
    name: str
    title: str  # as the publisher writes it
    archs: tuple[str, ...]  # text architectures in the model GGUF
    projectors: tuple[str, ...]  # projector types in the mmproj GGUF
    output: str  # the answer's format, a name in engines/converters.py
    good_at: str
    prompts: Mapping[str, str] | None = None  # task -> prompt; None: the appliance's own
    temperature: float = 0.2  # the sampled rung
    # mild: a strong penalty corrupts faithful repeated rows
    repeat_penalty: float = 1.05
    source: str = ""  # where the prompts and the sampling come from

    def prompt(self, task: str) -> str | None:
        """The trained prompt for ``task`` (its ``text`` prompt for a task it has none
        for); None for a general model."""
        if self.prompts is None:
            return None
        return self.prompts.get(task, self.prompts["text"])


# dots.ocr's prompt_layout_all_en (rednote-hilab/dots.ocr, dots_ocr/utils/prompts.py)
_DOTS_LAYOUT = """Please output the layout information from the PDF image, including each \
layout element's bbox, its category, and the corresponding text content within the bbox.

1. Bbox format: [x1, y1, x2, y2]

2. Layout Categories: The possible categories are ['Caption', 'Footnote', 'Formula', \
'List-item', 'Page-footer', 'Page-header', 'Picture', 'Section-header', 'Table', 'Text', \
'Title'].

3. Text Extraction & Formatting Rules:
    - Picture: For the 'Picture' category, the text field should be omitted.
    - Formula: Format its text as LaTeX.
    - Table: Format its text as HTML.
    - All Others (Text, Title, etc.): Format their text as Markdown.

4. Constraints:
    - The output text must be the original text from the image, with no translation.
    - All layout elements must be sorted according to human reading order.

5. Final Output: The entire output must be a single JSON object.
"""

# The sampled rung needs a little randomness where the authors decode greedily
# (temperature 0): 0.1 then, with their repetition penalty.
FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("gemma3", "Gemma 3", ("gemma3",), ("gemma3",), "markdown",
           "general reading in 140 languages, following the appliance's instructions per "
           "document type; a fixed 896 px input, so small print is read in strips"),
    Family("gemma3n", "Gemma 3n", ("gemma3n",), ("gemma3nv",), "markdown",
           "a small general model for CPUs and small cards"),
    Family("gemma4", "Gemma 4", ("gemma4",), ("gemma4v", "gemma4uv"), "markdown",
           "general reading at dynamic resolution, following the appliance's instructions"),
    Family("paddleocr_vl", "PaddleOCR-VL", ("paddleocr",), ("paddleocr",), "paddleocr_vl",
           "dense text, tables (OTSL), formulas and charts in 109 languages; 0.9B, fast; "
           "trained on layout regions, so whole busy pages read less well",
           prompts={"text": "OCR:", "table": "Table Recognition:",
                    "formula": "Formula Recognition:", "chart": "Chart Recognition:"},
           temperature=0.1, repeat_penalty=1.0,
           source="PaddleX PaddleOCR-VL pipeline (task prompts); vLLM recipe (temperature 0)"),
    Family("glm_ocr", "GLM-OCR", ("glm4",), ("glm4v",), "html_markdown",
           "complex tables, formulas, code, seals and handwriting; 0.9B; trained on layout "
           "regions, whole pages read less well",
           prompts={"text": "Text Recognition:", "table": "Table Recognition:",
                    "formula": "Formula Recognition:"},
           temperature=0.1, repeat_penalty=1.1,
           source="zai-org/GLM-OCR glmocr/config.yaml (prompts, temperature 0, "
                  "repetition penalty 1.1)"),
    Family("lightonocr", "LightOnOCR", ("qwen3",), ("lightonocr",), "html_markdown",
           "whole pages to Markdown with tables and formulas, European languages; 1B",
           prompts={"text": ""}, temperature=0.2, repeat_penalty=1.0,
           source="llama.cpp PR #16764 (image only, no prompt); lightonai/LightOnOCR "
                  "(temperature 0.2)"),
    Family("dots_ocr", "dots.ocr", ("qwen2",), ("dots_ocr",), "dots_layout_json",
           "layout with reading order, tables and formulas in 100 languages; 1.7B; loops "
           "on long runs of dots or underscores",
           prompts={"text": _DOTS_LAYOUT}, temperature=0.1, repeat_penalty=1.0,
           source="rednote-hilab/dots.ocr prompts.py (prompt_layout_all_en), inference.py "
                  "(temperature 0.1)"),
    Family("deepseek_ocr", "DeepSeek-OCR", ("deepseek2-ocr",), ("deepseekocr",),
           "deepseek_grounding", "documents to Markdown with layout boxes, tables and "
           "formulas; 3B (MoE)",
           # after "<image>\n": mtmd writes the newline after the image itself
           prompts={"text": "<|grounding|>Convert the document to markdown."},
           temperature=0.1, repeat_penalty=1.0,
           source="deepseek-ai/DeepSeek-OCR README (prompt, temperature 0)"),
    Family("hunyuan_ocr", "HunyuanOCR", ("hunyuan_vl",), ("hunyuanvl",), "html_markdown",
           "document parsing, text spotting and 100+ languages; 1B; its licence excludes "
           "the EU, the UK and South Korea",
           prompts={"text": "提取文档图片中正文的所有信息用markdown格式表示，其中页眉、页脚部分忽略，"
                            "表格用html格式表达，文档中公式用latex格式表示，按照阅读顺序组织进行解析。"},
           temperature=0.1, repeat_penalty=1.08,
           source="tencent/HunyuanOCR README (document parsing prompt, temperature 0)"),
)}

_BY_PROJECTOR = {projector: family for family in FAMILIES.values()
                 for projector in family.projectors}
KNOWN_ARCHS = tuple(dict.fromkeys(arch for f in FAMILIES.values() for arch in f.archs))


def family_of_projector(projector: str) -> Family | None:
    return _BY_PROJECTOR.get(projector)


def families_of_arch(arch: str) -> list[Family]:
    return [family for family in FAMILIES.values() if arch in family.archs]
