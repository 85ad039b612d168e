"""``cortex_m_nn::max_pool2d``: int8 NHWC max pooling (same scale and zero point in/out).

Reference for ``arm_max_pool_s8``: each output is the largest in-bounds input of its window
(padding never wins: CMSIS-NN clips the window to the input), then clamped to
``[activation_min, activation_max]`` (the fused relu/relu6/hardtanh/clamp). ``padding`` is the
top/left offset ``[pad_h, pad_w]``; the output size follows PyTorch, floor mode or
``ceil_mode`` (which only makes the output larger: the last windows are clipped the same way).
A window lying entirely in the padding leaves the C output undefined: an error here.
int16 is the other case (``arm_max_pool_s16``, the same walk).

C call (``ctx`` is unused: no scratch)::

    cmsis_nn_context ctx = {.buf = NULL, .size = 0};
    cmsis_nn_pool_params pool = {
        .stride = {.w = stride[1], .h = stride[0]},        (cmsis_nn_tile is {w, h})
        .padding = {.w = padding[1], .h = padding[0]},
        .activation = {.min = activation_min, .max = activation_max}};
    cmsis_nn_dims input_dims  = {.n = N, .h = H, .w = W, .c = C};      (input [N, H, W, C])
    cmsis_nn_dims filter_dims = {.n = 1, .h = kernel_size[0], .w = kernel_size[1], .c = 1};
    cmsis_nn_dims output_dims = {.n = N, .h = OH, .w = OW, .c = C};    (output [N, OH, OW, C])
    arm_max_pool_s8(&ctx, &pool, &input_dims, input, &filter_dims, &output_dims, output)

``ceil_mode`` only changes OH/OW, which the kernel reads from the output tensor.
"""

from __future__ import annotations

from typing import Any

import torch

from cortex_m_nn.ops.library import define_operator
from cortex_m_nn.ops.params import PoolParams

#: Below every int8 and int16 value: marks padded positions, which never win the maximum.
_PADDED = -32769


def _fake(input: torch.Tensor, *arguments: Any) -> torch.Tensor:
    oh, ow = PoolParams.of("max_pool2d", arguments).output_hw(input)
    dtype = torch.int16 if input.dtype is torch.int16 else torch.int8
    return input.new_empty((input.shape[0], oh, ow, input.shape[3]), dtype=dtype)


@define_operator(
    "max_pool2d",
    "Tensor input, int[] kernel_size, int[] stride, int[] padding, bool ceil_mode,"
    " int activation_min, int activation_max",
    _fake,
)
def max_pool2d(input: torch.Tensor, *arguments: Any) -> torch.Tensor:
    """Reference ``arm_max_pool_s8`` on an NHWC int8 tensor; ``arguments`` as the schema
    lists them after the input."""
    params = PoolParams.of("max_pool2d", arguments)
    windows = params.windows(input.to(torch.int32), _PADDED)
    largest = windows.amax(dim=(-2, -1))
    if bool((largest == _PADDED).any()):
        raise ValueError("a pooling window lies entirely in the padding")
    return params.clamp(largest, torch.int16 if input.dtype is torch.int16 else torch.int8)
