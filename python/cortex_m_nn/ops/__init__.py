"""The ``cortex_m_nn`` operators; importing this package registers all of them."""

from cortex_m_nn.ops import (  # noqa: F401
    add,
    avg_pool2d,
    batch_matmul,
    concat,
    conv2d,
    depthwise_conv2d,
    dequantize,
    linear,
    lut,
    max_pool2d,
    maximum,
    minimum,
    mul,
    pad,
    quantize,
    reduce,
    softmax,
    transpose,
    transpose_conv2d,
)
