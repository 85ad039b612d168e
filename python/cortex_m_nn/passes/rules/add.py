"""aten.add.Tensor / aten.sub.Tensor → cortex_m_nn::add (arm_elementwise_add_s8).

Subtraction is the same kernel with input 2's multiplier negated (see
:mod:`cortex_m_nn.ops.add` for why that is exact). Broadcasting, constants and numbers as
operands: :mod:`cortex_m_nn.passes.binary`.
"""

from __future__ import annotations

from cortex_m_nn.ops.add import add_parameters, sub_parameters
from cortex_m_nn.passes.binary import lower_binary, operands, parameters_of
from cortex_m_nn.passes.context import LoweringContext
from cortex_m_nn.passes.layout import census
from cortex_m_nn.passes.refusals import LoweringRefused, Refusal
from cortex_m_nn.passes.registry import Lowered, Pattern, rule
from cortex_m_nn.quantizer.quantizer import aten


def _lower(context: LoweringContext, pattern: Pattern, subtract: bool) -> Lowered:
    if pattern.op.kwargs.get("alpha", 1) != 1:
        raise LoweringRefused(Refusal.ALPHA, f"{'sub' if subtract else 'add'} with alpha != 1")
    before = census(context)
    inputs = operands(context, pattern)
    p = parameters_of(sub_parameters if subtract else add_parameters, inputs, pattern)
    return lower_binary(context, pattern, inputs, before, "add", "arm_elementwise_add_s8", p)


@rule(aten.add.Tensor)
def lower_add(context: LoweringContext, pattern: Pattern) -> Lowered:
    return _lower(context, pattern, subtract=False)


@rule(aten.sub.Tensor)
def lower_sub(context: LoweringContext, pattern: Pattern) -> Lowered:
    return _lower(context, pattern, subtract=True)
