"""MLPerf Tiny reference architectures as small seeded modules (random weights), for the
on-target tests and benchmarks. DS-CNN is the built-in model (``cortex_m_nn.frontend.models``).

Defined here until the shared model zoo (tests/zoo) lands; the layer shapes and padding follow
the MLPerf Tiny v1 reference models (Keras's SAME: a stride-2 3×3 convolution of an even
input pads one row and column after it, ``nn.ZeroPad2d((0, 1, 0, 1))``, which the compiler
folds into the convolution), batch norms left out (they fold into the convolutions anyway), so
the trained MLPerf weights load into them as they are (benchmarks/mlperf_weights.py).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from tests.zoo.svdf_kws import svdf_kws
from torch import nn
from torch.nn import functional as F

from cortex_m_nn.core.options import Activations, LinearWeights, QuantizationOptions, Weights


def same(stride: int) -> tuple[nn.Module, int]:
    """Keras's SAME padding of a 3×3 convolution at ``stride`` (1 or 2) of an even input, as
    (a module in front of the convolution, the convolution's ``padding``): PyTorch's
    ``padding=1`` at stride 1, one row and column after the input at stride 2."""
    return (nn.ZeroPad2d((0, 1, 0, 1)), 0) if stride == 2 else (nn.Identity(), 1)


class _Residual(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.pad, padding = same(stride)
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=padding)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.shortcut = nn.Conv2d(cin, cout, 1, stride=stride) if stride != 1 else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv2(torch.relu(self.conv1(self.pad(x))))
        return torch.relu(y + (x if self.shortcut is None else self.shortcut(x)))


class ResNet8(nn.Module):
    """MLPerf Tiny image classification: 32×32×3 → 10 classes."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.stages = nn.Sequential(
            _Residual(16, 16, 1), _Residual(16, 32, 2), _Residual(32, 64, 2)
        )
        self.fc = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.stages(torch.relu(self.stem(x)))
        y = nn.functional.avg_pool2d(y, 8).flatten(1)
        return torch.softmax(self.fc(y), dim=-1)


class MobileNetV1(nn.Module):
    """MLPerf Tiny visual wake words: MobileNetV1 width 0.25, 96×96×3 → 2 classes."""

    BLOCKS = [(8, 16, 1), (16, 32, 2), (32, 32, 1), (32, 64, 2), (64, 64, 1), (64, 128, 2)]
    BLOCKS += [(128, 128, 1)] * 5 + [(128, 256, 2), (256, 256, 1)]

    def __init__(self) -> None:
        super().__init__()
        pad, _ = same(2)
        layers: list[nn.Module] = [pad, nn.Conv2d(3, 8, 3, stride=2), nn.ReLU()]
        for cin, cout, stride in self.BLOCKS:
            pad, padding = same(stride)
            layers += [
                pad,
                nn.Conv2d(cin, cin, 3, stride=stride, padding=padding, groups=cin),
                nn.ReLU(),
                nn.Conv2d(cin, cout, 1),
                nn.ReLU(),
            ]
        self.features = nn.Sequential(*layers)
        self.fc = nn.Linear(256, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = nn.functional.avg_pool2d(self.features(x), 3).flatten(1)
        return torch.softmax(self.fc(y), dim=-1)


class Autoencoder(nn.Module):
    """MLPerf Tiny anomaly detection: the deep autoencoder, 640 → 128×4 → 8 → 128×4 → 640."""

    def __init__(self) -> None:
        super().__init__()
        sizes = [640, 128, 128, 128, 128, 8, 128, 128, 128, 128]
        layers: list[nn.Module] = []
        for cin, cout in zip(sizes, sizes[1:], strict=False):
            layers += [nn.Linear(cin, cout), nn.ReLU()]
        layers.append(nn.Linear(128, 640))
        self.layers = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class UpsamplingDecoder(nn.Module):
    """A small U-Net/FPN-style decoder: a nearest ×2 upsampling concatenated with the skip,
    a bilinear ×2 added to a lateral 1×1 convolution, a bilinear resize to a size that is no
    multiple (align_corners=True) and a nearest-exact one: 32×32×3 → 4×20×18."""

    def __init__(self) -> None:
        super().__init__()
        self.enc1 = nn.Conv2d(3, 8, 3, padding=1)
        self.enc2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)
        self.enc3 = nn.Conv2d(16, 16, 3, stride=2, padding=1)
        self.merge = nn.Conv2d(32, 8, 3, padding=1)
        self.lateral = nn.Conv2d(8, 8, 1)
        self.head = nn.Conv2d(8, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e1 = torch.relu(self.enc1(x))
        e2 = torch.relu(self.enc2(e1))
        e3 = torch.relu(self.enc3(e2))
        up = nn.functional.interpolate(e3, scale_factor=2, mode="nearest")
        d2 = torch.relu(self.merge(torch.cat([up, e2], dim=1)))
        d1 = nn.functional.interpolate(d2, scale_factor=2, mode="bilinear", align_corners=False)
        y = self.head(d1 + self.lateral(e1))
        y = nn.functional.interpolate(y, size=(23, 27), mode="bilinear", align_corners=True)
        return nn.functional.interpolate(y, size=(20, 18), mode="nearest-exact")


class _XBlock(nn.Module):
    """RegNetX's residual bottleneck: 1x1, 3x3 grouped (group width 8), 1x1, plus a shortcut."""

    def __init__(self, cin: int, cout: int, stride: int, dilation: int = 1) -> None:
        super().__init__()
        self.a = nn.Conv2d(cin, cout, 1)
        self.b = nn.Conv2d(
            cout, cout, 3, stride, padding=dilation, dilation=dilation, groups=cout // 8
        )
        self.c = nn.Conv2d(cout, cout, 1, groups=2)  # a grouped 1x1 too
        self.shortcut = nn.Conv2d(cin, cout, 1, stride=stride)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.c(torch.relu(self.b(torch.relu(self.a(x)))))
        return torch.relu(y + self.shortcut(x))


class RegNetXBlocks(nn.Module):
    """RegNetX-style stem and two X blocks (groups 3 then 6, the second dilated), a depthwise
    conv with channel multiplier 2 and a classifier: 32×32×3 → 10 classes."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.blocks = nn.Sequential(_XBlock(16, 24, 2), _XBlock(24, 48, 1, dilation=2))
        self.expand = nn.Conv2d(48, 96, 3, padding=1, groups=48)
        self.fc = nn.Linear(96, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.blocks(torch.relu(self.stem(x)))
        y = nn.functional.avg_pool2d(torch.relu(self.expand(y)), 8).flatten(1)
        return self.fc(y)


class ShuffleMoves(nn.Module):
    """Data movement on target: a ShuffleNetV2-style split, branch and concat, a channel
    shuffle of a flipped map, a strided slice, a pixel shuffle, a repeat and a select (the
    cortex_m_nn::strided_copy kernel and the transposes)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.branch = nn.Conv2d(8, 8, 3, padding=1)
        self.mix = nn.Conv2d(4, 8, 1)
        self.fc = nn.Linear(8 * 8 + 12, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.stem(x))  # [1, 16, 8, 8]
        left, right = y.chunk(2, dim=1)
        y = torch.cat([left, torch.relu(self.branch(right))], dim=1)
        n, c, h, w = y.shape
        y = y.flip(3).view(n, 2, c // 2, h, w).transpose(1, 2).reshape(n, c, h, w)
        y = nn.functional.pixel_shuffle(y[:, :, ::2, 1::2], 2)  # [1, 4, 8, 8]
        y = self.mix(y.repeat(1, 1, 1, 1))
        head = y[:, 3].flatten(1)  # [1, 64]
        tail = y[0, :3, -1, ::2].reshape(1, 12)
        return self.fc(torch.cat([head, tail], dim=1))


class OverlapGuard(nn.Module):
    """One call of every path the small schedule lets an output share its dead input's bytes
    with (``plan.overlap``), each input dying there: convolutions 3×3 (arm_convolve_s8), 1×1
    of stride 1 and 2, depthwise 3×3 of stride 1 and 2 and of 5×5, max and average pools,
    an element-wise add and mul of equal shapes. 16×16 so every output spans several rows;
    float I/O of three channels, so the planner's peak is inside the network."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.dw = nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.expand = nn.Conv2d(8, 16, 1)
        self.dw5 = nn.Conv2d(16, 16, 5, padding=2, groups=16)
        self.pool = nn.MaxPool2d(3, stride=1, padding=1)
        self.reduce = nn.Conv2d(16, 8, 1, stride=2)
        self.avg = nn.AvgPool2d(3, stride=1, padding=1)
        self.dw2 = nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=8)
        self.a = nn.Conv2d(8, 8, 1)
        self.b = nn.Conv2d(8, 8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.dw(torch.relu(self.conv(x))))
        y = self.pool(self.dw5(torch.relu(self.expand(y))))
        y = self.dw2(self.avg(torch.relu(self.reduce(y))))
        return (self.a(y) + self.b(y)) * y  # all of it: a corrupted value is not averaged away


class StageGuard(nn.Module):
    """First layers the small schedule runs in strips (plan.patch), one of each kind a strip
    computes differently from layer by layer: a strided 3×3 stem (top pad only in the first
    strip), a depthwise 3×3, a residual block (1×1 expansion, depthwise 5×5 whose last strip
    pads the bottom by 2 and no top, 1×1 projection, add of flattened operands), a dilated
    3×3 and a strided depthwise; then a 1×1 convolution whose whole output is the model's
    (float, so a corrupted value is not averaged away). Wide enough at 96×96 that the stage
    needs clearly less RAM than no stage on every core (179 KB against 299 KB, with
    ExecuTorch's method allocator), so the compiler keeps it."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 32, 3, stride=2, padding=1)
        self.dw = nn.Conv2d(32, 32, 3, padding=1, groups=32)
        self.expand = nn.Conv2d(32, 64, 1)
        self.dw5 = nn.Conv2d(64, 64, 5, padding=2, groups=64)
        self.project = nn.Conv2d(64, 32, 1)
        self.dilated = nn.Conv2d(32, 32, 3, padding=2, dilation=2)
        self.down = nn.Conv2d(32, 32, 3, stride=2, padding=1, groups=32)
        self.head = nn.Conv2d(32, 8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.dw(torch.relu(self.stem(x))))
        y = y + self.project(torch.relu(self.dw5(torch.relu(self.expand(y)))))
        y = self.down(torch.relu(self.dilated(y)))
        return self.head(y)


def stage_guard() -> tuple[nn.Module, tuple[torch.Tensor]]:
    return seeded(StageGuard, 1, 3, 96, 96)


def overlap_guard() -> tuple[nn.Module, tuple[torch.Tensor]]:
    return seeded(OverlapGuard, 1, 3, 16, 16)


def _mobilenet_v2_144() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    from tests.zoo.mobilenet import MobileNetV2

    return seeded(MobileNetV2, 1, 3, 144, 144)


def _zoo(name: str) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    from tests.zoo import mobilenet

    return getattr(mobilenet, name)()


def zoo_mobilenet_v2() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """The zoo's MobileNetV2-0.35 at 96×96 (for the command line, which loads this file)."""
    from tests.zoo.mobilenet import mobilenet_v2

    return mobilenet_v2()


def seeded(
    factory: type[nn.Module], *shape: int, seed: int = 7
) -> tuple[nn.Module, tuple[torch.Tensor]]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = factory().eval()
        example = torch.randn(*shape)
    return module, (example,)


class Boundary(nn.Module):
    """The model boundary's kernels on every path: an NCHW input of 5 channels and odd
    extents (the quantize scatters across channels, with vector tails), one 1×1 convolution,
    an NCHW output (the dequantize scatters across planes). Its target inputs
    (``boundary_inputs``) put many values on exact rounding ties and far beyond the range."""

    def __init__(self) -> None:
        super().__init__()
        self.mix = nn.Conv2d(5, 6, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.mix(x)


def boundary_inputs(lowered: torch.fx.GraphModule, gen: torch.Generator) -> tuple[torch.Tensor]:
    """[1, 5, 7, 9] float32 in steps of the program's input scale: a third on k + 1/2 steps
    (ties, rounded half to even), a third normal within the range, a third up to 50 times
    beyond it (saturating)."""
    scale = next(
        float(n.args[1])
        for n in lowered.graph.nodes
        if n.target is torch.ops.cortex_m_nn.quantize.default
    )
    ties = (torch.randint(-140, 140, (1, 5, 7, 9), generator=gen) + 0.5) * scale
    normal = torch.randn(1, 5, 7, 9, generator=gen) * 40 * scale
    beyond = torch.randn(1, 5, 7, 9, generator=gen) * 50 * 128 * scale
    pick = torch.randint(0, 3, (1, 5, 7, 9), generator=gen)
    return (torch.where(pick == 0, ties, torch.where(pick == 1, normal, beyond)).float(),)


#: name → the target inputs of its compiled program (lowered graph, seeded generator), where
#: the harness's seeded normal inputs would not reach what the model is there to test
TARGET_INPUTS: dict[str, Callable[[torch.fx.GraphModule, torch.Generator], tuple]] = {
    "boundary": boundary_inputs,
}


#: name → the model it compiles with int8 inputs and outputs (``--io int8``): a 1-channel
#: input (the same bytes in both layouts) and a 3-channel image in, a 4-channel map out (NHWC)
INT8_IO = {"ds_cnn_int8_io": "ds_cnn", "upsampling_decoder_int8_io": "upsampling_decoder"}


class PrecisionMix(nn.Module):
    """Three linear layers, a square root (a table, int8 only) of the second's ReLU: with
    ``--activations int16``, int16 → int8 → int16 requantizations around it; the second
    layer's rows spread 100x, so its int16 case is the per-channel 1x1 convolution."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.c = nn.Linear(20, 16), nn.Linear(16, 12), nn.Linear(12, 6)
        with torch.no_grad():
            for layer in (self.a, self.c):  # every row's peak the same: per tensor fits
                layer.weight.div_(layer.weight.abs().amax(dim=1, keepdim=True) * 4)
            self.b.weight.mul_(torch.logspace(-2, 0, 12)[:, None])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c(torch.sqrt(torch.relu(self.b(torch.relu(self.a(x))))))


class AttentionInt16(nn.Module):
    """A transformer block for int16 activations: q @ k^T read through the transpose, a
    softmax, @ v (v transposed by the int16 transpose loop), a GELU MLP, a sigmoid gate and a
    product with a constant matrix: arm_batch_matmul_s16 and the interpolated int16 tables."""

    def __init__(self) -> None:
        super().__init__()
        self.q, self.k, self.v = nn.Linear(16, 16), nn.Linear(16, 16), nn.Linear(16, 16)
        self.up, self.down = nn.Linear(16, 32), nn.Linear(32, 16)
        self.mix = nn.Parameter(torch.randn(16, 10) / 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scores = self.q(x) @ self.k(x).transpose(-2, -1) * 0.25
        x = x + torch.softmax(scores, dim=-1) @ self.v(x)
        x = x + self.down(F.gelu(self.up(x)))
        return torch.tanh(x * torch.sigmoid(x)) @ self.mix


class Int4Layers(nn.Module):
    """Every int4 case: a first convolution of one input channel and an even kernel width, a
    depthwise one with multiplier 2, a 1x1 one, a 1xN one (height 1, stride 2: the general
    path, never CMSIS-NN's 1xN s4 code), a per-channel linear layer (a 1x1 s4 convolution)
    and a per-tensor one (arm_fully_connected_s4)."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Conv2d(1, 8, (3, 4), padding=(1, 2))
        self.depthwise = nn.Conv2d(8, 16, 3, stride=2, padding=1, groups=8)
        self.pointwise = nn.Conv2d(16, 16, 1)
        self.row = nn.Conv2d(16, 12, (1, 3), stride=(1, 2), padding=(0, 1))
        self.hidden = nn.Linear(12, 10)
        self.head = nn.Linear(10, 6)
        with torch.no_grad():  # rows 1/50 to 1: per channel, not per tensor, for this one
            self.hidden.weight.mul_(torch.logspace(-1.7, 0, 10)[:, None])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.pointwise(torch.relu(self.depthwise(torch.relu(self.first(x))))))
        y = torch.relu(self.row(y.mean(dim=2, keepdim=True)))
        return self.head(torch.relu(self.hidden(y.mean(dim=(2, 3)))))


#: name → (the model it compiles, the quantizer's options): int16 activations everywhere an
#: op has an int16 case (all of the autoencoder's layers, per-tensor weights) and mixed
INT16 = {
    "autoencoder_int16": (
        "autoencoder",
        QuantizationOptions(activations=Activations.INT16, linear_weights=LinearWeights.PER_TENSOR),
    ),
    "autoencoder_int16_per_channel": (
        "autoencoder",
        QuantizationOptions(
            activations=Activations.INT16, linear_weights=LinearWeights.PER_CHANNEL
        ),
    ),
    "ds_cnn_int16": ("ds_cnn", QuantizationOptions(activations=Activations.INT16)),
    "resnet8_int16": ("resnet8", QuantizationOptions(activations=Activations.INT16)),
    # mixed precision as --precision auto chose it on commit 68b9b0d (8 synthetic samples):
    # DS-CNN at 45 dB, the autoencoder at its int8 SNR + 3 dB
    "ds_cnn_mixed": ("ds_cnn", QuantizationOptions(int16_layers=("conv2d_8", "softmax"))),
    "autoencoder_mixed": ("autoencoder", QuantizationOptions(int16_layers=("linear_9",))),
    # benchmarks/bench_target.py only (not in harness.MODEL_NAMES)
    "mobilenet_v1_025_int16": (
        "mobilenet_v1_025",
        QuantizationOptions(activations=Activations.INT16),
    ),
    "precision_mix": (
        "precision_mix",
        QuantizationOptions(activations=Activations.INT16, equalize=False),
    ),
    "attention_int16": (
        "attention_int16",
        QuantizationOptions(activations=Activations.INT16, linear_weights=LinearWeights.PER_TENSOR),
    ),
    # int4 weights (4w8a): every layer with an int4 case
    "ds_cnn_int4": ("ds_cnn", QuantizationOptions(weights=Weights.INT4)),
    "int4_layers": ("int4_layers", QuantizationOptions(weights=Weights.INT4)),
    # int16 LSTM (arm_lstm_unidirectional_s16)
    "kws_lstm_int16": ("kws_lstm", QuantizationOptions(activations=Activations.INT16)),
    # int4 and int8 weights per layer as --weights auto chose them for DS-CNN (16 synthetic
    # samples, X = all int4's SNR + half the way to all int8's): the last two layers int8
    "ds_cnn_int4_mixed": (
        "ds_cnn",
        QuantizationOptions(int4_layers=tuple(f"conv2d_{i}" for i in range(1, 8)) + ("conv2d",)),
    ),
    # benchmarks/bench_target.py only (not in harness.MODEL_NAMES)
    "mobilenet_v1_025_int4": ("mobilenet_v1_025", QuantizationOptions(weights=Weights.INT4)),
}


class LstmLayers(nn.Module):
    """Every LSTM case the zoo's does not take: a time-major sequence of two batch items
    through two layers started from a given state, read as every step's output and h_n."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(5, 12, num_layers=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h0 = torch.full((2, x.shape[1], 12), 0.25)
        out, (h, _) = self.lstm(x, (h0, -2 * h0))
        return out.mean(-1, keepdim=True) + h[-1:].sum(-1, keepdim=True)


class CausalDecoder(nn.Module):
    """A decoder layer as users write it: causal self-attention (PyTorch's -inf square mask
    and is_causal), cross-attention on a projected memory, pre-norm, a ReLU feed-forward
    network: masked softmaxes (arm_softmax_s8 on each row's kept scores), batch matmuls with
    the scale taken into their requantization."""

    def __init__(self) -> None:
        super().__init__()
        self.memory = nn.Linear(16, 16)
        self.layer = nn.TransformerDecoderLayer(
            16, 2, 32, dropout=0.0, batch_first=True, norm_first=True
        )
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        memory = self.memory(x[:, :4])
        return self.layer(x, memory, tgt_mask=self.mask, tgt_is_causal=True)


class GruLayers(nn.Module):
    """Every GRU case the zoo's does not take: a time-major sequence of two batch items
    through two layers started from a given state, read as every step's output and h_n."""

    def __init__(self) -> None:
        super().__init__()
        self.gru = nn.GRU(5, 12, num_layers=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, h = self.gru(x, torch.full((2, x.shape[1], 12), 0.25))
        return out.mean(-1, keepdim=True) + h[-1:].sum(-1, keepdim=True)


def _kws_lstm() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    from tests.zoo.kws_lstm import kws_lstm

    return kws_lstm()


def _zoo(name: str) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    from tests.zoo import ZOO

    return ZOO[name]()


def _architecture(name: str) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    from tests.coverage import ARCHITECTURES

    return ARCHITECTURES[name]()


#: name → (module, example inputs) factory
MODELS = {
    "overlap_guard": overlap_guard,
    "kws_lstm": _kws_lstm,
    "lstm_layers": lambda: seeded(LstmLayers, 6, 2, 5),
    "kws_gru": lambda: _zoo("kws_gru"),
    "kws_gru_streaming": lambda: _zoo("kws_gru_streaming"),
    "kws_lstm_streaming": lambda: _zoo("kws_lstm_streaming"),
    "gru_layers": lambda: seeded(GruLayers, 6, 2, 5),
    "kws_transformer": lambda: _zoo("kws_transformer"),
    "causal_decoder": lambda: seeded(CausalDecoder, 1, 10, 16),
    "vit": lambda: _architecture("vit"),
    "mobilevit": lambda: _architecture("mobilevit"),
    "timm_mobilevit_xxs": lambda: _architecture("timm_mobilevit_xxs"),
    "timm_vit_tiny": lambda: _architecture("timm_vit_tiny"),
    "precision_mix": lambda: seeded(PrecisionMix, 2, 20),
    "attention_int16": lambda: seeded(AttentionInt16, 1, 6, 16),
    "int4_layers": lambda: seeded(Int4Layers, 1, 1, 12, 10),
    "boundary": lambda: seeded(Boundary, 1, 5, 7, 9),
    "resnet8": lambda: seeded(ResNet8, 1, 3, 32, 32),
    "mobilenet_v1_025": lambda: seeded(MobileNetV1, 1, 3, 96, 96),
    "autoencoder": lambda: seeded(Autoencoder, 1, 640),
    "upsampling_decoder": lambda: seeded(UpsamplingDecoder, 1, 3, 32, 32),
    "regnetx_grouped": lambda: seeded(RegNetXBlocks, 1, 3, 32, 32),
    "shuffle_moves": lambda: seeded(ShuffleMoves, 1, 3, 16, 16),
    "stage_guard": stage_guard,
    "mobilenet_v2_144": _mobilenet_v2_144,
    "mobilenet_v2_96": zoo_mobilenet_v2,
    "mobilenet_v3_small": lambda: _zoo("mobilenet_v3_small"),
    "qat_cnn": lambda: _qat("qat_cnn"),
}


def _qat(name: str) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    from tests import qat_models

    return getattr(qat_models, name)()


class MobileVitBlock(nn.Module):
    """A MobileViT-style block: convolutions, the feature map unfolded to tokens, a pre-norm
    transformer MLP (LayerNorm → linear → GELU → linear, residual), LayerNorm, folded back to
    a feature map, 1×1 conv with GroupNorm, then pooled to 10 classes."""

    def __init__(self, dim: int = 16) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.local = nn.Conv2d(8, dim, 1)
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.mlp1, self.mlp2 = nn.Linear(dim, 2 * dim), nn.Linear(2 * dim, dim)
        self.fuse = nn.Conv2d(dim, 24, 1)
        self.group_norm = nn.GroupNorm(4, 24)
        self.fc = nn.Linear(24, 10)
        with torch.no_grad():  # affine parameters away from their 1 / 0 initialization
            for norm in (self.norm1, self.norm2, self.group_norm):
                norm.weight.uniform_(0.5, 1.5)
                norm.bias.uniform_(-0.3, 0.3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.local(torch.relu(self.stem(x)))
        n, d, h, w = y.shape
        tokens = y.flatten(2).transpose(1, 2)
        tokens = tokens + self.mlp2(nn.functional.gelu(self.mlp1(self.norm1(tokens))))
        y = self.norm2(tokens).transpose(1, 2).reshape(n, d, h, w)
        y = torch.relu(self.group_norm(self.fuse(y)))
        return self.fc(y.mean((2, 3)))


MODELS["mobilevit_block"] = lambda: seeded(MobileVitBlock, 1, 3, 16, 16)


class Signal1d(nn.Module):
    """A 1-D signal net: strided Conv1d whose right padding is less than its left (kernel 3,
    stride 2, padding 1 on even lengths: CMSIS-NN's MVE 1xN path refuses those, so the
    kernel must take arm_convolve_s8), a ConvTranspose1d back up to twice the length, a
    linear 1-D upsampling, a per-channel PReLU (a LUT per channel), then max and sum
    reductions over time and a classifier: [1, 4, 32] → 6 classes."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(4, 8, 3, stride=2, padding=1)
        self.conv2 = nn.Conv1d(8, 16, 3, stride=2, padding=1)
        self.up = nn.ConvTranspose1d(16, 16, 3, stride=2, padding=1, output_padding=1)
        self.act = nn.PReLU(16)
        self.fc = nn.Linear(32, 6)
        with torch.no_grad():
            self.act.weight.uniform_(-0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv2(torch.relu(self.conv1(x)))  # [1, 16, 8]
        y = torch.relu(self.up(torch.relu(y)))  # [1, 16, 16]
        y = self.act(nn.functional.interpolate(y, scale_factor=1.5, mode="linear"))  # 24
        pooled = torch.cat([y.amax(dim=2), y.sum(dim=2)], dim=1)
        return self.fc(pooled)


MODELS["signal_1d"] = lambda: seeded(Signal1d, 1, 4, 32)


class OneByN(nn.Module):
    """1-D convolutions CMSIS-NN's MVE wrapper sends to ``arm_convolve_1_x_n_s8`` (8 channels,
    stride × channels a multiple of 4), in the layouts it computes and the ones it does not
    (the kernel then calls ``arm_convolve_s8``): padding 2 with kernel 5, stride 2 on length 9
    (the last window holds two pads); no padding where the output stops short of the input's
    end (kernel 3, stride 2, length 8); TensorFlow's SAME folded from ``F.pad`` (0, 1) and
    (1, 2) on lengths 9 and 8; 'same' with an even kernel. Concatenated along time: [1, 8, 9] →
    [1, 8, 29]."""

    def __init__(self) -> None:
        super().__init__()
        self.two_pads = nn.Conv1d(8, 8, 5, stride=2, padding=2)  # L 9 → 5
        self.short = nn.Conv1d(8, 8, 3, stride=2)  # L 8 → 3
        self.tf_same = nn.Conv1d(8, 8, 3, stride=2)  # F.pad (0, 1): L 9 → 4
        self.wide = nn.Conv1d(8, 8, 5, stride=2)  # F.pad (1, 2): L 12 → 4 (computed)
        self.wide_short = nn.Conv1d(8, 8, 5, stride=2)  # F.pad (1, 2): L 11 → 4 (not)
        self.even = nn.Conv1d(8, 8, 4, padding="same")  # L 9 → 9

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        eight = x[..., :8]
        return torch.cat(
            [
                self.two_pads(x),
                self.short(eight),
                self.tf_same(nn.functional.pad(eight, (0, 1))),
                self.wide(nn.functional.pad(x, (1, 2))),
                self.wide_short(nn.functional.pad(eight, (1, 2))),
                self.even(x),
            ],
            dim=2,
        )


MODELS["one_by_n"] = lambda: seeded(OneByN, 1, 8, 9)


MODELS["svdf_kws"] = svdf_kws  # the zoo's (tests/zoo/svdf_kws.py)
