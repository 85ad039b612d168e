"""aten.mul.Tensor → cortex_m_nn::mul (arm_elementwise_mul_s8), activation fused.

Broadcasting, constants and numbers as operands: :mod:`cortex_m_nn.passes.binary`.
"""

from __future__ import annotations

from cortex_m_nn.ops.mul import mul_parameters
from cortex_m_nn.passes.binary import lower_binary, operands, parameters_of
from cortex_m_nn.passes.context import LoweringContext
from cortex_m_nn.passes.layout import census
from cortex_m_nn.passes.refusals import LoweringRefused, Refusal
from cortex_m_nn.passes.registry import Lowered, Pattern, rule
from cortex_m_nn.passes.rules.lut import square_of
from cortex_m_nn.quantizer.quantizer import aten


@rule(aten.mul.Tensor)
def lower_mul(context: LoweringContext, pattern: Pattern) -> Lowered:
    square = square_of(context, pattern)  # x * x: a table, exact and one lookup per element
    if square is not None:
        return square
    before = census(context)
    inputs = operands(context, pattern)
    try:
        p = parameters_of(mul_parameters, inputs, pattern)
    except ValueError as error:
        raise LoweringRefused(Refusal.MUL_REQUANTIZATION, str(error)) from error
    return lower_binary(context, pattern, inputs, before, "mul", "arm_elementwise_mul_s8", p)
