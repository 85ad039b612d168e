"""Element-wise functions without a CMSIS-NN s8 kernel → cortex_m_nn::lut (a 256-entry table).

sigmoid, tanh, hardswish, hardsigmoid, gelu (both approximations), silu, mish, softplus,
leaky_relu, elu, celu, selu, log_sigmoid, softshrink, abs, neg, square, pow by a constant,
sqrt, rsqrt, exp, log, reciprocal, erf, a division by a number (``x / 4.0``) and ``1 - x``;
relu/relu6/hardtanh/clamp where they cannot become a producer's activation range (at a model
input, after a pool or view, after an op whose output has other users); ``x * x`` (a mul of a
tensor with itself: one lookup instead of a multiply and a requantization, and the PT2E
reference's own values); PReLU, one table for one slope or one per channel (channels
innermost). An activation fused after the function by the quantizer is folded into the same
table. The table takes the int8 values of the producing operator as they are: no
requantization in between, whatever the producer. A function undefined on part of the input's
int8 range (``sqrt`` of a negative value) is refused.
"""

from __future__ import annotations

import torch
from torch.fx import Node

from cortex_m_nn.core.families import ACTIVATIONS, LOOKUP, PRELU, aten
from cortex_m_nn.core.graph import constant_arguments
from cortex_m_nn.core.refusals import LoweringRefused, Refusal
from cortex_m_nn.lower.context import LoweringContext
from cortex_m_nn.lower.graph_values import QValue
from cortex_m_nn.lower.layout import relayout
from cortex_m_nn.lower.registry import Lowered, Pattern, rule
from cortex_m_nn.ops.lut import (
    INDEX_OFFSET,
    INT16_MAX_ERROR,
    TABLE_SIZE,
    FloatFunction,
    int16_table,
    lookup_table,
    lut,
)

#: What the report shows in place of a CMSIS-NN function.
TABLE_LOOKUP = "(256-entry table lookup)"
INTERPOLATED_LOOKUP = "(interpolated table, {} knots)"


def float_function(node: Node) -> FloatFunction:
    """``node``'s ATen call with its own constant arguments, applied to a new first input."""
    if not constant_arguments(node):
        raise LoweringRefused(
            Refusal.TENSOR_ARGUMENTS,
            f"{node.target} with tensor arguments (bounds must be constants)",
        )
    args, kwargs = tuple(node.args[1:]), dict(node.kwargs)
    return lambda x: node.target(x, *args, **kwargs)


def lower_table(
    context: LoweringContext,
    pattern: Pattern,
    x: QValue,
    functions: list[FloatFunction],
    channels: int = 0,
) -> Lowered:
    """``x`` through the table of ``functions`` (``channels`` > 0: one table per channel of the
    innermost stored dim), or a view when the table is the identity."""
    if pattern.activation is not None:
        functions = [*functions, float_function(pattern.activation)]
    if x.dtype is torch.int16:
        if channels:
            raise LoweringRefused(Refusal.NOT_INT8, "per-channel tables are int8 only")
        return _lower_int16_table(context, pattern, x, functions)
    try:
        table = lookup_table(
            functions, x.scale, x.zero_point, pattern.scale, pattern.zero_point, channels
        )
    except ValueError as error:
        raise LoweringRefused(Refusal.UNDEFINED_VALUES, f"{pattern.op.target}: {error}") from error
    identity = torch.arange(-INDEX_OFFSET, TABLE_SIZE - INDEX_OFFSET, dtype=torch.int8)
    if torch.equal(table.reshape(-1, TABLE_SIZE), identity.expand(table.numel() // TABLE_SIZE, -1)):
        return Lowered(
            QValue(x.node, pattern.scale, pattern.zero_point, x.shape, x.nhwc), "view", "(identity)"
        )
    out = context.call("lut", x.node, context.constant(table, f"{pattern.op.name}_table"))
    value = QValue(out, pattern.scale, pattern.zero_point, x.shape, nhwc=x.nhwc)
    return Lowered(value, "lut", TABLE_LOOKUP, weight_bytes=table.numel())


def _lower_int16_table(
    context: LoweringContext, pattern: Pattern, x: QValue, functions: list[FloatFunction]
) -> Lowered:
    """The int16 case: an interpolated table (``ops.lut.int16_table``), its error measured over
    all 65,536 inputs and allowed to ``verify``; refused when larger than an int8 table's."""
    try:
        table, error = int16_table(functions, x.scale, pattern.scale)
    except ValueError as error:
        raise LoweringRefused(Refusal.UNDEFINED_VALUES, f"{pattern.op.target}: {error}") from error
    if error > INT16_MAX_ERROR:
        raise LoweringRefused(
            Refusal.INT16_TABLE_ERROR,
            f"{pattern.op.target}'s int16 table errs by up to {error} LSB (an int8 table's "
            f"rounding is {INT16_MAX_ERROR}): keep this layer int8 (--precision auto chooses)",
        )
    value = QValue(x.node, pattern.scale, pattern.zero_point, x.shape, x.nhwc, dtype=x.dtype)
    every = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16)
    if error == 0 and torch.equal(lut(every, table), every):  # each input maps to itself
        return Lowered(value, "view", "(identity)")
    out = context.call("lut", x.node, context.constant(table, f"{pattern.op.name}_table"))
    value = QValue(out, pattern.scale, pattern.zero_point, x.shape, nhwc=x.nhwc, dtype=x.dtype)
    function = INTERPOLATED_LOOKUP.format(f"{table.numel():,}")
    return Lowered(
        value, "lut", function, weight_bytes=2 * table.numel(), allowed_lsb=max(1, error)
    )


def _elementwise_input(context: LoweringContext, pattern: Pattern) -> QValue:
    x = context.input_value(pattern.op.args[0], int16=pattern.dtype is torch.int16)
    if pattern.shape != x.shape:
        raise LoweringRefused(
            Refusal.ELEMENTWISE_SHAPE, f"element-wise op {list(x.shape)} → {list(pattern.shape)}"
        )
    return x


@rule(*sorted(LOOKUP | ACTIVATIONS, key=str))
def lower_lut(context: LoweringContext, pattern: Pattern) -> Lowered:
    x = _elementwise_input(context, pattern)
    return lower_table(context, pattern, x, [float_function(pattern.op)])


def square_of(context: LoweringContext, pattern: Pattern) -> Lowered | None:
    """``x * x`` (both operands the same int8 activation) as a table, else None."""
    first, second = pattern.op.args[:2]
    if not isinstance(first, Node) or not isinstance(second, Node):
        return None
    if first is not second and (first.args[:1] != second.args[:1] or first.op != "call_function"):
        return None  # not one tensor twice (e.g. an activation times a constant)
    try:
        a, b = context.input_value(first), context.input_value(second)
    except LoweringRefused:
        return None
    if a != b or pattern.shape != a.shape:
        return None
    return lower_table(context, pattern, a, [lambda v: aten.mul.Tensor(v, v)])


@rule(*sorted(PRELU, key=str))
def lower_prelu(context: LoweringContext, pattern: Pattern) -> Lowered:
    """One table for one slope; one per channel (channels innermost) for a slope per channel."""
    x = _elementwise_input(context, pattern)
    slopes = context.attribute(pattern.op.args[1]).detach().to(torch.float32)
    channels = slopes.numel()
    function: FloatFunction = lambda v: aten.prelu.default(v, slopes)  # noqa: E731
    if channels == 1:
        return lower_table(context, pattern, x, [function])
    if len(x.shape) in (3, 4):
        x = relayout(context, x, nhwc=True)
    elif len(x.shape) != 2:
        raise LoweringRefused(
            Refusal.ELEMENTWISE_SHAPE,
            f"a per-channel PReLU of a {len(x.shape)}-D tensor (2-D to 4-D are lowered)",
        )
    return lower_table(context, pattern, x, [function], channels)
