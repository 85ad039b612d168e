"""aten.softmax over the innermost stored dimension → cortex_m_nn::softmax (arm_softmax_s8)."""

from __future__ import annotations

from cortex_m_nn.ops.softmax import softmax_parameters
from cortex_m_nn.passes.context import LoweringContext
from cortex_m_nn.passes.graph_values import QValue
from cortex_m_nn.passes.refusals import LoweringRefused, Refusal
from cortex_m_nn.passes.registry import Lowered, Pattern, rule
from cortex_m_nn.quantizer.config import SOFTMAX_OUTPUT_SCALE, SOFTMAX_OUTPUT_ZERO_POINT
from cortex_m_nn.quantizer.quantizer import aten

#: Longer rows can reach sums where arm_softmax_s8's final shift is undefined (see the op).
MAX_SOFTMAX_ROW = 511


@rule(aten.softmax.int, aten._softmax.default)
def lower_softmax(context: LoweringContext, pattern: Pattern) -> Lowered:
    x = context.input_value(pattern.op.args[0])
    dim = int(pattern.op.args[1]) % len(x.shape)
    innermost = 1 if x.nhwc else len(x.shape) - 1  # channels are innermost in NHWC
    if dim != innermost:
        raise LoweringRefused(Refusal.SOFTMAX_DIM, f"softmax over dim {dim}, not the innermost one")
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
    out = context.call("softmax", x.node, multiplier, shift, diff_min)
    value = QValue(out, pattern.scale, pattern.zero_point, x.shape, nhwc=x.nhwc)
    return Lowered(value, "softmax", "arm_softmax_s8")
