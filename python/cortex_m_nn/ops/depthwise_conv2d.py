"""``cortex_m_nn::depthwise_conv2d``: int8 NHWC depthwise convolution, per-channel requant.

Reference for ``arm_depthwise_conv_wrapper_s8``. Weight layout is CMSIS-NN's
``[1, KH, KW, Cout]`` with ``Cout = Cin * depth_multiplier``; output channel ``c`` reads input
channel ``c // depth_multiplier``. Offsets, padding, output size and requantization are as
for :mod:`cortex_m_nn.ops.conv2d`.
"""

from __future__ import annotations

import torch

from cortex_m_nn.ops.conv2d import check_conv_arguments, finish, output_size, patches
from cortex_m_nn.ops.library import define_operator


def _fake(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    multipliers: torch.Tensor,
    shifts: torch.Tensor,
    stride: list[int],
    padding: list[int],
    dilation: list[int],
    depth_multiplier: int,
    input_offset: int,
    output_offset: int,
    activation_min: int,
    activation_max: int,
) -> torch.Tensor:
    n, h, w, _ = input.shape
    _, kh, kw, c_out = weight.shape
    oh = output_size(h, kh, stride[0], padding[0], dilation[0])
    ow = output_size(w, kw, stride[1], padding[1], dilation[1])
    return input.new_empty((n, oh, ow, c_out), dtype=torch.int8)


@define_operator(
    "depthwise_conv2d",
    "Tensor input, Tensor weight, Tensor bias, Tensor multipliers, Tensor shifts, int[] stride,"
    " int[] padding, int[] dilation, int depth_multiplier, int input_offset, int output_offset,"
    " int activation_min, int activation_max, int scratch_bytes",
    _fake,
    scratch=True,
)
def depthwise_conv2d(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    multipliers: torch.Tensor,
    shifts: torch.Tensor,
    stride: list[int],
    padding: list[int],
    dilation: list[int],
    depth_multiplier: int,
    input_offset: int,
    output_offset: int,
    activation_min: int,
    activation_max: int,
) -> torch.Tensor:
    """Reference ``arm_depthwise_conv_s8``: NHWC int8 in, [1, KH, KW, Cout] weights."""
    check_conv_arguments(input, weight, stride, padding, dilation)
    _, kh, kw, c_out = weight.shape
    c_in = input.shape[3]
    if weight.shape[0] != 1 or depth_multiplier < 1 or c_out != c_in * depth_multiplier:
        raise ValueError(
            f"weight {tuple(weight.shape)} does not match {c_in} input channels"
            f" with depth multiplier {depth_multiplier}"
        )
    shifted = input.to(torch.int64) + input_offset
    windows = patches(shifted, (kh, kw), stride, padding, dilation)
    source = torch.arange(c_out) // depth_multiplier
    windows = windows.index_select(3, source)  # [N, OH, OW, Cout, KH, KW]
    kernel = weight[0].to(torch.int64).permute(2, 0, 1)  # [Cout, KH, KW]
    acc = (windows * kernel).sum(dim=(-2, -1)) + bias.to(torch.int64)
    return finish(
        acc,
        multipliers.to(torch.int64),
        shifts.to(torch.int64),
        output_offset,
        activation_min,
        activation_max,
    )
