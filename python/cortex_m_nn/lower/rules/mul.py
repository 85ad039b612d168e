"""aten.mul.Tensor → cortex_m_nn::mul (arm_elementwise_mul_s8; int16: arm_elementwise_mul_s16),
activation fused.

Broadcasting, constants and numbers as operands: :mod:`cortex_m_nn.lower.binary`.
"""

from __future__ import annotations

import torch

from cortex_m_nn.core.cmsis_nn import Case, cmsis_function
from cortex_m_nn.core.families import aten
from cortex_m_nn.core.refusals import LoweringRefused, Refusal
from cortex_m_nn.lower.binary import Operands, lower_binary, operands, parameters_of
from cortex_m_nn.lower.context import LoweringContext
from cortex_m_nn.lower.layout import census
from cortex_m_nn.lower.registry import Lowered, Pattern, rule
from cortex_m_nn.lower.rules.lut import square_of
from cortex_m_nn.ops.mul import mul_parameters


def largest_product(context: LoweringContext, inputs: Operands) -> int:
    """The largest |x1 * x2| of two int16 operands: 2^15 for an activation, a constant's own
    largest magnitude."""
    bounds = []
    for value in (inputs.first, inputs.second):
        node = value.node
        constant = getattr(context.root, str(node.target)) if node.op == "get_attr" else None
        bounds.append(32768 if constant is None else int(constant.abs().max()))
    return bounds[0] * bounds[1]


@rule(aten.mul.Tensor)
def lower_mul(context: LoweringContext, pattern: Pattern) -> Lowered:
    int16 = pattern.dtype is torch.int16
    square = None if int16 else square_of(context, pattern)  # x * x: an exact int8 table
    if square is not None:
        return square
    before = census(context)
    inputs = operands(context, pattern)
    try:
        extra = {"largest_product": largest_product(context, inputs)} if int16 else {}
        p = parameters_of(mul_parameters, inputs, pattern, **extra)
    except ValueError as error:
        raise LoweringRefused(Refusal.MUL_REQUANTIZATION, str(error)) from error
    name = cmsis_function("mul", Case.S16 if int16 else Case.S8)
    return lower_binary(context, pattern, inputs, before, "mul", name, p)
