"""aten.mul.Tensor → cortex_m_nn::mul (arm_elementwise_mul_s8), activation fused.

Broadcasting, constants and numbers as operands: :mod:`cortex_m_nn.passes.binary`.
"""

from __future__ import annotations

from cortex_m_nn.ops.mul import mul_parameters
from cortex_m_nn.passes.activation import activation_range
from cortex_m_nn.passes.binary import operands
from cortex_m_nn.passes.graph_values import LoweringRefused
from cortex_m_nn.passes.layout import census, noting_transposes
from cortex_m_nn.passes.lower import Lowered, LoweringContext, Pattern, rule
from cortex_m_nn.quantizer.quantizer import aten


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
        raise LoweringRefused(str(error)) from error
    act_min, act_max = activation_range(pattern.activation, pattern.scale, pattern.zero_point)
    out = context.call(
        "mul",
        inputs.input1,
        inputs.input2,
        p["input1_offset"],
        p["input2_offset"],
        p["output_offset"],
        p["output_multiplier"],
        p["output_shift"],
        act_min,
        act_max,
    )
    value = inputs.result(context, out, pattern)
    return Lowered(
        value,
        "mul",
        noting_transposes(context, before, "arm_elementwise_mul_s8"),
        weight_bytes=inputs.constant_bytes,
    )
