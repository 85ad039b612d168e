"""aten.add.Tensor / aten.sub.Tensor → cortex_m_nn::add (arm_elementwise_add_s8).

Subtraction is the same kernel with input 2's multiplier negated (see
:mod:`cortex_m_nn.ops.add` for why that is exact). Broadcasting, constants and numbers as
operands: :mod:`cortex_m_nn.passes.binary`.
"""

from __future__ import annotations

from cortex_m_nn.ops.add import add_parameters, sub_parameters
from cortex_m_nn.passes.activation import activation_range
from cortex_m_nn.passes.binary import operands
from cortex_m_nn.passes.graph_values import LoweringRefused
from cortex_m_nn.passes.layout import census, noting_transposes
from cortex_m_nn.passes.lower import Lowered, LoweringContext, Pattern, rule
from cortex_m_nn.quantizer.quantizer import aten


def _lower(context: LoweringContext, pattern: Pattern, subtract: bool) -> Lowered:
    if pattern.op.kwargs.get("alpha", 1) != 1:
        raise LoweringRefused(f"{'sub' if subtract else 'add'} with alpha != 1")
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
    act_min, act_max = activation_range(pattern.activation, pattern.scale, pattern.zero_point)
    out = context.call(
        "add",
        inputs.input1,
        inputs.input2,
        p["input1_offset"],
        p["input1_multiplier"],
        p["input1_shift"],
        p["input2_offset"],
        p["input2_multiplier"],
        p["input2_shift"],
        p["left_shift"],
        p["output_offset"],
        p["output_multiplier"],
        p["output_shift"],
        act_min,
        act_max,
    )
    value = inputs.result(context, out, pattern)
    return Lowered(
        value,
        "add",
        noting_transposes(context, before, "arm_elementwise_add_s8"),
        weight_bytes=inputs.constant_bytes,
    )


@rule(aten.add.Tensor)
def lower_add(context: LoweringContext, pattern: Pattern) -> Lowered:
    return _lower(context, pattern, subtract=False)


@rule(aten.sub.Tensor)
def lower_sub(context: LoweringContext, pattern: Pattern) -> Lowered:
    return _lower(context, pattern, subtract=True)
