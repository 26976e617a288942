"""Check a text GGUF and its mmproj GGUF before llama.cpp loads them.

llama.cpp reports a wrong file late and badly: a truncated download fails deep in
loading, a text model without a projector loads and then cannot see, an mmproj of
another model size fails only when the chat handler starts, and some broken files
abort the process. ``inspect_model`` reads the two headers (metadata and tensor
table, never the weights) and refuses each of those cases up front with its own
reason code and a message that says what to do.

What llama.cpp (the copy vendored in llama-cpp-python 0.3.36) runs, and so what is
accepted, is the families in ``families.py``: the pair's projector type names the
family, and the text model's architecture must be the one that projector was made
for. The projector type is ``clip.projector_type`` or, in files that also hold an
audio encoder, ``clip.vision.projector_type``. mtmd refuses a pair whose projector
output size differs from the text model's embedding length.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import gguf

from appliance.errors import (
    ModelMmprojMismatch,
    ModelNoMmproj,
    ModelNotGguf,
    ModelUnsupportedArch,
)
from appliance.gguf.families import (
    FAMILIES, KNOWN_ARCHS, PROJECTORS, Family, families_of_arch, family_of_projector,
)
from appliance.gguf.files import human_size
from appliance.gguf.header import GGUFHeader, read_header

CLIP_ARCH = "clip"


# --- the pair ------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelInfo:
    """What the appliance needs to know about a checked model pair.

    ``image_size`` is the side of the square image the projector takes: fixed for
    Gemma 3 (896 px); for a dynamic-resolution projector the largest square within
    its budget, ``max_pixels``. ``image_tokens`` is the number of soft tokens one
    image costs (for dynamic resolution the upper bound; ``image_tokens_min`` the
    lower).
    """

    name: str
    family: str
    arch: str
    quant: str
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    head_dim: int
    context_length: int
    n_vocab: int
    model_path: Path
    model_size: int
    mmproj_path: Path
    mmproj_name: str
    mmproj_size: int
    projector_type: str
    projection_dim: int
    image_size: int
    patch_size: int
    n_merge: int
    image_tokens: int
    image_tokens_min: int
    max_pixels: int

    @property
    def dynamic_resolution(self) -> bool:
        return self.image_tokens != self.image_tokens_min

    @property
    def token_pixels(self) -> int:
        """The pixels of the input image one image token stands for."""
        return (self.patch_size * self.n_merge) ** 2

    @property
    def profile(self) -> Family:
        return FAMILIES[self.family]

    def summary(self) -> str:
        tokens = (f"{self.image_tokens_min}-{self.image_tokens}" if self.dynamic_resolution
                  else str(self.image_tokens))
        return (f"{self.name} ({self.profile.title}: {self.arch}, {self.quant}, "
                f"n_embd {self.n_embd}, {self.n_layer} layers, context {self.context_length}) + "
                f"{self.projector_type} projector ({self.image_size} px, "
                f"{tokens} tokens per image); {human_size(self.model_size + self.mmproj_size)}")


def inspect_model(model_path: str | Path, mmproj_path: str | Path | None) -> ModelInfo:
    """Check a text model and its mmproj; the facts about the pair, or a ``ModelError``.

    Refuses, in this order: a file that is not a (complete) GGUF; a model that is an
    mmproj; an architecture no family of ``families.py`` has; a missing
    mmproj, or one that is a text model or has no vision encoder; an unknown
    projector, or one made for another architecture; a projector whose output size
    differs from the model's embedding length.
    """
    model = read_header(model_path)
    arch = model.arch
    if arch == CLIP_ARCH or model.metadata.get("general.type") == "mmproj":
        raise ModelNoMmproj(
            f"{model.path} is an mmproj (vision projector), not the language model: set "
            f"engine.model to the model GGUF (e.g. gemma-3-4b-it-Q4_K_M.gguf) and "
            f"engine.mmproj to this file")
    if not families_of_arch(arch):
        raise ModelUnsupportedArch(
            f"{model.path} is a '{arch or 'unknown'}' model; this appliance runs the "
            f"vision model families of models/catalog.toml, whose text models are "
            f"{', '.join(KNOWN_ARCHS)}. Choose one with `appliance models list`")
    if not model.tensors:
        raise ModelNotGguf(f"{model.path} holds no tensors (a vocabulary-only file?): "
                           f"download the full model")
    if mmproj_path is None or str(mmproj_path) == "":
        raise ModelNoMmproj(
            f"{model.path} is a text model ({arch}) and no mmproj is configured; reading "
            f"page images needs its vision projector. Download the matching "
            f"mmproj-*.gguf from the same repository as the model into models/ and set "
            f"engine.mmproj (see models/README.md)")
    mmproj = read_header(mmproj_path)
    if mmproj.arch != CLIP_ARCH:
        raise ModelNoMmproj(
            f"{mmproj.path} is given as the mmproj but is a '{mmproj.arch or 'unknown'}' "
            f"text model, not a vision projector: download the matching mmproj-*.gguf "
            f"from the same repository as the model and set engine.mmproj to it")
    if not mmproj.metadata.get("clip.has_vision_encoder", False):
        raise ModelNoMmproj(
            f"{mmproj.path} has no vision encoder (an audio-only projector?): download the "
            f"vision mmproj-*.gguf from the same repository as the model and set "
            f"engine.mmproj to it")
    projector = str(mmproj.metadata.get("clip.projector_type")
                    or mmproj.metadata.get("clip.vision.projector_type") or "")
    family = family_of_projector(projector)
    if family is None:
        raise ModelUnsupportedArch(
            f"{mmproj.path} has projector type '{projector or 'unknown'}', which no family "
            f"this appliance runs uses ({', '.join(PROJECTORS)}). Use the mmproj from the "
            f"same repository as the model")
    if arch not in family.archs:
        made_for = ", ".join(f.title for f in families_of_arch(arch))
        raise ModelMmprojMismatch(
            f"{mmproj.path} is a '{projector}' projector ({family.title}), but "
            f"{model.path} is a '{arch}' text model ({made_for}): download the mmproj "
            f"from the same repository as the model and set engine.mmproj to it")

    n_embd = _int(model, f"{arch}.embedding_length")
    projection_dim = _projection_dim(mmproj, projector)
    if projection_dim != n_embd:
        raise ModelMmprojMismatch(
            f"{mmproj.path} projects images to {projection_dim} dimensions but "
            f"{model.path} ({arch}) has embedding length {n_embd}: the mmproj belongs to "
            f"another model size. Download the mmproj from the same repository as the "
            f"model and set engine.mmproj to it")

    n_head = _int(model, f"{arch}.attention.head_count")
    head_dim = _int(model, f"{arch}.attention.key_length", default=0) or n_embd // n_head
    image_size, patch_size, n_merge, tokens_min, tokens_max, max_pixels = \
        _image_geometry(mmproj, projector)
    return ModelInfo(
        name=model.name,
        family=family.name,
        arch=arch,
        quant=_file_type(model),
        n_embd=n_embd,
        n_layer=_int(model, f"{arch}.block_count"),
        n_head=n_head,
        n_head_kv=_int(model, f"{arch}.attention.head_count_kv", default=n_head),
        head_dim=head_dim,
        context_length=_int(model, f"{arch}.context_length"),
        n_vocab=len(model.metadata.get("tokenizer.ggml.tokens", ())),
        model_path=model.path,
        model_size=model.file_size,
        mmproj_path=mmproj.path,
        mmproj_name=mmproj.name,
        mmproj_size=mmproj.file_size,
        projector_type=projector,
        projection_dim=projection_dim,
        image_size=image_size,
        patch_size=patch_size,
        n_merge=n_merge,
        image_tokens=tokens_max,
        image_tokens_min=tokens_min,
        max_pixels=max_pixels,
    )


def _int(header: GGUFHeader, key: str, default: int | None = None) -> int:
    """An integer key; a per-layer array gives its largest value."""
    value = header.metadata.get(key)
    if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
        value = max(value)
    if isinstance(value, bool) or not isinstance(value, int):
        if default is not None:
            return default
        raise ModelNotGguf(f"{header.path} lacks the metadata key {key} (or it is not an "
                           f"integer): the file is damaged or was converted by an "
                           f"unsupported tool; download it again")
    return value


def _projection_dim(mmproj: GGUFHeader, projector: str) -> int:
    facts = PROJECTORS[projector]
    tensor = mmproj.tensors.get(facts.output_tensor)
    if tensor is not None and len(tensor.shape) > facts.output_dim:
        return tensor.shape[facts.output_dim]
    return _int(mmproj, "clip.vision.projection_dim")  # last resort: not what mtmd checks


def _image_geometry(mmproj: GGUFHeader, projector: str
                    ) -> tuple[int, int, int, int, int, int]:
    """(image_size, patch_size, n_merge, min tokens, max tokens, max pixels), as
    clip.cpp derives them."""
    facts = PROJECTORS[projector]
    image_size = _int(mmproj, "clip.vision.image_size")
    patch_size = _int(mmproj, "clip.vision.patch_size")
    if facts.fixed_view:  # clip.cpp ignores the file's (DeepSeek-OCR: 224 px, 14 px)
        image_size, patch_size = facts.fixed_view
    n_merge = _int(mmproj, "clip.vision.projector.scale_factor",
                   default=_int(mmproj, "clip.vision.spatial_merge_size", default=facts.n_merge))
    if patch_size <= 0 or n_merge <= 0:
        raise ModelNotGguf(f"{mmproj.path} has patch size {patch_size} and merge factor "
                           f"{n_merge}: the file is damaged; download it again")
    if projector == "gemma4uv":  # the merge happens in the patch convolution
        patch_size, n_merge = patch_size * n_merge, 1
    token_area = (patch_size * n_merge) ** 2
    if facts.dynamic_tokens is None:
        if projector == "gemma3nv":  # MobileNetV5 emits a fixed grid (clip_n_output_tokens)
            tokens = image_size // patch_size
        else:
            tokens = (image_size // patch_size // n_merge) ** 2
        return image_size, patch_size, n_merge, tokens, tokens, image_size ** 2
    if facts.dynamic_tokens == (0, 0):  # up to image_size on the longest edge
        min_pixels, max_pixels = token_area, image_size ** 2
    else:
        min_pixels = _int(mmproj, "clip.vision.image_min_pixels",
                          default=facts.dynamic_tokens[0] * token_area)
        max_pixels = _int(mmproj, "clip.vision.image_max_pixels",
                          default=facts.dynamic_tokens[1] * token_area)
    side = patch_size * n_merge
    image_size = math.isqrt(max_pixels) // side * side  # the largest square in the budget
    return (image_size, patch_size, n_merge, max(1, min_pixels // token_area),
            max_pixels // token_area, max_pixels)


def _file_type(header: GGUFHeader) -> str:
    raw = header.metadata.get("general.file_type")
    try:
        return gguf.LlamaFileType(raw).name.removeprefix("MOSTLY_")
    except (ValueError, TypeError):
        return "unknown"


