"""``cortex_m_nn::maximum``: int8 element-wise maximum of two tensors in one quantization.

Reference for ``arm_maximum_s8``: ``y = x1 >= x2 ? x1 : x2`` per element. There is no
requantization, so both inputs and the output must share scale and zero point (the
quantizer shares them; the lowering refuses otherwise).

Call: ``arm_maximum_s8(ctx, input1, &dims1, input2, &dims2, output, &output_dims)`` with
``ctx`` unused (no scratch: ``{NULL, 0}``) and each ``cmsis_nn_dims`` the tensor's shape
padded on the left with 1 to ``{n, h, w, c}``. The function broadcasts itself, correctly
for every shape pair :func:`cortex_m_nn.ops.broadcast.cmsis_minmax_supported` accepts
(all that the lowering's collapsed shapes produce); the reference refuses the others.
"""

from __future__ import annotations

import torch

from cortex_m_nn.ops.broadcast import broadcast_shape, cmsis_minmax_supported, fake_output
from cortex_m_nn.ops.library import define_operator


def check_minmax_shapes(name: str, input1: torch.Tensor, input2: torch.Tensor) -> list[int]:
    """The output shape; ValueError for shapes CMSIS-NN's min/max would broadcast wrongly."""
    shape = broadcast_shape(name, input1.shape, input2.shape)
    if not cmsis_minmax_supported(input1.shape, input2.shape):
        raise ValueError(
            f"{name}: arm_{name}_s8 broadcasts {list(input1.shape)} against "
            f"{list(input2.shape)} wrongly; collapse the shapes (ops.broadcast.collapse) first"
        )
    return shape


def _fake(input1: torch.Tensor, input2: torch.Tensor) -> torch.Tensor:
    check_minmax_shapes("maximum", input1, input2)
    return fake_output("maximum", input1, input2)


@define_operator("maximum", "Tensor input1, Tensor input2", _fake)
def maximum(input1: torch.Tensor, input2: torch.Tensor) -> torch.Tensor:
    """Reference ``arm_maximum_s8`` (see the module docstring)."""
    check_minmax_shapes("maximum", input1, input2)
    return torch.maximum(input1, input2).to(torch.int8)
