"""aten.layer_norm and aten.group_norm → cortex_m_nn::layer_norm (our integer kernel).

Layer norm normalizes the last dims of the value stored in logical order (a channels-last
value is transposed first unless its bytes are already in that order). Group norm runs on
channels-last storage (``[N, H·W, C]`` bytes, each group a strided set of channels), so a
feature map from a convolution needs no transpose. Gamma and beta (float parameters, not
quantized) fold into per-channel multipliers, shifts and biases, eps into the integer domain
of the input (see ``ops/layer_norm.py``).
"""

from __future__ import annotations

import math

import torch
from torch.fx import Node

from cortex_m_nn.core.families import aten
from cortex_m_nn.core.graph import argument
from cortex_m_nn.core.refusals import LoweringRefused, Refusal
from cortex_m_nn.lower.activation import activation_range
from cortex_m_nn.lower.context import LoweringContext
from cortex_m_nn.lower.graph_values import QValue
from cortex_m_nn.lower.layout import census, noting_transposes, relayout
from cortex_m_nn.lower.registry import Lowered, Pattern, rule
from cortex_m_nn.ops.layer_norm import MAX_GROUP, channel_parameters, epsilon_parameter

#: The report's function: no CMSIS-NN function, our kernel.
KERNEL = "(integer layer norm)"


def _affine(context: LoweringContext, node: object, size: int, fill: float) -> torch.Tensor:
    """A float weight/bias as float64 ``[size]`` (``fill`` where the layer has none)."""
    if node is None:
        return torch.full((size,), fill, dtype=torch.float64)
    if not isinstance(node, Node):
        raise LoweringRefused(Refusal.NOT_A_CONSTANT, "normalization weight is not a tensor")
    value = context.attribute(node).detach().to(torch.float64).flatten()
    if value.numel() != size or not torch.isfinite(value).all():
        raise LoweringRefused(Refusal.NOT_A_CONSTANT, f"weight of {value.numel()} ≠ {size}")
    return value


def _emit(
    context: LoweringContext, pattern: Pattern, x: QValue, spatial: int, groups: int, channels: int
) -> QValue:
    """The ``cortex_m_nn::layer_norm`` call on ``x`` (stored ``[*, spatial, channels]``)."""
    op = pattern.op
    n = spatial * channels // groups
    if n > MAX_GROUP:
        raise LoweringRefused(
            Refusal.NORM_GROUP_SIZE, f"normalizes groups of {n} elements, at most {MAX_GROUP}"
        )
    gamma = _affine(context, argument(op, 2, "weight", None), channels, 1.0)
    beta = _affine(context, argument(op, 3, "bias", None), channels, 0.0)
    eps = float(argument(op, 4, "eps", 1e-5))
    try:
        m, t, b = channel_parameters(gamma, beta, pattern.scale, pattern.zero_point)
    except ValueError as error:
        raise LoweringRefused(Refusal.NORM_SCALE, str(error)) from error
    low, high = activation_range(pattern.activation, pattern.scale, pattern.zero_point)
    out = context.call(
        "layer_norm",
        x.node,
        *context.constants(op.name, multipliers=m, shifts=t, biases=b),
        spatial,
        groups,
        epsilon_parameter(eps, x.scale, n),
        low,
        high,
    )
    return QValue(out, pattern.scale, pattern.zero_point, x.shape, nhwc=x.nhwc)


@rule(aten.layer_norm.default)
def lower_layer_norm(context: LoweringContext, pattern: Pattern) -> Lowered:
    x = context.input_value(pattern.op.args[0])
    normalized = [int(d) for d in pattern.op.args[1]]
    if not normalized or list(x.shape[-len(normalized) :]) != normalized:
        raise LoweringRefused(
            Refusal.NORM_SHAPE, f"normalized shape {normalized} is not the last dims of {x.shape}"
        )
    before = census(context)
    if not x.layout_free:
        x = relayout(context, x, nhwc=False)
    value = _emit(context, pattern, x, 1, 1, math.prod(normalized))
    return Lowered(value, "layer_norm", noting_transposes(context, before, KERNEL))


@rule(aten.group_norm.default)
def lower_group_norm(context: LoweringContext, pattern: Pattern) -> Lowered:
    x = context.input_value(pattern.op.args[0])
    if not 2 <= len(x.shape) <= 4:
        raise LoweringRefused(
            Refusal.NORM_INPUT_RANK, f"group norm of a {len(x.shape)}-D input (2-D to 4-D)"
        )
    before = census(context)
    if len(x.shape) > 2:
        x = relayout(context, x, nhwc=True)
    groups = int(pattern.op.args[1])
    value = _emit(context, pattern, x, math.prod(x.shape[2:]), groups, x.shape[1])
    return Lowered(value, "layer_norm", noting_transposes(context, before, KERNEL))
