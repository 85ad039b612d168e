"""Every common ``torch.nn`` layer in its common configurations, one tiny model each."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from .cases import CHANNELS, IMAGE, SEQUENCE, VECTOR, Factory, case, layer

C = CHANNELS
GROUPED = (1, 6, 8, 8)  # six channels: groups of 2 and 3 (RegNet-style)

ACTIVATIONS: dict[str, Factory] = {
    "act.relu": layer(nn.ReLU),
    "act.relu_inplace": layer(lambda: nn.ReLU(inplace=True)),
    "act.relu6": layer(nn.ReLU6),
    "act.relu6_inplace": layer(lambda: nn.ReLU6(inplace=True)),
    "act.hardtanh": layer(lambda: nn.Hardtanh(-0.5, 0.5)),
    "act.hardtanh_inplace": layer(lambda: nn.Hardtanh(inplace=True)),
    "act.leaky_relu": layer(lambda: nn.LeakyReLU(0.1)),
    "act.leaky_relu_inplace": layer(lambda: nn.LeakyReLU(0.2, inplace=True)),
    "act.prelu_per_channel": layer(lambda: nn.PReLU(C)),
    "act.prelu_single": layer(nn.PReLU),
    "act.elu": layer(nn.ELU),
    "act.selu": layer(nn.SELU),
    "act.celu": layer(nn.CELU),
    "act.gelu": layer(nn.GELU),
    "act.gelu_tanh": layer(lambda: nn.GELU(approximate="tanh")),
    "act.silu": layer(nn.SiLU),
    "act.silu_inplace": layer(lambda: nn.SiLU(inplace=True)),
    "act.mish": layer(nn.Mish),
    "act.hardswish": layer(nn.Hardswish),
    "act.hardswish_inplace": layer(lambda: nn.Hardswish(inplace=True)),
    "act.hardsigmoid": layer(nn.Hardsigmoid),
    "act.sigmoid": layer(nn.Sigmoid),
    "act.tanh": layer(nn.Tanh),
    "act.softplus": layer(nn.Softplus),
    "act.softsign": layer(nn.Softsign),
    "act.logsigmoid": layer(nn.LogSigmoid),
}

NORMS: dict[str, Factory] = {
    "norm.batchnorm2d_after_conv": layer(lambda: nn.BatchNorm2d(C)),
    "norm.batchnorm1d_after_linear": layer(lambda: nn.BatchNorm1d(16), "linear", VECTOR),
    "norm.layernorm": layer(lambda: nn.LayerNorm(16), "linear", SEQUENCE),
    "norm.layernorm_no_affine": layer(
        lambda: nn.LayerNorm(16, elementwise_affine=False), "linear", SEQUENCE
    ),
    "norm.layernorm_channels": case(
        lambda m, x: m.norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2),
        layers=lambda: {"norm": nn.LayerNorm(C)},
    ),
    "norm.groupnorm": layer(lambda: nn.GroupNorm(2, C)),
    "norm.groupnorm_one_group": layer(lambda: nn.GroupNorm(1, C)),
    "norm.instancenorm2d": layer(lambda: nn.InstanceNorm2d(C, affine=True)),
    "norm.instancenorm2d_no_affine": layer(lambda: nn.InstanceNorm2d(C)),
    "norm.instancenorm2d_running_stats": layer(
        lambda: nn.InstanceNorm2d(C, affine=True, track_running_stats=True)
    ),
    "norm.instancenorm1d": layer(lambda: nn.InstanceNorm1d(6, affine=True), "linear", SEQUENCE),
}

POOLS: dict[str, Factory] = {
    "pool.maxpool2d": layer(lambda: nn.MaxPool2d(2)),
    "pool.maxpool2d_k3s2p1": layer(lambda: nn.MaxPool2d(3, 2, 1)),
    "pool.maxpool2d_ceil": layer(lambda: nn.MaxPool2d(3, 2, ceil_mode=True)),
    "pool.avgpool2d": layer(lambda: nn.AvgPool2d(2)),
    "pool.avgpool2d_k3s1p1": layer(lambda: nn.AvgPool2d(3, 1, 1)),
    "pool.avgpool2d_no_pad_count": layer(lambda: nn.AvgPool2d(3, 1, 1, count_include_pad=False)),
    "pool.avgpool2d_k3s2p1": layer(lambda: nn.AvgPool2d(3, 2, 1)),
    "pool.adaptive_avg_1": layer(lambda: nn.AdaptiveAvgPool2d(1)),
    "pool.adaptive_avg_2x2": layer(lambda: nn.AdaptiveAvgPool2d((2, 2))),
    "pool.adaptive_avg_3x3": layer(lambda: nn.AdaptiveAvgPool2d(3)),
    # ResNet-D's downsampling shortcut on an odd extent: the last window is clipped
    "pool.avg_ceil_resnet_d": layer(
        lambda: nn.AvgPool2d(2, ceil_mode=True, count_include_pad=False), shape=(1, 4, 7, 7)
    ),
    "pool.avg_ceil_counting_padding": layer(
        lambda: nn.AvgPool2d(3, 2, padding=1, ceil_mode=True), shape=(1, 4, 8, 8)
    ),
    "pool.avg_ceil_padding_not_counted": layer(
        lambda: nn.AvgPool2d(3, 2, padding=1, ceil_mode=True, count_include_pad=False),
        shape=(1, 4, 6, 6),
    ),
    "pool.adaptive_max_1": layer(lambda: nn.AdaptiveMaxPool2d(1)),
    "pool.adaptive_max_4x4": layer(lambda: nn.AdaptiveMaxPool2d(4)),
    "pool.adaptive_max_1d": case(lambda m, x: F.adaptive_max_pool1d(x, 1), "linear", (SEQUENCE,)),
    "pool.adaptive_max_1d_uniform": layer(lambda: nn.AdaptiveMaxPool1d(8), "linear", SEQUENCE),
    "pool.global_mean": case(lambda m, x: x.mean((2, 3))),
    "pool.global_mean_keepdim": case(lambda m, x: x.mean([-1, -2], keepdim=True)),
    "pool.global_amax": case(lambda m, x: torch.amax(x, dim=(2, 3))),
    "pool.maxpool1d": case(lambda m, x: F.max_pool1d(x, 2), "linear", (SEQUENCE,)),
    "pool.avgpool1d": case(lambda m, x: F.avg_pool1d(x, 2), "linear", (SEQUENCE,)),
    "pool.adaptive_avg_1d": case(lambda m, x: F.adaptive_avg_pool1d(x, 1), "linear", (SEQUENCE,)),
}


def _conv(*args, shape=IMAGE, **kwargs) -> Factory:
    return layer(lambda: nn.Conv2d(*args, **kwargs), None, shape)


CONVS: dict[str, Factory] = {
    "conv.3x3": _conv(4, C, 3, padding=1),
    "conv.3x3_no_bias": _conv(4, C, 3, padding=1, bias=False),
    "conv.3x3_valid": _conv(4, C, 3),
    "conv.3x3_stride2": _conv(4, C, 3, 2, 1),
    "conv.1x1": _conv(4, C, 1),
    "conv.5x5": _conv(4, C, 5, padding=2),
    "conv.same_padding": _conv(4, C, 3, padding="same"),
    "conv.asymmetric_kernel": _conv(4, C, (1, 3), padding=(0, 1)),
    "conv.dilated": _conv(4, C, 3, padding=2, dilation=2),
    "conv.reflect_padding": _conv(4, C, 3, padding=1, padding_mode="reflect"),
    "conv.grouped_2": _conv(6, 12, 3, padding=1, groups=2, shape=GROUPED),
    "conv.grouped_3": _conv(6, 6, 3, padding=1, groups=3, shape=GROUPED),
    "conv.grouped_1x1": _conv(6, 12, 1, groups=3, shape=GROUPED),
    "conv.depthwise": _conv(4, 4, 3, padding=1, groups=4),
    "conv.depthwise_stride2": _conv(4, 4, 3, 2, 1, groups=4),
    "conv.depthwise_5x5": _conv(4, 4, 5, padding=2, groups=4),
    "conv.depthwise_multiplier2": _conv(4, 8, 3, padding=1, groups=4),
    "conv.depthwise_dilated": _conv(4, 4, 3, padding=2, dilation=2, groups=4),
    "conv.asymmetric_padding": case(
        lambda m, x: m.conv(F.pad(x, (0, 1, 0, 1))),
        None,
        layers=lambda: {"conv": nn.Conv2d(4, C, 3, 2)},
    ),
    "conv.conv1d": case(
        lambda m, x: m.conv(x), None, ((1, 6, 16),), lambda: {"conv": nn.Conv1d(6, C, 3, padding=1)}
    ),
    "conv.conv1d_depthwise": case(
        lambda m, x: m.conv(x),
        None,
        ((1, 6, 16),),
        lambda: {"conv": nn.Conv1d(6, 6, 3, padding=1, groups=6)},
    ),
    "conv.transpose2d": layer(lambda: nn.ConvTranspose2d(4, C, 3, padding=1), None),
    "conv.transpose2d_stride2": layer(lambda: nn.ConvTranspose2d(4, C, 2, 2), None),
}

LINEAR: dict[str, Factory] = {
    "linear.vector": layer(lambda: nn.Linear(16, 10), None, VECTOR),
    "linear.no_bias": layer(lambda: nn.Linear(16, 10, bias=False), None, VECTOR),
    "linear.sequence": layer(lambda: nn.Linear(16, 12), None, SEQUENCE),
    "linear.relu": case(
        lambda m, x: torch.relu(m.fc(x)), None, (VECTOR,), lambda: {"fc": nn.Linear(16, 10)}
    ),
    "linear.identity": layer(nn.Identity),
}

DROPOUT: dict[str, Factory] = {
    "dropout.dropout": layer(lambda: nn.Dropout(0.2), "linear", VECTOR),
    "dropout.inplace": layer(lambda: nn.Dropout(0.2, inplace=True), "linear", VECTOR),
    "dropout.dropout2d": layer(lambda: nn.Dropout2d(0.1)),
    "dropout.functional": case(lambda m, x: F.dropout(x, 0.2, m.training), "linear", (VECTOR,)),
    "dropout.alpha": layer(lambda: nn.AlphaDropout(0.1), "linear", VECTOR),
    "dropout.feature_alpha": layer(lambda: nn.FeatureAlphaDropout(0.1)),
    "dropout.dropout1d": layer(lambda: nn.Dropout1d(0.1), "linear", SEQUENCE),
}

RESIZE: dict[str, Factory] = {
    "resize.upsample_nearest2x": layer(lambda: nn.Upsample(scale_factor=2)),
    "resize.upsampling_nearest2d": layer(lambda: nn.UpsamplingNearest2d(scale_factor=2)),
    "resize.upsample_bilinear2x": layer(lambda: nn.Upsample(scale_factor=2, mode="bilinear")),
    "resize.upsample_bilinear_align": layer(
        lambda: nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
    ),
    "resize.interpolate_size": case(lambda m, x: F.interpolate(x, size=(12, 12))),
    "resize.interpolate_bilinear_size": case(
        lambda m, x: F.interpolate(x, size=(12, 12), mode="bilinear", align_corners=False)
    ),
    "resize.pixel_shuffle": layer(lambda: nn.PixelShuffle(2)),
    "resize.pixel_unshuffle": layer(lambda: nn.PixelUnshuffle(2)),
}

SHAPE: dict[str, Factory] = {
    "shape.flatten_module": layer(nn.Flatten),
    "shape.unflatten_module": layer(lambda: nn.Unflatten(1, (2, 4))),
    "shape.softmax_module": layer(lambda: nn.Softmax(dim=-1), "linear", VECTOR),
    "shape.log_softmax_module": layer(lambda: nn.LogSoftmax(dim=-1), "linear", VECTOR),
    "shape.softmax2d": layer(nn.Softmax2d),
}


def _heads(*tensors: torch.Tensor) -> list[torch.Tensor]:
    """``[N, L, 16]`` as two heads ``[N, 2, L, 8]``."""
    return [t.unflatten(-1, (2, 8)).transpose(1, 2) for t in tensors]


class _Bias(nn.Module):
    """A learned additive attention bias ``[L, L]`` (a relative-position bias)."""

    def __init__(self, length: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(length, length) * 0.5)

    def forward(self) -> torch.Tensor:
        return self.weight


class _Masks(nn.Module):
    """The masks a sequence model keeps as buffers: causal as booleans (True: masked, as
    ``nn.MultiheadAttention`` takes them) and as PyTorch's ``-inf`` square, and a key padding
    mask hiding the last token."""

    def __init__(self, length: int = SEQUENCE[1]) -> None:
        super().__init__()
        self.register_buffer("causal", torch.ones(length, length, dtype=torch.bool).triu(1))
        self.register_buffer("square", nn.Transformer.generate_square_subsequent_mask(length))
        self.register_buffer("padding", torch.arange(length).unsqueeze(0) == length - 1)


ATTENTION: dict[str, Factory] = {
    "attention.multihead": case(
        lambda m, x: m.attn(x, x, x, need_weights=False)[0],
        "linear",
        (SEQUENCE,),
        lambda: {"attn": nn.MultiheadAttention(16, 2, batch_first=True)},
    ),
    "attention.sdpa": case(
        lambda m, x: F.scaled_dot_product_attention(x, x, x), "linear", (SEQUENCE,)
    ),
    "attention.sdpa_heads_scale": case(
        lambda m, x: F.scaled_dot_product_attention(*_heads(x, x, x), scale=0.3),
        "linear",
        (SEQUENCE,),
    ),
    "attention.sdpa_grouped_query": case(
        lambda m, x: F.scaled_dot_product_attention(
            *(t.unflatten(-1, (-1, 4)).transpose(1, 2) for t in (x, x[..., :8], x[..., 8:])),
            enable_gqa=True,
        ),
        "linear",
        (SEQUENCE,),
    ),
    "attention.sdpa_float_mask": case(
        lambda m, x: F.scaled_dot_product_attention(x, x, x, attn_mask=m.bias.weight),
        "linear",
        (SEQUENCE,),
        lambda: {"bias": _Bias(SEQUENCE[1])},
    ),
    "attention.multihead_sequence_first": case(
        lambda m, x: m.attn(x, x, x, need_weights=False)[0],
        "linear",
        (SEQUENCE,),
        lambda: {"attn": nn.MultiheadAttention(16, 4)},
    ),
    "attention.multihead_weights": case(
        lambda m, x: torch.cat(m.attn(x, x, x)[:1] + (m.attn(x, x, x)[1],), -1),
        "linear",
        (SEQUENCE,),
        lambda: {"attn": nn.MultiheadAttention(16, 2, batch_first=True)},
    ),
    "attention.multihead_cross": case(
        lambda m, x, y: m.attn(x, m.key(y), y, need_weights=False)[0],
        "linear",
        (SEQUENCE, (1, 4, 16)),
        lambda: {"attn": nn.MultiheadAttention(16, 2, batch_first=True), "key": nn.Linear(16, 16)},
    ),
    "attention.encoder_layer": layer(
        lambda: nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True),
        "linear",
        SEQUENCE,
    ),
    "attention.encoder_layer_gelu_norm_first": layer(
        lambda: nn.TransformerEncoderLayer(
            16, 4, 32, dropout=0.0, activation="gelu", batch_first=True, norm_first=True
        ),
        "linear",
        SEQUENCE,
    ),
    "attention.encoder_two_layers": layer(
        lambda: nn.TransformerEncoder(
            nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True),
            2,
            enable_nested_tensor=False,
        ),
        "linear",
        SEQUENCE,
    ),
    "attention.sdpa_causal": case(
        lambda m, x: F.scaled_dot_product_attention(*_heads(x, x, x), is_causal=True),
        "linear",
        (SEQUENCE,),
    ),
    "attention.multihead_masks": case(
        lambda m, x: m.attn(x, x, x, attn_mask=m.mask.causal, key_padding_mask=m.mask.padding)[0],
        "linear",
        (SEQUENCE,),
        lambda: {"attn": nn.MultiheadAttention(16, 2, batch_first=True), "mask": _Masks()},
    ),
    "attention.encoder_causal": case(
        lambda m, x: m.layer(x, src_mask=m.mask.square, is_causal=True),
        "linear",
        (SEQUENCE,),
        lambda: {
            "layer": nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True),
            "mask": _Masks(),
        },
    ),
    "attention.decoder_causal": case(
        lambda m, x, y: m.layer(x, m.memory(y), tgt_mask=m.mask.square, tgt_is_causal=True),
        "linear",
        (SEQUENCE, (1, 4, 16)),
        lambda: {
            "layer": nn.TransformerDecoderLayer(
                16, 2, 32, dropout=0.0, batch_first=True, norm_first=True
            ),
            "memory": nn.Linear(16, 16),
            "mask": _Masks(),
        },
    ),
    "attention.decoder_layer": case(
        lambda m, x, y: m.layer(x, m.memory(y)),
        "linear",
        (SEQUENCE, (1, 4, 16)),
        lambda: {
            "layer": nn.TransformerDecoderLayer(16, 2, 32, dropout=0.0, batch_first=True),
            "memory": nn.Linear(16, 16),
        },
    ),
}

LAYERS: dict[str, Factory] = {
    **ACTIVATIONS,
    **NORMS,
    **POOLS,
    **CONVS,
    **LINEAR,
    **DROPOUT,
    **RESIZE,
    **SHAPE,
    **ATTENTION,
}
