"""aten.add.Tensor / aten.sub.Tensor → cortex_m_nn::add (arm_elementwise_add_s8; int16:
arm_elementwise_add_s16).

Subtraction is the same kernel with input 2's multiplier negated (see
:mod:`cortex_m_nn.ops.add` for why that is exact). Broadcasting, constants and numbers as
operands: :mod:`cortex_m_nn.lower.binary`.
"""

from __future__ import annotations

import torch

from cortex_m_nn.core.cmsis_nn import Case, cmsis_function
from cortex_m_nn.core.families import aten
from cortex_m_nn.core.refusals import LoweringRefused, Refusal
from cortex_m_nn.lower.binary import lower_binary, operands, parameters_of
from cortex_m_nn.lower.context import LoweringContext
from cortex_m_nn.lower.layout import census
from cortex_m_nn.lower.registry import Lowered, Pattern, rule
from cortex_m_nn.ops.add import LEFT_SHIFT_INT8, LEFT_SHIFT_INT16, add_parameters, sub_parameters


def _lower(context: LoweringContext, pattern: Pattern, subtract: bool) -> Lowered:
    if pattern.op.kwargs.get("alpha", 1) != 1:
        raise LoweringRefused(Refusal.ALPHA, f"{'sub' if subtract else 'add'} with alpha != 1")
    before = census(context)
    inputs = operands(context, pattern)
    int16 = pattern.dtype is torch.int16
    shift = LEFT_SHIFT_INT16 if int16 else LEFT_SHIFT_INT8
    function = sub_parameters if subtract else add_parameters
    p = parameters_of(function, inputs, pattern, left_shift=shift)
    name = cmsis_function("add", Case.S16 if int16 else Case.S8)
    return lower_binary(context, pattern, inputs, before, "add", name, p)


@rule(aten.add.Tensor)
def lower_add(context: LoweringContext, pattern: Pattern) -> Lowered:
    return _lower(context, pattern, subtract=False)


@rule(aten.sub.Tensor)
def lower_sub(context: LoweringContext, pattern: Pattern) -> Lowered:
    return _lower(context, pattern, subtract=True)
