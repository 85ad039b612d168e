"""aten.matmul / bmm / mm → cortex_m_nn::batch_matmul (arm_batch_matmul_s8; int16 activations:
arm_batch_matmul_s16, both operands int16, a constant one too).

CMSIS-NN takes the right operand transposed (``[..., N, K]``). ``a @ b.transpose(-2, -1)``
(attention's ``q @ k^T``) therefore lowers onto ``b`` itself: the rule reads through the
transpose, which is then not lowered at all. A constant right operand is transposed at
compile time (``x @ w``), or used as it is when the model transposes it (``x @ w.t()``). Any
other right operand (attention's ``probabilities @ v``) is transposed by one
``cortex_m_nn::transpose`` in front of the product (none when its bytes need not move).
Operands stored channels-last are brought to logical order first. A positive scale after the
product (attention's ``· 1/√d``) is applied by its requantization, not by a multiply.
"""

from __future__ import annotations

import math

import torch
from torch.fx import Node

from cortex_m_nn.core.cmsis_nn import Case, cmsis_function
from cortex_m_nn.core.families import DEQUANTIZE, MATMULS, QUANTIZE
from cortex_m_nn.core.graph import swaps_last_two_dims
from cortex_m_nn.core.refusals import LoweringRefused, Refusal
from cortex_m_nn.lower import scratch
from cortex_m_nn.lower.activation import activation_range, fused_scale
from cortex_m_nn.lower.context import LoweringContext
from cortex_m_nn.lower.graph_values import QValue, qparams_of
from cortex_m_nn.lower.layout import (
    census,
    noting_transposes,
    only_reader,
    permute,
    relayout,
)
from cortex_m_nn.lower.registry import Lowered, Pattern, reads_through, rule
from cortex_m_nn.ops.arithmetic import quantize_multiplier
from cortex_m_nn.ops.batch_matmul import MAX_RANK, output_shape


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


def _read_only_by(dequantize: Node, reader: Node) -> bool:
    """Whether ``reader`` is the one op reading the value ``dequantize`` dequantizes."""
    return [user for d in dequantize.args[0].users for user in d.users] == [reader]


def _check_rank(value: QValue, side: str) -> None:
    if not 2 <= len(value.shape) <= MAX_RANK:
        raise LoweringRefused(
            Refusal.OPERAND_RANK,
            f"{side} operand of rank {len(value.shape)}; CMSIS-NN takes 2-D to 4-D",
        )


def _logical(context: LoweringContext, value: QValue, side: str, fold: bool) -> Node:
    """The operand in logical (PyTorch) element order: transposed if stored channels-last, or
    with ``fold`` (the product is its only reader) quantized so at the graph input."""
    _check_rank(value, side)
    if not value.nhwc:
        return value.node
    if not value.layout_free:
        return relayout(context, value, nhwc=False, fold=fold).node
    return context.view(value.node, value.shape)


def _transposed(
    context: LoweringContext, value: QValue, fold: bool
) -> tuple[Node, tuple[int, ...]]:
    """An activation right operand ``[..., K, N]`` as CMSIS-NN's ``[..., N, K]``."""
    _check_rank(value, "right")
    rank = len(value.shape)
    swap = [*range(rank - 2), rank - 1, rank - 2]
    moved = permute(context, value, swap, nhwc=False, fold=fold)
    return moved.node, moved.shape


def is_constant(node: object) -> bool:
    """``dequantize(get_attr)``: a quantized constant."""
    return (
        isinstance(node, Node)
        and node.target in DEQUANTIZE
        and isinstance(node.args[0], Node)
        and node.args[0].op == "get_attr"
    )


def _constant_rhs(
    context: LoweringContext, rhs: Node, transpose: bool, dtype: torch.dtype
) -> tuple[Node, tuple[int, ...], float, int]:
    """A quantized constant right operand as [..., N, K]: (node, shape, scale, zero point)."""
    scale, zero_point = qparams_of(rhs)
    tensor = context.attribute(rhs.args[0])
    if not 2 <= tensor.dim() <= MAX_RANK:
        raise LoweringRefused(
            Refusal.OPERAND_RANK, f"constant right operand of rank {tensor.dim()}"
        )
    if transpose:
        tensor = tensor.transpose(-2, -1)
    node = context.constant(tensor.contiguous().to(dtype), f"{rhs.name}_rows")
    return node, tuple(tensor.shape), scale, zero_point


def _shape_refusal(lhs_shape: tuple[int, ...], rhs_shape: tuple[int, ...]) -> Refusal:
    """Which of ``output_shape``'s checks the operand shapes fail."""
    if not all(2 <= len(shape) <= MAX_RANK for shape in (lhs_shape, rhs_shape)):
        return Refusal.OPERAND_RANK
    if lhs_shape[-1] != rhs_shape[-1]:
        return Refusal.MATMUL_INNER_DIMENSION
    return Refusal.MATMUL_BATCH_BROADCAST


def _right_operand(
    context: LoweringContext, pattern: Pattern, int16: bool
) -> tuple[Node, tuple[int, ...], float, int, int]:
    """The right operand as CMSIS-NN's ``[..., N, K]``: (node, shape, scale, zero point, its
    constant bytes): a constant transposed at compile time, an activation read through the
    model's transpose, or transposed by a kernel."""
    node = pattern.op
    rhs_source = node.args[1]
    inner = transposed_source(rhs_source)
    if is_constant(rhs_source) or is_constant(inner):
        constant = inner if inner is not None else rhs_source
        rhs_node, rhs_shape, scale, zero_point = _constant_rhs(
            context, constant, transpose=inner is None, dtype=pattern.dtype
        )
        return rhs_node, rhs_shape, scale, zero_point, math.prod(rhs_shape) * pattern.dtype.itemsize
    if inner is not None:
        rhs = context.input_value(inner, int16=int16)
        transpose = rhs_source.args[0].args[0]  # read through: dequantize(quantize(k^T))
        fold = _read_only_by(inner, transpose) and _read_only_by(rhs_source, node)
        return _logical(context, rhs, "right", fold), rhs.shape, rhs.scale, rhs.zero_point, 0
    rhs = context.input_value(rhs_source, int16=int16)
    rhs_node, rhs_shape = _transposed(context, rhs, only_reader(pattern, rhs_source))
    return rhs_node, rhs_shape, rhs.scale, rhs.zero_point, 0


@rule(*MATMULS)
def lower_batch_matmul(context: LoweringContext, pattern: Pattern) -> Lowered:
    lhs_source = pattern.op.args[0]
    before = census(context)
    int16 = pattern.dtype is torch.int16
    lhs = context.input_value(lhs_source, int16=int16)
    lhs_node = _logical(context, lhs, "left", only_reader(pattern, lhs_source))
    rhs_node, rhs_shape, rhs_scale, rhs_zero_point, weight_bytes = _right_operand(
        context, pattern, int16
    )
    try:
        shape = output_shape(lhs.shape, rhs_shape)
    except ValueError as error:
        raise LoweringRefused(_shape_refusal(lhs.shape, rhs_shape), str(error)) from error
    if shape != pattern.shape:
        raise LoweringRefused(
            Refusal.MATMUL_RESULT_SHAPE, f"result {list(shape)} differs from {list(pattern.shape)}"
        )

    scale = fused_scale(pattern.activation)  # attention's 1/√d, taken in
    multiplier, shift = quantize_multiplier(lhs.scale * rhs_scale * scale / pattern.scale)
    if int16 and shift > 14:
        raise LoweringRefused(
            Refusal.INT16_REQUANTIZATION, f"int16 batch matmul's shift {shift} exceeds 14"
        )
    act_min, act_max = activation_range(
        pattern.activation, pattern.scale, pattern.zero_point, pattern.dtype
    )
    scratch_bytes = 0 if int16 else scratch.batch_matmul_scratch_bytes(context.target, rhs_shape)
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
        scratch_bytes,
    )
    value = QValue(out, pattern.scale, pattern.zero_point, pattern.shape, dtype=pattern.dtype)
    macs = math.prod(shape) * lhs.shape[-1]
    cmsis = cmsis_function("batch_matmul", Case.S16 if int16 else Case.S8)
    function = noting_transposes(context, before, cmsis, pattern.dtype)
    return Lowered(value, "batch_matmul", function, macs, weight_bytes)
