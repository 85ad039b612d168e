"""aten.minimum / aten.maximum → cortex_m_nn::minimum / maximum (arm_minimum_s8 / _maximum_s8).

The C functions compare raw int8 values, so both inputs and the output must share one
quantization (the quantizer shares it); anything else is refused. No activation fuses:
the functions have no output clamp.
"""

from __future__ import annotations

from cortex_m_nn.passes.binary import operands, same_quantization
from cortex_m_nn.passes.graph_values import LoweringRefused
from cortex_m_nn.passes.layout import census, noting_transposes
from cortex_m_nn.passes.lower import Lowered, LoweringContext, Pattern, rule
from cortex_m_nn.quantizer.quantizer import aten


def _lower(context: LoweringContext, pattern: Pattern, name: str) -> Lowered:
    if pattern.activation is not None:
        raise LoweringRefused(f"activation after {name} (arm_{name}_s8 has no output clamp)")
    before = census(context)
    inputs = operands(context, pattern)
    if not same_quantization(inputs.first, inputs.second, pattern):
        raise LoweringRefused(
            f"{name} of tensors quantized differently "
            f"({inputs.first.scale}, {inputs.first.zero_point}) and "
            f"({inputs.second.scale}, {inputs.second.zero_point}) → "
            f"({pattern.scale}, {pattern.zero_point}); arm_{name}_s8 cannot requantize"
        )
    out = context.call(name, inputs.input1, inputs.input2)
    value = inputs.result(context, out, pattern)
    return Lowered(
        value,
        name,
        noting_transposes(context, before, f"arm_{name}_s8"),
        weight_bytes=inputs.constant_bytes,
    )


@rule(aten.minimum.default)
def lower_minimum(context: LoweringContext, pattern: Pattern) -> Lowered:
    return _lower(context, pattern, "minimum")


@rule(aten.maximum.default)
def lower_maximum(context: LoweringContext, pattern: Pattern) -> Lowered:
    return _lower(context, pattern, "maximum")
