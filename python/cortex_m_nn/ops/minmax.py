"""``cortex_m_nn::maximum`` and ``cortex_m_nn::minimum``: one definition, two names.

Int8 element-wise maximum/minimum of two tensors in one quantization. Reference for
``arm_maximum_s8`` (``y = x1 >= x2 ? x1 : x2``) and ``arm_minimum_s8``
(``y = x1 >= x2 ? x2 : x1``) per element. There is no requantization, so both inputs and the
output must share scale and zero point (the quantizer shares them; the lowering refuses
otherwise).

Call: ``arm_<name>_s8(ctx, input1, &dims1, input2, &dims2, output, &output_dims)`` with
``ctx`` unused (no scratch: ``{NULL, 0}``) and each ``cmsis_nn_dims`` the tensor's shape
padded on the left with 1 to ``{n, h, w, c}``. The functions broadcast themselves, correctly
for every shape pair :func:`cortex_m_nn.ops.broadcast.cmsis_minmax_supported` accepts
(all that the lowering's collapsed shapes produce); the reference refuses the others.
"""

from __future__ import annotations

from collections.abc import Callable

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


def _define(
    name: str, pick: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """Define ``cortex_m_nn::<name>``, whose reference is ``pick`` of the two inputs."""

    def fake(input1: torch.Tensor, input2: torch.Tensor) -> torch.Tensor:
        check_minmax_shapes(name, input1, input2)
        return fake_output(name, input1, input2)

    def reference(input1: torch.Tensor, input2: torch.Tensor) -> torch.Tensor:
        check_minmax_shapes(name, input1, input2)
        return pick(input1, input2).to(torch.int8)

    reference.__name__ = reference.__qualname__ = name
    reference.__doc__ = f"Reference ``arm_{name}_s8`` (see the module docstring)."
    return define_operator(name, "Tensor input1, Tensor input2", fake)(reference)


maximum = _define("maximum", torch.maximum)
minimum = _define("minimum", torch.minimum)
