"""aten.softmax over the innermost stored dimension → cortex_m_nn::softmax (arm_softmax_s8;
int16: arm_softmax_s16 with its two tables made here); attention's softmax under a boolean or
causal mask (``cortex_m_nn_float::masked_softmax``, ``frontend/decompose.py``) →
cortex_m_nn::masked_softmax (arm_softmax_s8 on each row's kept entries)."""

from __future__ import annotations

import torch

from cortex_m_nn.core.cmsis_nn import Case, cmsis_function
from cortex_m_nn.core.families import aten
from cortex_m_nn.core.float_ops import MASKED_SOFTMAX
from cortex_m_nn.core.integers import SOFTMAX_OUTPUT_SCALE, SOFTMAX_OUTPUT_ZERO_POINT
from cortex_m_nn.core.refusals import LoweringRefused, Refusal
from cortex_m_nn.lower.context import LoweringContext
from cortex_m_nn.lower.graph_values import QValue
from cortex_m_nn.lower.layout import relayout
from cortex_m_nn.lower.registry import Lowered, Pattern, rule
from cortex_m_nn.ops.masked_softmax import scratch_bytes
from cortex_m_nn.ops.softmax import (
    S16_OUTPUT_SCALE,
    S16_TABLE,
    softmax_parameters,
    softmax_s16_parameters,
    softmax_s16_tables,
)

#: Longer rows can reach sums where arm_softmax_s8's final shift is undefined (see the op).
MAX_SOFTMAX_ROW = 511


@rule(aten.softmax.int, aten._softmax.default)
def lower_softmax(context: LoweringContext, pattern: Pattern) -> Lowered:
    x = context.input_value(pattern.op.args[0], int16=True)
    dim = int(pattern.op.args[1]) % len(x.shape)
    innermost = 1 if x.nhwc else len(x.shape) - 1  # channels are innermost in NHWC
    if dim != innermost:
        raise LoweringRefused(Refusal.SOFTMAX_DIM, f"softmax over dim {dim}, not the innermost one")
    if x.dtype is torch.int16:
        return _lower_s16(context, pattern, x, dim)
    if (pattern.scale, pattern.zero_point) != (SOFTMAX_OUTPUT_SCALE, SOFTMAX_OUTPUT_ZERO_POINT):
        raise LoweringRefused(
            Refusal.SOFTMAX_OUTPUT_QPARAMS,
            "softmax output is not quantized with scale 1/256, zero point -128",
        )
    if pattern.activation is not None:
        raise LoweringRefused(Refusal.ACTIVATION_AFTER, "activation after softmax")
    if x.shape[dim] > MAX_SOFTMAX_ROW:
        raise LoweringRefused(
            Refusal.SOFTMAX_ROW_LENGTH,
            f"softmax over {x.shape[dim]} entries; arm_softmax_s8's fixed point is exact up to "
            f"{MAX_SOFTMAX_ROW}",
        )
    multiplier, shift, diff_min = softmax_parameters(x.scale)
    out = context.call("softmax", x.node, None, None, multiplier, shift, diff_min)
    value = QValue(out, pattern.scale, pattern.zero_point, x.shape, nhwc=x.nhwc)
    return Lowered(value, "softmax", cmsis_function("softmax", Case.S8))


def _lower_s16(context: LoweringContext, pattern: Pattern, x: QValue, dim: int) -> Lowered:
    """The int16 case: output scale 1/32768, zero point 0; rows of two or more (a row of
    one wraps in CMSIS-NN)."""
    if pattern.dtype is not torch.int16 or (pattern.scale, pattern.zero_point) != (
        S16_OUTPUT_SCALE,
        0,
    ):
        raise LoweringRefused(
            Refusal.SOFTMAX_OUTPUT_QPARAMS,
            "int16 softmax output is not scale 1/32768, zero point 0",
        )
    if pattern.activation is not None:
        raise LoweringRefused(Refusal.ACTIVATION_AFTER, "activation after softmax")
    if x.shape[dim] < 2:
        raise LoweringRefused(
            Refusal.SOFTMAX_ROW_LENGTH, "an int16 softmax over one entry (CMSIS-NN wraps it)"
        )
    try:
        multiplier, shift = softmax_s16_parameters(x.scale)
    except ValueError as error:
        raise LoweringRefused(Refusal.SOFTMAX_OUTPUT_QPARAMS, str(error)) from error
    exp, reciprocal = softmax_s16_tables()
    tables = context.constants(pattern.op.name, exp_table=exp, reciprocal_table=reciprocal)
    out = context.call("softmax", x.node, *tables, multiplier, shift, 0)
    value = QValue(out, pattern.scale, 0, x.shape, nhwc=x.nhwc, dtype=torch.int16)
    # against the exact softmax: each entry's exp is within 2 LSB of exp (the table's
    # interpolation, and its floor of 2 at exp(-10)), so the sum within 2 LSB per entry,
    # each output within 4 per entry of the row, and 4 for the output's own rounding
    allowed = 4 * x.shape[dim] + 4
    weights = 2 * 2 * S16_TABLE
    call = cmsis_function("softmax", Case.S16)
    return Lowered(value, "softmax", call, weight_bytes=weights, allowed_lsb=allowed)


def _mask_rows(keep: torch.Tensor) -> torch.Tensor:
    """The boolean mask ``[..., N]`` as the fewest rows ``[R, N]`` it repeats (a causal mask
    of every head and batch item: its ``[L, S]``), int8 0/1."""
    rows = keep.reshape(-1, keep.shape[-1])
    for count in range(1, rows.shape[0] + 1):
        if rows.shape[0] % count == 0 and torch.equal(
            rows, rows[:count].repeat(rows.shape[0] // count, 1)
        ):
            return rows[:count].to(torch.int8).contiguous()
    raise AssertionError("unreachable: the whole mask repeats itself once")


@rule(MASKED_SOFTMAX)
def lower_masked_softmax(context: LoweringContext, pattern: Pattern) -> Lowered:
    x = context.input_value(pattern.op.args[0])
    if x.dtype is not torch.int8 or pattern.dtype is not torch.int8:
        raise LoweringRefused(Refusal.SOFTMAX_OUTPUT_QPARAMS, "a masked int16 softmax")
    if (pattern.scale, pattern.zero_point) != (SOFTMAX_OUTPUT_SCALE, SOFTMAX_OUTPUT_ZERO_POINT):
        raise LoweringRefused(
            Refusal.SOFTMAX_OUTPUT_QPARAMS,
            "softmax output is not quantized with scale 1/256, zero point -128",
        )
    if x.nhwc and not x.layout_free:  # the mask is in logical order
        x = relayout(context, x, nhwc=False)
    row = x.shape[-1]
    if row > MAX_SOFTMAX_ROW:
        raise LoweringRefused(
            Refusal.SOFTMAX_ROW_LENGTH, f"softmax over {row} entries (1..{MAX_SOFTMAX_ROW})"
        )
    keep = context.attribute(pattern.op.args[1]).to(torch.bool).expand(x.shape)
    (mask,) = context.constants(pattern.op.name, keep=_mask_rows(keep))
    multiplier, shift, diff_min = softmax_parameters(x.scale)
    out = context.call(
        "masked_softmax", x.node, mask, multiplier, shift, diff_min, scratch_bytes(row)
    )
    value = QValue(out, pattern.scale, pattern.zero_point, x.shape)
    return Lowered(value, "masked_softmax", cmsis_function("masked_softmax", Case.S8))
