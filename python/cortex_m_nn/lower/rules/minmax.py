"""aten.minimum / aten.maximum → cortex_m_nn::minimum / maximum (arm_minimum_s8 / _maximum_s8).

The C functions compare raw int8 values, so both inputs and the output must share one
quantization (the quantizer shares it); anything else is refused. No activation fuses:
the functions have no output clamp.
"""

from __future__ import annotations

from cortex_m_nn.core.families import aten
from cortex_m_nn.core.refusals import LoweringRefused, Refusal
from cortex_m_nn.lower.binary import lower_binary, operands, same_quantization
from cortex_m_nn.lower.context import LoweringContext
from cortex_m_nn.lower.layout import census
from cortex_m_nn.lower.registry import Lowered, Pattern, rule


def _lower(context: LoweringContext, pattern: Pattern, name: str) -> Lowered:
    if pattern.activation is not None:
        raise LoweringRefused(
            Refusal.ACTIVATION_AFTER, f"activation after {name} (arm_{name}_s8 has no output clamp)"
        )
    before = census(context)
    inputs = operands(context, pattern)
    if not same_quantization(inputs.first, inputs.second, pattern):
        raise LoweringRefused(
            Refusal.QUANTIZED_DIFFERENTLY,
            f"{name} of tensors quantized differently "
            f"({inputs.first.scale}, {inputs.first.zero_point}) and "
            f"({inputs.second.scale}, {inputs.second.zero_point}) → "
            f"({pattern.scale}, {pattern.zero_point}); arm_{name}_s8 cannot requantize",
        )
    return lower_binary(context, pattern, inputs, before, name, f"arm_{name}_s8")


@rule(aten.minimum.default)
def lower_minimum(context: LoweringContext, pattern: Pattern) -> Lowered:
    return _lower(context, pattern, "minimum")


@rule(aten.maximum.default)
def lower_maximum(context: LoweringContext, pattern: Pattern) -> Lowered:
    return _lower(context, pattern, "maximum")
