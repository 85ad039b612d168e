"""Three networks as torchvision defines them, for ``accuracy.py`` (3 input channels).

torchvision cannot be installed beside the pinned torch here (its wheels need another
torch), so these are re-implementations of its definitions (torchvision 0.2x,
``torchvision/models/``), layer for layer: the same modules and parameter counts, channel
rounding, batch-norm settings, dropout, in-place activations and adds
(``ReLU6(inplace=True)``, ``result += input``: they export as ``hardtanh_``, ``add_``) and weight
initialisation; only the class count (10) and, for ResNet-18, the stage widths are arguments:

* ``tv_mobilenet_v2_035``: ``mobilenet_v2(width_mult=0.35)``: 17 inverted residual blocks,
  ReLU6 after the expansion and the depthwise convolution, a linear projection, residual adds
  without an activation, the last 1×1 convolution kept at 1,280 channels
  (``_make_divisible(1280 · max(1, width))``), adaptive average pooling, dropout 0.2, a linear
  classifier;
* ``tv_mobilenet_v3_small``: ``mobilenet_v3_small()``: ReLU / hardswish blocks with 3×3 and
  5×5 depthwise kernels, squeeze-excitation (ReLU, hardsigmoid) on the expanded channels,
  batch norms with eps 0.001, a 576-channel last convolution, then linear 576 → 1,024,
  hardswish, dropout, linear;
* ``tv_resnet18_025``: ``resnet18()``'s layout (7×7 stride-2 stem, 3×3 stride-2 max pool,
  four stages of two basic blocks, 1×1 strided projections, ReLU after each add) at a quarter
  of its widths (16/32/64/128): the coverage corpus's ResNet-18, which already follows it,
  with torchvision's initialisation.

At 32×32 inputs every network ends on a 1×1 feature map, as torchvision's do on small images.
"""

from __future__ import annotations

import sys
from pathlib import Path

from torch import Tensor, nn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# torchvision's channel rounding (``_make_divisible``) is the zoo's
from tests.coverage.architectures.resnet import ResNet18 as CorpusResNet18  # noqa: E402
from tests.zoo.common import make_divisible as divisible  # noqa: E402

CLASSES = 10


class ConvNormActivation(nn.Sequential):
    """A bias-free convolution with 'same' padding, a batch norm and an optional activation
    (torchvision's ``Conv2dNormActivation``)."""

    def __init__(
        self,
        cin: int,
        cout: int,
        kernel: int = 3,
        stride: int = 1,
        groups: int = 1,
        activation: type[nn.Module] | None = nn.ReLU6,
        eps: float = 1e-5,
        momentum: float = 0.1,
    ) -> None:
        layers: list[nn.Module] = [
            nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2, groups=groups, bias=False),
            nn.BatchNorm2d(cout, eps=eps, momentum=momentum),
        ]
        if activation is not None:
            layers.append(activation(inplace=True))
        super().__init__(*layers)


def initialise(model: nn.Module) -> None:
    """The MobileNets' initialisation: He-normal (fan out) convolutions, unit batch norms,
    N(0, 0.01) linear weights, zero biases."""
    for module in model.modules():
        if isinstance(module, nn.Conv2d):
            nn.init.kaiming_normal_(module.weight, mode="fan_out")
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.BatchNorm2d):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, 0, 0.01)
            nn.init.zeros_(module.bias)


# --- MobileNetV2 ----------------------------------------------------------------------------

#: (expansion t, output channels c at width 1, repeats n, first stride s): the full table.
V2_SETTING = [
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
]


class InvertedResidualV2(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, expansion: int) -> None:
        super().__init__()
        hidden = int(round(cin * expansion))
        self.use_res_connect = stride == 1 and cin == cout
        layers: list[nn.Module] = []
        if expansion != 1:
            layers.append(ConvNormActivation(cin, hidden, 1))
        layers += [
            ConvNormActivation(hidden, hidden, 3, stride, groups=hidden),
            nn.Conv2d(hidden, cout, 1, 1, 0, bias=False),
            nn.BatchNorm2d(cout),
        ]
        self.conv = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        return x + self.conv(x) if self.use_res_connect else self.conv(x)


class MobileNetV2(nn.Module):
    def __init__(self, width_mult: float = 0.35, num_classes: int = CLASSES) -> None:
        super().__init__()
        channels = divisible(32 * width_mult)
        self.last_channel = divisible(1280 * max(1.0, width_mult))
        features: list[nn.Module] = [ConvNormActivation(3, channels, 3, 2)]
        for expansion, base, repeats, stride in V2_SETTING:
            out = divisible(base * width_mult)
            for index in range(repeats):
                features.append(
                    InvertedResidualV2(channels, out, stride if index == 0 else 1, expansion)
                )
                channels = out
        features.append(ConvNormActivation(channels, self.last_channel, 1))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(self.last_channel, num_classes))
        initialise(self)

    def forward(self, x: Tensor) -> Tensor:
        x = nn.functional.adaptive_avg_pool2d(self.features(x), (1, 1))
        return self.classifier(x.flatten(1))


# --- MobileNetV3-small ----------------------------------------------------------------------

#: (input, kernel, expanded, output channels, squeeze-excite, hardswish, stride) at width 1.
V3_SMALL = [
    (16, 3, 16, 16, True, False, 2),
    (16, 3, 72, 24, False, False, 2),
    (24, 3, 88, 24, False, False, 1),
    (24, 5, 96, 40, True, True, 2),
    (40, 5, 240, 40, True, True, 1),
    (40, 5, 240, 40, True, True, 1),
    (40, 5, 120, 48, True, True, 1),
    (48, 5, 144, 48, True, True, 1),
    (48, 5, 288, 96, True, True, 2),
    (96, 5, 576, 96, True, True, 1),
    (96, 5, 576, 96, True, True, 1),
]
V3_EPS, V3_MOMENTUM = 0.001, 0.01


class SqueezeExcitation(nn.Module):
    """Average pool, 1×1 convolution to a quarter (rounded to 8), ReLU, 1×1 back, hardsigmoid,
    times the input."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        squeezed = divisible(channels // 4)
        self.fc1 = nn.Conv2d(channels, squeezed, 1)
        self.activation = nn.ReLU()  # torchvision.ops.SqueezeExcitation: not in place
        self.fc2 = nn.Conv2d(squeezed, channels, 1)
        self.scale_activation = nn.Hardsigmoid()

    def forward(self, x: Tensor) -> Tensor:
        scale = nn.functional.adaptive_avg_pool2d(x, 1)
        scale = self.scale_activation(self.fc2(self.activation(self.fc1(scale))))
        return scale * x


class InvertedResidualV3(nn.Module):
    def __init__(
        self, cin: int, kernel: int, hidden: int, cout: int, excite: bool, hs: bool, stride: int
    ) -> None:
        super().__init__()
        self.use_res_connect = stride == 1 and cin == cout
        activation = nn.Hardswish if hs else nn.ReLU
        norm = {"eps": V3_EPS, "momentum": V3_MOMENTUM}
        layers: list[nn.Module] = []
        if hidden != cin:
            layers.append(ConvNormActivation(cin, hidden, 1, activation=activation, **norm))
        layers.append(
            ConvNormActivation(
                hidden, hidden, kernel, stride, groups=hidden, activation=activation, **norm
            )
        )
        if excite:
            layers.append(SqueezeExcitation(hidden))
        layers.append(ConvNormActivation(hidden, cout, 1, activation=None, **norm))
        self.block = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        result = self.block(x)
        if self.use_res_connect:
            result += x
        return result


class MobileNetV3Small(nn.Module):
    def __init__(self, num_classes: int = CLASSES, last_channel: int = 1024) -> None:
        super().__init__()
        norm = {"eps": V3_EPS, "momentum": V3_MOMENTUM}
        layers: list[nn.Module] = [
            ConvNormActivation(3, divisible(V3_SMALL[0][0]), 3, 2, activation=nn.Hardswish, **norm)
        ]
        for cin, kernel, hidden, cout, excite, hs, stride in V3_SMALL:
            layers.append(
                InvertedResidualV3(
                    divisible(cin), kernel, divisible(hidden), divisible(cout), excite, hs, stride
                )
            )
        last_in = divisible(V3_SMALL[-1][3])
        layers.append(ConvNormActivation(last_in, 6 * last_in, 1, activation=nn.Hardswish, **norm))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(
            nn.Linear(6 * last_in, last_channel),
            nn.Hardswish(inplace=True),
            nn.Dropout(0.2, inplace=True),
            nn.Linear(last_channel, num_classes),
        )
        initialise(self)

    def forward(self, x: Tensor) -> Tensor:
        return self.classifier(self.avgpool(self.features(x)).flatten(1))


# --- ResNet-18 ------------------------------------------------------------------------------


def ResNet18(width: int = 16, num_classes: int = CLASSES) -> nn.Module:  # noqa: N802
    """``resnet18()``'s layout at stage widths ``width`` … 8·``width`` (the coverage corpus's
    ResNet-18, which follows torchvision's), with torchvision's initialisation: He-normal (fan
    out, ReLU gain) convolutions and unit batch norms."""
    model = CorpusResNet18(width, num_classes)
    for module in model.modules():
        if isinstance(module, nn.Conv2d):
            nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
        elif isinstance(module, nn.BatchNorm2d):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)
    return model
