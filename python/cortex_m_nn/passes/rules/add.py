"""aten.add.Tensor / aten.sub.Tensor → cortex_m_nn::add (arm_elementwise_add_s8).

Subtraction is the same kernel with input 2's multiplier negated (see
:mod:`cortex_m_nn.ops.add` for why that is exact). Broadcasting, constants and numbers as
operands: :mod:`cortex_m_nn.passes.binary`.
"""

from __future__ import annotations

from cortex_m_nn.ops.add import add_parameters, sub_parameters
from cortex_m_nn.passes.binary import lower_binary, operands
from cortex_m_nn.passes.context import LoweringContext
from cortex_m_nn.passes.layout import census
from cortex_m_nn.passes.refusals import LoweringRefused, Refusal
from cortex_m_nn.passes.registry import Lowered, Pattern, rule
from cortex_m_nn.quantizer.quantizer import aten

#: The integer arguments of cortex_m_nn::add between its inputs and its activation range.
PARAMETERS = (
    "input1_offset",
    "input1_multiplier",
    "input1_shift",
    "input2_offset",
    "input2_multiplier",
    "input2_shift",
    "left_shift",
    "output_offset",
    "output_multiplier",
    "output_shift",
)


def _lower(context: LoweringContext, pattern: Pattern, subtract: bool) -> Lowered:
    if pattern.op.kwargs.get("alpha", 1) != 1:
        raise LoweringRefused(Refusal.ALPHA, f"{'sub' if subtract else 'add'} with alpha != 1")
    before = census(context)
    inputs = operands(context, pattern)
    a, b = inputs.first, inputs.second
    parameters = sub_parameters if subtract else add_parameters
    p = parameters(
        a.scale,
        b.scale,
        pattern.scale,
        input1_zero_point=a.zero_point,
        input2_zero_point=b.zero_point,
        output_zero_point=pattern.zero_point,
    )
    arguments = [p[name] for name in PARAMETERS]
    return lower_binary(
        context, pattern, inputs, before, "add", "arm_elementwise_add_s8", arguments
    )


@rule(aten.add.Tensor)
def lower_add(context: LoweringContext, pattern: Pattern) -> Lowered:
    return _lower(context, pattern, subtract=False)


@rule(aten.sub.Tensor)
def lower_sub(context: LoweringContext, pattern: Pattern) -> Lowered:
    return _lower(context, pattern, subtract=True)
