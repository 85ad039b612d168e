"""Element-wise functions without a CMSIS-NN s8 kernel → cortex_m_nn::lut (a 256-entry table).

sigmoid, tanh, hardswish, hardsigmoid, gelu, silu, leaky_relu and elu, and
relu/relu6/hardtanh/clamp where they cannot become a producer's activation range (at a model
input, after a pool or view, after an op whose output has other users). An activation fused
after the function by the quantizer is folded into the same table. The table takes the int8
values of the producing operator as they are: no requantization in between, whatever the
producer.
"""

from __future__ import annotations

import torch
from torch.fx import Node

from cortex_m_nn.ops.lut import INDEX_OFFSET, TABLE_SIZE, FloatFunction, lookup_table
from cortex_m_nn.passes.context import LoweringContext
from cortex_m_nn.passes.graph_values import QValue
from cortex_m_nn.passes.refusals import LoweringRefused, Refusal
from cortex_m_nn.passes.registry import Lowered, Pattern, rule
from cortex_m_nn.quantizer.quantizer import ACTIVATIONS, LOOKUP, constant_arguments

#: What the report shows in place of a CMSIS-NN function.
TABLE_LOOKUP = "(256-entry table lookup)"


def float_function(node: Node) -> FloatFunction:
    """``node``'s ATen call with its own constant arguments, applied to a new first input."""
    if not constant_arguments(node):
        raise LoweringRefused(
            Refusal.TENSOR_ARGUMENTS,
            f"{node.target} with tensor arguments (bounds must be constants)",
        )
    args, kwargs = tuple(node.args[1:]), dict(node.kwargs)
    return lambda x: node.target(x, *args, **kwargs)


@rule(*sorted(LOOKUP | ACTIVATIONS, key=str))
def lower_lut(context: LoweringContext, pattern: Pattern) -> Lowered:
    x = context.input_value(pattern.op.args[0])
    if pattern.shape != x.shape:
        raise LoweringRefused(
            Refusal.ELEMENTWISE_SHAPE, f"element-wise op {list(x.shape)} → {list(pattern.shape)}"
        )
    functions = [float_function(n) for n in (pattern.op, pattern.activation) if n is not None]
    table = lookup_table(functions, x.scale, x.zero_point, pattern.scale, pattern.zero_point)
    identity = torch.arange(-INDEX_OFFSET, TABLE_SIZE - INDEX_OFFSET, dtype=torch.int8)
    if torch.equal(table, identity):  # e.g. a clamp the input range already satisfies
        return Lowered(
            QValue(x.node, pattern.scale, pattern.zero_point, x.shape, x.nhwc), "view", "(identity)"
        )
    out = context.call("lut", x.node, context.constant(table, f"{pattern.op.name}_table"))
    value = QValue(out, pattern.scale, pattern.zero_point, x.shape, nhwc=x.nhwc)
    return Lowered(value, "lut", TABLE_LOOKUP, weight_bytes=TABLE_SIZE)
