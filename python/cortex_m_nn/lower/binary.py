"""The two operands of an element-wise binary op, aligned for a ``cortex_m_nn`` kernel.

An operand is a quantized activation, a quantized constant (``dequantize(get_attr)``, e.g. a
learned per-channel scale) or a Python number (``x * 0.5``), which becomes an exact one-byte
constant: value ±1 with scale ``|c|`` (value 0 for zero). Both operands are brought into the
output's stored layout — channels-last for 4-D outputs — and then viewed at the collapsed
shapes of :func:`cortex_m_nn.ops.broadcast.collapse`, so the kernel sees at most four
dimensions and CMSIS-NN's min/max broadcast correctly. Views cost nothing at run time.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch
from torch.fx import Node

from cortex_m_nn.core.families import DEQUANTIZE
from cortex_m_nn.core.refusals import LoweringRefused, Refusal
from cortex_m_nn.lower.activation import activation_range
from cortex_m_nn.lower.context import LoweringContext
from cortex_m_nn.lower.graph_values import (
    CHANNELS_LAST_RANKS,
    QValue,
    channels_last_order,
    dtype_of,
    qparams_of,
)
from cortex_m_nn.lower.layout import noting_transposes, relayout
from cortex_m_nn.lower.registry import Lowered, Pattern
from cortex_m_nn.ops.broadcast import MAX_RANK, collapse
from cortex_m_nn.ops.library import operator as cortex_op


@dataclass
class Operands:
    """Both inputs viewed at their collapsed shapes, and how to view the result back."""

    first: QValue
    second: QValue
    input1: Node
    input2: Node
    collapsed_output: list[int]
    stored_output: tuple[int, ...]
    nhwc: bool
    constant_bytes: int

    def result(self, context: LoweringContext, node: Node, pattern: Pattern) -> QValue:
        """The op's output (computed at the collapsed shape) as a value of the lowered graph."""
        if tuple(self.collapsed_output) != self.stored_output:
            node = context.view(node, self.stored_output)
        shape, nhwc = pattern.shape, self.nhwc
        return QValue(node, pattern.scale, pattern.zero_point, shape, nhwc, pattern.dtype)


@dataclass(frozen=True)
class _Constant:
    """A quantized constant operand before it is laid out: int8 (or int16) values in logical
    order."""

    values: torch.Tensor
    scale: float
    zero_point: int

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.values.shape)


def quantized_constant(context: LoweringContext, node: Node) -> _Constant | None:
    """A per-tensor quantized constant operand, or None when ``node`` is not one."""
    if node.target not in DEQUANTIZE:
        return None
    source = node.args[0]
    if not isinstance(source, Node) or source.op != "get_attr":
        return None
    scale, zero_point = qparams_of(node)
    return _Constant(context.attribute(source).to(dtype_of(node)), scale, zero_point)


def _scalar(value: float) -> _Constant:
    """A Python number as a one-element int8 constant that represents it exactly."""
    if not math.isfinite(value):
        raise LoweringRefused(Refusal.OPERAND_NOT_FINITE, f"operand {value!r} is not finite")
    sign = (value > 0) - (value < 0)
    # Zero's scale is free; a small one keeps an add's rescaling at the other input's scale.
    return _Constant(torch.tensor(sign, dtype=torch.int8), abs(value) or 2.0**-20, 0)


def _operand(context: LoweringContext, argument: object) -> QValue | _Constant:
    """One input: an activation, a quantized constant or a number."""
    if isinstance(argument, bool) or not isinstance(argument, int | float | Node):
        raise LoweringRefused(
            Refusal.OPERAND_TYPE, f"operand {argument!r} is not a number or a tensor"
        )
    if not isinstance(argument, Node):
        return _scalar(float(argument))
    constant = quantized_constant(context, argument)
    return constant if constant is not None else context.input_value(argument, int16=True)


def _padded(shape: tuple[int, ...], rank: int) -> list[int]:
    return [1] * (rank - len(shape)) + list(shape)


def _stored_shape(value: QValue | _Constant, rank: int, nhwc: bool) -> list[int]:
    """The operand's stored shape in the output's layout."""
    logical = _padded(value.shape, rank)
    if not nhwc:
        if isinstance(value, QValue) and not value.layout_free:
            raise LoweringRefused(
                Refusal.BROADCAST_LAYOUT,
                f"a channels-last {list(value.shape)} activation broadcast to {rank} dimensions",
            )
        return logical
    if isinstance(value, QValue) and value.nhwc and len(value.shape) != rank:
        raise LoweringRefused(
            Refusal.BROADCAST_LAYOUT,
            f"a channels-last {list(value.shape)} activation broadcast to {rank} dimensions",
        )
    if isinstance(value, QValue) and not value.nhwc:
        # An activation's bytes are in logical order: channels-last only if layout-free.
        if logical[1] != 1 and math.prod(logical[2:]) != 1:
            raise LoweringRefused(
                Refusal.BROADCAST_LAYOUT,
                f"a channels-first operand of shape {list(value.shape)} against channels-last "
                f"activations; make it [C, 1, 1]- or [1, H, W]-shaped, or {rank}-D",
            )
    return [logical[d] for d in channels_last_order(rank)]


def _materialise(
    context: LoweringContext,
    value: QValue | _Constant,
    rank: int,
    nhwc: bool,
    shape: list[int],
    dtype: torch.dtype,
) -> tuple[QValue, Node]:
    """(the operand as a value of ``dtype``, its node viewed at the collapsed ``shape``)."""
    if isinstance(value, _Constant):
        tensor = value.values.reshape(_padded(value.shape, rank)).to(dtype)
        if nhwc:
            tensor = tensor.permute(*channels_last_order(rank))
        node = context.constant(tensor.reshape(shape), "operand")
        return QValue(node, value.scale, value.zero_point, tuple(shape), dtype=dtype), node
    node = value.node
    if list(value.stored_shape) != shape:
        node = context.view(node, tuple(shape))
    return value, node


def _fixed(value: QValue | _Constant, rank: int) -> bool:
    """Whether ``value`` is a full-rank activation whose bytes depend on its layout (of rank 2
    or more: a vector has one)."""
    if not isinstance(value, QValue) or len(value.shape) != rank or rank < 2:
        return False
    return value.shape[1] != 1 and math.prod(value.shape[2:]) != 1


def output_layout(values: list[QValue | _Constant], rank: int) -> bool:
    """Whether the result is stored channels-last: like the full-rank activation operands whose
    bytes depend on the layout (channels-last when they disagree), else 4-D channels-last."""
    if rank not in CHANNELS_LAST_RANKS:
        return False
    fixed = [v for v in values if _fixed(v, rank)]
    return any(v.nhwc for v in fixed) if fixed else rank == 4


def operands(context: LoweringContext, pattern: Pattern) -> Operands:
    """Resolve, align and collapse the first two arguments of ``pattern.op``."""
    values = [_operand(context, arg) for arg in pattern.op.args[:2]]
    if all(isinstance(v, _Constant) for v in values):
        raise LoweringRefused(Refusal.CONSTANT_OPERANDS, "both operands are constants")
    if any(isinstance(v, QValue) and v.dtype is not pattern.dtype for v in values):
        raise LoweringRefused(Refusal.NOT_INT8, "operands and output of different dtypes")
    if pattern.dtype is torch.int16 and any(v.zero_point for v in values):
        raise LoweringRefused(Refusal.NOT_INT8, "an int16 operand with a zero point")
    rank = len(pattern.shape)
    nhwc = output_layout(values, rank)
    values = [
        relayout(context, v, nhwc) if _fixed(v, rank) and v.nhwc != nhwc else v for v in values
    ]
    stored1, stored2 = (_stored_shape(v, rank, nhwc) for v in values)
    shape1, shape2, shape_out = collapse(stored1, stored2)
    if len(shape_out) > MAX_RANK:
        raise LoweringRefused(
            Refusal.BROADCAST_RANK,
            f"broadcasting {list(values[0].shape)} against {list(values[1].shape)} needs "
            f"{len(shape_out)} dimensions; CMSIS-NN takes at most {MAX_RANK}",
        )
    (first, input1), (second, input2) = (
        _materialise(context, v, rank, nhwc, s, pattern.dtype)
        for v, s in zip(values, (shape1, shape2), strict=True)
    )
    order = channels_last_order(rank) if nhwc else range(rank)
    stored_output = tuple(pattern.shape[d] for d in order)
    size = pattern.dtype.itemsize
    constant_bytes = sum(size * v.values.numel() for v in values if isinstance(v, _Constant))
    return Operands(first, second, input1, input2, shape_out, stored_output, nhwc, constant_bytes)


def same_quantization(first: QValue, second: QValue, pattern: Pattern) -> bool:
    """Whether both inputs and the output share one scale and zero point."""
    qparams = (first.scale, first.zero_point)
    return qparams == (second.scale, second.zero_point) == (pattern.scale, pattern.zero_point)


def parameters_of(
    function: Callable[..., dict[str, int]], inputs: Operands, pattern: Pattern, **extra: object
) -> dict[str, int]:
    """``function`` (``add_parameters``, ``mul_parameters`` …) of both inputs' and the
    output's quantization (and ``extra`` keywords): the kernel's integer arguments by name."""
    a, b = inputs.first, inputs.second
    return function(
        a.scale,
        b.scale,
        pattern.scale,
        input1_zero_point=a.zero_point,
        input2_zero_point=b.zero_point,
        output_zero_point=pattern.zero_point,
        **extra,
    )


def lower_binary(
    context: LoweringContext,
    pattern: Pattern,
    inputs: Operands,
    census_before: tuple[int, int],
    kernel: str,
    function: str,
    parameters: Mapping[str, int] | None = None,
) -> Lowered:
    """``cortex_m_nn::<kernel>`` of both operands and, for a kernel with an output clamp, its
    integer ``parameters`` (in the operator schema's order) and the fused activation's range;
    its report row's numbers."""
    arguments: list[object] = [inputs.input1, inputs.input2]
    if parameters is not None:
        names = [argument.name for argument in cortex_op(kernel)._schema.arguments[2:-2]]
        arguments += [parameters[name] for name in names]
        arguments += activation_range(
            pattern.activation, pattern.scale, pattern.zero_point, pattern.dtype
        )
    out = context.call(kernel, *arguments)
    value = inputs.result(context, out, pattern)
    function = noting_transposes(context, census_before, function)
    return Lowered(value, kernel, function, weight_bytes=inputs.constant_bytes)
