"""The ``cortex_m_nn`` operators; importing this package registers all of them."""

from cortex_m_nn.ops import (  # noqa: F401
    add,
    avg_pool2d,
    conv2d,
    depthwise_conv2d,
    dequantize,
    linear,
    quantize,
    softmax,
)
