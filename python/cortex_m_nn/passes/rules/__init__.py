"""Lowering rules, one module per operator family; importing this registers them all."""

from cortex_m_nn.passes.rules import (
    add,
    batch_matmul,
    concat,
    conv2d,
    linear,
    lut,
    minmax,
    mul,
    pad,
    pooling,
    reduce,
    softmax,
    transpose,
    transpose_conv2d,
    views,
)

__all__ = [
    "add",
    "batch_matmul",
    "concat",
    "conv2d",
    "linear",
    "lut",
    "minmax",
    "mul",
    "pad",
    "pooling",
    "reduce",
    "softmax",
    "transpose",
    "transpose_conv2d",
    "views",
]
