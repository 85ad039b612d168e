"""aten.add.Tensor → cortex_m_nn::add (arm_elementwise_add_s8)."""

from __future__ import annotations

from cortex_m_nn.ops.add import add_parameters
from cortex_m_nn.passes.activation import activation_range
from cortex_m_nn.passes.graph_values import LoweringRefused, QValue
from cortex_m_nn.passes.lower import Lowered, LoweringContext, Pattern, rule
from cortex_m_nn.quantizer.quantizer import aten


@rule(aten.add.Tensor)
def lower_add(context: LoweringContext, pattern: Pattern) -> Lowered:
    node = pattern.op
    if node.kwargs.get("alpha", 1) != 1:
        raise LoweringRefused("add with alpha != 1")
    a, b = (context.input_value(arg) for arg in node.args[:2])
    if a.shape != b.shape:
        raise LoweringRefused(f"broadcasting add {list(a.shape)} + {list(b.shape)}")
    if a.nhwc != b.nhwc:
        raise LoweringRefused("add of tensors in different layouts")
    p = add_parameters(a.scale, b.scale, pattern.scale)
    act_min, act_max = activation_range(pattern.activation, pattern.scale, pattern.zero_point)
    out = context.call(
        "add",
        a.node,
        b.node,
        -a.zero_point,
        p["input1_multiplier"],
        p["input1_shift"],
        -b.zero_point,
        p["input2_multiplier"],
        p["input2_shift"],
        p["left_shift"],
        pattern.zero_point,
        p["output_multiplier"],
        p["output_shift"],
        act_min,
        act_max,
    )
    value = QValue(out, pattern.scale, pattern.zero_point, pattern.shape, nhwc=a.nhwc)
    return Lowered(value, "add", "arm_elementwise_add_s8")
