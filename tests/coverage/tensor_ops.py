"""Tensor methods and functions common in ``forward()``, one tiny model each.

Bodies read ``x`` (and ``y``), the outputs of a seeded stem: a 3×3 conv to (1, 8, 8, 8) for
images, a linear layer for sequences (1, 6, 16) and vectors (1, 16).
"""

from __future__ import annotations

import torch
from torch.nn import functional as F

from .cases import SEQUENCE, VECTOR, Factory, case

SEQ = (SEQUENCE,)
VEC = (VECTOR,)


class _Scale(torch.nn.Module):
    """A learned vector (a layer scale or a bias), read through a view by the case."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.linspace(0.5, 1.5, size))


def _conv() -> torch.nn.Module:
    return torch.nn.Conv2d(4, 8, 3, padding=1)


def _inplace_add(m, x, y):
    x += y
    return x


def _inplace_mul_const(m, x):
    x *= 0.5
    return x


def _relu_then_add_(m, x, y):
    out = torch.relu(x)
    out.add_(y)
    return out


def _channel_shuffle(m, x):
    n, c, h, w = x.shape
    x = x.view(n, 2, c // 2, h, w).transpose(1, 2).contiguous()
    return x.view(n, c, h, w)


def _ghost_slice(m, x, y):
    out = torch.cat([x, y], dim=1)
    return out[:, : x.shape[1]]


INPLACE: dict[str, Factory] = {
    "inplace.add_": case(lambda m, x, y: x.add_(y), "two"),
    "inplace.iadd": case(_inplace_add, "two"),
    "inplace.relu_then_add_": case(_relu_then_add_, "two"),
    "inplace.mul_": case(lambda m, x, y: x.mul_(torch.sigmoid(y)), "two"),
    "inplace.imul_const": case(_inplace_mul_const),
    "inplace.relu_": case(lambda m, x: x.relu_()),
    "inplace.F_relu_inplace": case(lambda m, x: F.relu(x, inplace=True)),
    "inplace.clamp_": case(lambda m, x: x.clamp_(-1.0, 1.0)),
    "inplace.hardtanh_": case(lambda m, x: F.hardtanh_(x, 0.0, 6.0)),
    "inplace.sigmoid_": case(lambda m, x: x.sigmoid_()),
    "inplace.dropout_": case(lambda m, x: F.dropout(x, 0.1, False, inplace=True), "linear", VEC),
    "inplace.relu_on_input": case(
        lambda m, x: m.conv(F.relu(x, inplace=True)), None, layers=lambda: {"conv": _conv()}
    ),
}

ALIASES: dict[str, Factory] = {
    "alias.clone": case(lambda m, x: x.clone() + x),
    "alias.contiguous": case(lambda m, x: x.contiguous()),
    "alias.detach": case(lambda m, x: x.detach()),
    "alias.to_float": case(lambda m, x: x.to(torch.float32)),
    "alias.float": case(lambda m, x: x.float()),
    "alias.type_as": case(lambda m, x, y: x.type_as(y) + y, "two"),
    "alias.full_slice": case(lambda m, x: x[:, :]),
    "alias.view_as": case(lambda m, x, y: x.view_as(y) * y, "two"),
    "alias.view_as_other_shape": case(lambda m, x: x.view_as(x.flatten(2)), "linear", SEQ),
}

VIEWS: dict[str, Factory] = {
    "view.flatten": case(lambda m, x: torch.flatten(x, 1)),
    "view.x_flatten": case(lambda m, x: x.flatten(2)),
    "view.view": case(lambda m, x: x.view(1, -1)),
    "view.reshape": case(lambda m, x: x.reshape(1, 8, 64)),
    "view.unflatten": case(lambda m, x: x.flatten(2).unflatten(2, (8, 8))),
    "view.permute": case(lambda m, x: x.permute(0, 2, 3, 1)),
    "view.transpose": case(lambda m, x: x.transpose(1, 2), "linear", SEQ),
    "view.t": case(lambda m, x: x.t(), "linear", VEC),
    "view.movedim": case(lambda m, x: torch.movedim(x, 1, -1)),
    "view.squeeze": case(lambda m, x: x.mean((2, 3), keepdim=True).squeeze()),
    "view.unsqueeze": case(lambda m, x: x.unsqueeze(1), "linear", SEQ),
    "view.channel_shuffle": case(_channel_shuffle),
    "view.expand": case(lambda m, x, y: y * x.mean((2, 3), keepdim=True).expand_as(y), "two"),
    "view.repeat": case(lambda m, x: x.repeat(1, 2, 1, 1)),
    "view.flip": case(lambda m, x: torch.flip(x, [3])),
    "view.roll": case(lambda m, x: torch.roll(x, 1, 3)),
}

SLICES: dict[str, Factory] = {
    "slice.channels_head": case(lambda m, x: x[:, :4]),
    "slice.channels_middle": case(lambda m, x: x[:, 2:6]),
    "slice.channels_step2": case(lambda m, x: x[:, ::2]),
    "slice.width_tail": case(lambda m, x: x[..., 1:]),
    "slice.crop": case(lambda m, x: x[:, :, 1:-1, 1:-1]),
    "slice.spatial_step2": case(lambda m, x: x[:, :, ::2, ::2]),
    "slice.select_channel": case(lambda m, x: x[:, 0]),
    "slice.select_last": case(lambda m, x: x[:, -1], "linear", SEQ),
    "slice.narrow": case(lambda m, x: x.narrow(1, 2, 4)),
    "slice.index_list": case(lambda m, x: x[:, [0, 2, 5]]),
    "slice.index_select": case(lambda m, x: torch.index_select(x, 1, torch.tensor([1, 3]))),
    "slice.index_select_runs": case(lambda m, x: x.index_select(-1, torch.tensor([4, 5, 0, 1]))),
    "slice.index_negative": case(lambda m, x: x[..., [-1, 0, 3]]),
    "slice.after_cat": case(_ghost_slice, "two"),
}

JOINS: dict[str, Factory] = {
    "join.cat_channels": case(lambda m, x, y: torch.cat([x, y], 1), "two"),
    "join.cat_width": case(lambda m, x, y: torch.cat((x, y), dim=-1), "two"),
    "join.stack": case(lambda m, x, y: torch.stack([x, y], 1), "two"),
    "join.chunk": case(lambda m, x: x.chunk(2, 1)[0] * x.chunk(2, 1)[1]),
    "join.split": case(lambda m, x: torch.split(x, 4, 1)[1]),
    "join.split_sizes": case(lambda m, x: sum(x.split([2, 6], 1)[1].split([3, 3], 1))),
    "join.unbind": case(lambda m, x: x.unbind(1)[2], "linear", SEQ),
}

ELEMENTWISE: dict[str, Factory] = {
    "math.add": case(lambda m, x, y: x + y, "two"),
    "math.sub": case(lambda m, x, y: x - y, "two"),
    "math.mul": case(lambda m, x, y: x * y, "two"),
    "math.square": case(lambda m, x: x * x),
    "math.pow2": case(lambda m, x: x.pow(2)),
    "math.add_const": case(lambda m, x: x + 1.5),
    "math.sub_const": case(lambda m, x: x - 0.5),
    "math.rsub_const": case(lambda m, x: 1 - x),
    "math.mul_const": case(lambda m, x: x * 0.25),
    "math.div_const": case(lambda m, x: x / 6.0),
    "math.neg": case(lambda m, x: -x),
    "math.abs": case(lambda m, x: x.abs()),
    "math.add_broadcast_channel": case(lambda m, x, y: x + y.mean((2, 3), keepdim=True), "two"),
    "math.mul_broadcast_se": case(
        lambda m, x, y: x * torch.sigmoid(y.mean((2, 3), keepdim=True)), "two"
    ),
    "math.maximum": case(lambda m, x, y: torch.maximum(x, y), "two"),
    "math.minimum": case(lambda m, x, y: torch.minimum(x, y), "two"),
    "math.clamp": case(lambda m, x: x.clamp(-1.0, 1.0)),
    "math.clamp_min": case(lambda m, x: x.clamp(min=0.0)),
    "math.exp": case(lambda m, x: x.exp(), "linear", VEC),
    "math.sqrt_abs": case(lambda m, x: x.abs().sqrt()),
    "math.rsqrt": case(lambda m, x: torch.rsqrt(x.abs() + 1)),
    # a constant through a view before its operator: ConvNeXt's layer scale, a bias unsqueezed
    "math.layer_scale_reshaped": case(
        lambda m, x: x * m.gamma.weight.reshape(1, -1, 1, 1), layers=lambda: {"gamma": _Scale(8)}
    ),
    "math.bias_unsqueezed": case(
        lambda m, x: x + m.gamma.weight[:, None, None], layers=lambda: {"gamma": _Scale(8)}
    ),
    "math.scale_sliced_transposed": case(
        lambda m, x: x @ m.gamma.weight.view(4, 4)[:, :3].t().repeat(1, 4).t(),
        "linear",
        SEQ,
        lambda: {"gamma": _Scale(16)},
    ),
}

REDUCTIONS: dict[str, Factory] = {
    "reduce.mean_last": case(lambda m, x: x.mean(-1), "linear", SEQ),
    "reduce.mean_keepdim": case(lambda m, x: x.mean(-1, keepdim=True), "linear", SEQ),
    "reduce.mean_channels": case(lambda m, x: x.mean(1)),
    "reduce.mean_all": case(lambda m, x: x.mean()),
    "reduce.sum_last": case(lambda m, x: x.sum(-1), "linear", SEQ),
    "reduce.sum_spatial": case(lambda m, x: x.sum((2, 3))),
    "reduce.amax_channels": case(lambda m, x: x.amax(1, keepdim=True)),
    "reduce.amax_last": case(lambda m, x: torch.amax(x, -1), "linear", SEQ),
    "reduce.max_values": case(lambda m, x: x.max(dim=1, keepdim=True)[0]),
    "reduce.max_dim_values": case(lambda m, x: torch.max(x, 1).values),
    "reduce.min_values": case(lambda m, x: x.min(-1).values, "linear", SEQ),
}

PRODUCTS: dict[str, Factory] = {
    "prod.softmax_last": case(lambda m, x: torch.softmax(x, -1), "linear", SEQ),
    "prod.softmax_channels": case(lambda m, x: x.softmax(1)),
    "prod.log_softmax": case(lambda m, x: F.log_softmax(x, -1), "linear", VEC),
    "prod.matmul_self": case(lambda m, x: x @ x.transpose(-2, -1), "linear", SEQ),
    "prod.matmul_two": case(
        lambda m, x, y: torch.matmul(x, y.transpose(1, 2)), "linear", (SEQUENCE, SEQUENCE)
    ),
    "prod.bmm": case(lambda m, x: torch.bmm(x, x.transpose(1, 2)), "linear", SEQ),
    "prod.einsum": case(lambda m, x: torch.einsum("bld,bmd->blm", x, x), "linear", SEQ),
}

TENSOR_OPS: dict[str, Factory] = {
    **INPLACE,
    **ALIASES,
    **VIEWS,
    **SLICES,
    **JOINS,
    **ELEMENTWISE,
    **REDUCTIONS,
    **PRODUCTS,
}
