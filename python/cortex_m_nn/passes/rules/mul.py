"""aten.mul.Tensor → cortex_m_nn::mul (arm_elementwise_mul_s8), activation fused.

Broadcasting, constants and numbers as operands: :mod:`cortex_m_nn.passes.binary`.
"""

from __future__ import annotations

from cortex_m_nn.ops.mul import mul_parameters
from cortex_m_nn.passes.binary import lower_binary, operands
from cortex_m_nn.passes.context import LoweringContext
from cortex_m_nn.passes.layout import census
from cortex_m_nn.passes.refusals import LoweringRefused, Refusal
from cortex_m_nn.passes.registry import Lowered, Pattern, rule
from cortex_m_nn.quantizer.quantizer import aten

#: The integer arguments of cortex_m_nn::mul between its inputs and its activation range.
PARAMETERS = (
    "input1_offset",
    "input2_offset",
    "output_offset",
    "output_multiplier",
    "output_shift",
)


@rule(aten.mul.Tensor)
def lower_mul(context: LoweringContext, pattern: Pattern) -> Lowered:
    before = census(context)
    inputs = operands(context, pattern)
    a, b = inputs.first, inputs.second
    try:
        p = mul_parameters(
            a.scale,
            b.scale,
            pattern.scale,
            input1_zero_point=a.zero_point,
            input2_zero_point=b.zero_point,
            output_zero_point=pattern.zero_point,
        )
    except ValueError as error:
        raise LoweringRefused(Refusal.MUL_REQUANTIZATION, str(error)) from error
    arguments = [p[name] for name in PARAMETERS]
    return lower_binary(
        context, pattern, inputs, before, "mul", "arm_elementwise_mul_s8", arguments
    )
