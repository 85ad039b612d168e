"""``cortex_m_nn::minimum``: int8 element-wise minimum of two tensors in one quantization.

Reference for ``arm_minimum_s8``: ``y = x1 >= x2 ? x2 : x1`` per element. There is no
requantization, so both inputs and the output must share scale and zero point (the
quantizer shares them; the lowering refuses otherwise).

Call: ``arm_minimum_s8(ctx, input1, &dims1, input2, &dims2, output, &output_dims)``, exactly
as ``cortex_m_nn::maximum`` calls ``arm_maximum_s8`` (same broadcasting, same pointer walk,
same restriction; see :mod:`cortex_m_nn.ops.maximum`).
"""

from __future__ import annotations

import torch

from cortex_m_nn.ops.broadcast import fake_output
from cortex_m_nn.ops.library import define_operator
from cortex_m_nn.ops.maximum import check_minmax_shapes


def _fake(input1: torch.Tensor, input2: torch.Tensor) -> torch.Tensor:
    check_minmax_shapes("minimum", input1, input2)
    return fake_output("minimum", input1, input2)


@define_operator("minimum", "Tensor input1, Tensor input2", _fake)
def minimum(input1: torch.Tensor, input2: torch.Tensor) -> torch.Tensor:
    """Reference ``arm_minimum_s8`` (see the module docstring)."""
    check_minmax_shapes("minimum", input1, input2)
    return torch.minimum(input1, input2).to(torch.int8)
