"""timm's own models, as users have them: ``timm.create_model`` with timm's current code and
initialisation (seeded, no pretrained weights downloaded), eval mode, batch 1.

* ``timm_mobilevit_xxs``: MobileViT-XXS (``mobilevit_xxs``: inverted residuals, then
  transformer blocks on unfolded 2×2 patches through timm's ``Attention``, which calls
  ``F.scaled_dot_product_attention``), at 128×128 (it compiles and verifies at its default
  256×256 too; 128 keeps the suite's time and the emulated board's RAM in bounds);
* ``timm_vit_tiny``: ViT-Tiny/16 (``vit_tiny_patch16_224``: 12 blocks of width 192, three
  heads, a class token) at 64×64, 16 patches.

timm needs torchvision, whose registry wheel is built against CUDA: beside the CPU build of
torch its C extension cannot load, and torchvision's import then registers fake kernels for
two of its operators (``nms``, ``qnms``) that do not exist, and fails. Neither model calls
them, so :func:`import_timm` defines their schemas first when the extension is missing.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import torch

from ..cases import Example, Factory

#: name → (timm model, keyword arguments, input resolution)
MODELS: dict[str, tuple[str, dict[str, object], int]] = {
    "timm_mobilevit_xxs": ("mobilevit_xxs", {}, 128),
    "timm_vit_tiny": ("vit_tiny_patch16_224", {"img_size": 64}, 64),
}
#: Why the timm models cannot be built here, or None.
MISSING = (
    None
    if importlib.util.find_spec("timm") and importlib.util.find_spec("torchvision")
    else "timm is not installed (pip install -e '.[test]' brings it)"
)
_SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
)
#: the schemas defined here, when torchvision's extension could not load
_defined: list[torch.library.Library] = []


def import_timm() -> ModuleType:
    """timm, its torchvision import made to work without torchvision's C extension (see the
    module docstring)."""
    if not _defined and not _extension_loads():
        library = torch.library.Library("torchvision", "FRAGMENT")
        for schema in _SCHEMAS:
            library.define(schema)
        _defined.append(library)
    import timm

    return timm


def _extension_loads() -> bool:
    """Whether torchvision's C extension loads (it defines the operators itself then)."""
    spec = importlib.util.find_spec("torchvision")
    for location in (spec.submodule_search_locations or []) if spec else []:
        for extension in Path(location).glob("_C*.so"):
            try:
                torch.ops.load_library(str(extension))
            except OSError:
                return False
            return True
    return False


def _factory(name: str) -> Factory:
    model, kwargs, resolution = MODELS[name]

    def build() -> Example:
        timm = import_timm()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            module = timm.create_model(model, pretrained=False, **kwargs).eval()
            inputs = (torch.randn(1, 3, resolution, resolution),)
        return module, inputs

    return build


TIMM: dict[str, Factory] = {name: _factory(name) for name in MODELS}
