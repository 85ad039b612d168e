"""aten.matmul / bmm / mm → cortex_m_nn::batch_matmul (arm_batch_matmul_s8).

CMSIS-NN takes the right operand transposed (``[..., N, K]``). ``a @ b.transpose(-2, -1)``
(attention's ``q @ k^T``) therefore lowers onto ``b`` itself: the rule reads through the
transpose, which is then not lowered at all. A constant right operand is transposed at
compile time (``x @ w``), or used as it is when the model transposes it (``x @ w.t()``). Any
other right operand needs a transpose kernel and is refused.
"""

from __future__ import annotations

import math

import torch
from torch.fx import Node

from cortex_m_nn import scratch
from cortex_m_nn.ops.arithmetic import quantize_multiplier
from cortex_m_nn.ops.batch_matmul import MAX_RANK, output_shape
from cortex_m_nn.passes.activation import activation_range
from cortex_m_nn.passes.graph_values import (
    DEQUANTIZE,
    QUANTIZE,
    LoweringRefused,
    QValue,
    qparams_of,
)
from cortex_m_nn.passes.lower import Lowered, LoweringContext, Pattern, reads_through, rule
from cortex_m_nn.quantizer.quantizer import MATMULS, swaps_last_two_dims

NEEDS_TRANSPOSE = "needs cortex_m_nn::transpose"


def transposed_source(rhs: object) -> Node | None:
    """For ``rhs = dequantize(quantize(t(d)))`` where ``t`` swaps the last two dimensions of the
    dequantized activation ``d`` and keeps its quantization: ``d``, else None."""
    if not isinstance(rhs, Node) or rhs.target not in DEQUANTIZE:
        return None
    quantize = rhs.args[0]
    if not isinstance(quantize, Node) or quantize.target not in QUANTIZE:
        return None
    transpose = quantize.args[0]
    if not isinstance(transpose, Node) or not swaps_last_two_dims(transpose):
        return None
    inner = transpose.args[0]
    if not isinstance(inner, Node) or inner.target not in DEQUANTIZE:
        return None
    try:
        same = qparams_of(quantize) == qparams_of(inner)
    except LoweringRefused:
        return None
    return inner if same else None


@reads_through(*MATMULS)
def _read_through(node: Node) -> list[Node]:
    rhs = node.args[1]
    return [rhs.args[0]] if transposed_source(rhs) is not None else []


def _logical(context: LoweringContext, value: QValue, side: str) -> Node:
    """The operand in logical (PyTorch) element order."""
    if not 2 <= len(value.shape) <= MAX_RANK:
        raise LoweringRefused(
            f"{side} operand of rank {len(value.shape)}; CMSIS-NN takes 2-D to 4-D"
        )
    if not value.nhwc:
        return value.node
    if not value.layout_free:
        raise LoweringRefused(
            f"{side} operand {list(value.shape)} is stored channels-last; {NEEDS_TRANSPOSE}"
        )
    return context.view(value.node, value.shape)


def is_constant(node: object) -> bool:
    """``dequantize(get_attr)``: a quantized constant."""
    return (
        isinstance(node, Node)
        and node.target in DEQUANTIZE
        and isinstance(node.args[0], Node)
        and node.args[0].op == "get_attr"
    )


def _constant_rhs(
    context: LoweringContext, rhs: Node, transpose: bool
) -> tuple[Node, tuple[int, ...], float, int]:
    """A quantized constant right operand as [..., N, K]: (node, shape, scale, zero point)."""
    scale, zero_point = qparams_of(rhs)
    tensor = context.attribute(rhs.args[0])
    if not 2 <= tensor.dim() <= MAX_RANK:
        raise LoweringRefused(f"constant right operand of rank {tensor.dim()}")
    if transpose:
        tensor = tensor.transpose(-2, -1)
    node = context.constant(tensor.contiguous().to(torch.int8), f"{rhs.name}_rows")
    return node, tuple(tensor.shape), scale, zero_point


@rule(*MATMULS)
def lower_batch_matmul(context: LoweringContext, pattern: Pattern) -> Lowered:
    node = pattern.op
    lhs_source, rhs_source = node.args[:2]
    lhs = context.input_value(lhs_source)
    lhs_node = _logical(context, lhs, "left")
    inner = transposed_source(rhs_source)
    if is_constant(rhs_source) or is_constant(inner):
        constant = inner if inner is not None else rhs_source
        rhs_node, rhs_shape, rhs_scale, rhs_zero_point = _constant_rhs(
            context, constant, transpose=inner is None
        )
        weight_bytes = math.prod(rhs_shape)
    elif inner is not None:
        rhs = context.input_value(inner)
        rhs_node, rhs_shape = _logical(context, rhs, "right"), rhs.shape
        rhs_scale, rhs_zero_point = rhs.scale, rhs.zero_point
        weight_bytes = 0
    else:
        raise LoweringRefused(
            "right operand must be given transposed: a @ b.transpose(-2, -1) lowers, "
            f"a @ b {NEEDS_TRANSPOSE}"
        )
    try:
        shape = output_shape(lhs.shape, rhs_shape)
    except ValueError as error:
        raise LoweringRefused(str(error)) from error
    if shape != pattern.shape:
        raise LoweringRefused(f"result {list(shape)} differs from {list(pattern.shape)}")

    multiplier, shift = quantize_multiplier(lhs.scale * rhs_scale / pattern.scale)
    act_min, act_max = activation_range(pattern.activation, pattern.scale, pattern.zero_point)
    out = context.call(
        "batch_matmul",
        lhs_node,
        rhs_node,
        -lhs.zero_point,
        -rhs_zero_point,
        pattern.zero_point,
        multiplier,
        shift,
        act_min,
        act_max,
        scratch.batch_matmul_scratch_bytes(context.target, rhs_shape),
    )
    value = QValue(out, pattern.scale, pattern.zero_point, pattern.shape)
    macs = math.prod(shape) * lhs.shape[-1]
    return Lowered(value, "batch_matmul", "arm_batch_matmul_s8", macs, weight_bytes)
