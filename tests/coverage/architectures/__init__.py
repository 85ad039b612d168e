"""Published small architectures, re-implemented from their papers (nothing copied from a
model library), at small widths: seeded random weights, eval mode, batch 1, 64×64 RGB; and
two of timm's own attention models as timm builds them (``timm_models``)."""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from ..cases import Factory, seeded
from .common import RESOLUTION
from .efficient import EfficientNetB0Stage, MnasNet
from .ghost import GhostNet
from .mobilenet import MobileNetV2, MobileNetV3Small
from .mobilevit import MobileViT
from .regnet import RegNetX
from .resnet import ResNet18
from .shuffle import ShuffleNetV2, SqueezeNet
from .timm_models import MISSING as TIMM_MISSING
from .timm_models import TIMM
from .vit import VisionTransformer


def _architecture(build: Callable[[], nn.Module]) -> Factory:
    return lambda: seeded(build, (1, 3, RESOLUTION, RESOLUTION))


ARCHITECTURES: dict[str, Factory] = {
    "resnet18": _architecture(ResNet18),
    "mobilenet_v2": _architecture(MobileNetV2),
    "mobilenet_v3_small": _architecture(MobileNetV3Small),
    "efficientnet_b0_stage": _architecture(EfficientNetB0Stage),
    "shufflenet_v2": _architecture(ShuffleNetV2),
    "squeezenet": _architecture(SqueezeNet),
    "mnasnet": _architecture(MnasNet),
    "ghostnet": _architecture(GhostNet),
    "regnetx": _architecture(RegNetX),
    "mobilevit": _architecture(MobileViT),
    "vit": _architecture(VisionTransformer),
    **TIMM,
}

__all__ = ["ARCHITECTURES", "TIMM", "TIMM_MISSING"]
