"""``cortex_m_nn::depthwise_conv2d``: int8 NHWC depthwise convolution, per-channel requant.

Reference for ``arm_depthwise_conv_wrapper_s8``. Weight layout is CMSIS-NN's
``[1, KH, KW, Cout]`` with ``Cout = Cin * depth_multiplier``; output channel ``c`` reads input
channel ``c // depth_multiplier``. Offsets, padding, output size and requantization are as
for :mod:`cortex_m_nn.ops.conv2d`.

int16 activations are the other case (``arm_depthwise_conv_wrapper_s16``: its fast kernel for
multiplier 1, no dilation and fewer than 512 taps sums a window in int32, at most 511
products of at most 2^22, the generic one in int64: both exact), with zero points 0, an int64
bias and ``arm_nn_requantize_s64`` (:meth:`ConvParams.check_s16`); the generic kernel counts
dims in 16 bits, so each is below 32768. The 3x3 path's padding limit is the s8 kernel's
(the wrapper's and path 1's; path 2 pads any end).

``path`` picks the function of an int8 call, with the same numbers (``core.cmsis_nn``): 0 the
wrapper's choice, 1 ``arm_depthwise_conv_3x3_s8`` for a 3x3 call of multiplier 1 without
dilation, on every ISA — no scratch, where MVE's wrapper takes ``arm_depthwise_conv_s8_opt``
and its buffer of 4 x 124 x 9 bytes; 2 our ``depthwise_conv_lanes_s8`` (``core.compute``) for
a 3x3 call of multiplier 1, no dilation, stride 1 or 2 across and a multiple of 4 channels,
any padding and batch.

int4 weights are the third case (``arm_depthwise_conv_wrapper_s4``): a uint8 weight
``[1, KH, KW, Cout / 2]`` of packed pairs (:mod:`cortex_m_nn.ops.int4`), int8 activations, the
s8 arithmetic, no 3x3 path (so no padding limit), and an even input channel count: CMSIS-NN's
generic s4 kernel reads wrong nibbles for an odd one (``docs/int4.md``, defect 1).
"""

from __future__ import annotations

from typing import Any

import torch

from cortex_m_nn.core import compute
from cortex_m_nn.core.cmsis_nn import LANES, THREE_BY_THREE, WRAPPER
from cortex_m_nn.ops import int4
from cortex_m_nn.ops.arithmetic import Rounding
from cortex_m_nn.ops.library import define_operator
from cortex_m_nn.ops.params import ConvParams

#: The largest dim the s16 generic kernel counts in 16 bits.
S16_DIM_MAX = 32767


def three_by_three_pads(params: ConvParams, kernel: tuple[int, int]) -> bool:
    """Whether CMSIS-NN's 3x3 depthwise path (``arm_depthwise_conv_3x3_s8``, the wrapper's
    choice off MVE for multiplier 1, no dilation) computes this padding: it reads a window's
    middle column unchecked, so each end pads by at most 1. Other windows: always."""
    if len(params.padding) != 4 or kernel != (3, 3) or params.depth_multiplier != 1:
        return True
    return list(params.dilation) != [1, 1] or max(params.padding[2:]) <= 1


def check_path(
    params: ConvParams, input: torch.Tensor, kernel: tuple[int, int], packed: bool
) -> None:
    """The call's path (``core.cmsis_nn``): the wrapper's; ``THREE_BY_THREE`` for an int8 3x3
    call of multiplier 1, no dilation, pads of at most 1 and batch 1
    (``arm_depthwise_conv_3x3_s8`` computes one image, padded by at most 1); ``LANES`` where
    ``core.compute.lanes_computes``. ValueError."""
    if params.path == WRAPPER:
        return
    int8 = input.dtype is torch.int8 and not packed
    if params.path == LANES:
        stride, dilation, multiplier = params.stride, params.dilation, params.depth_multiplier
        if int8 and compute.lanes_computes(input.shape, kernel, stride, dilation, multiplier):
            return
    shape = kernel == (3, 3) and params.depth_multiplier == 1 and list(params.dilation) == [1, 1]
    shape = shape and max(params.padding) <= 1
    if params.path != THREE_BY_THREE or not (shape and int8 and input.shape[0] == 1):
        raise ValueError(
            f"depthwise_conv2d path {params.path}: 0 (the wrapper's); 1 "
            "(arm_depthwise_conv_3x3_s8) for an int8 3x3 call of multiplier 1, no dilation, "
            "pads of at most 1 and batch 1; 2 (depthwise_conv_lanes_s8) for an int8 3x3 call of "
            "multiplier 1, no dilation, stride 1 or 2 across and a multiple of 4 channels"
        )


def _fake(input: torch.Tensor, weight: torch.Tensor, *arguments: Any) -> torch.Tensor:
    params = ConvParams.of("depthwise_conv2d", arguments)
    oh, ow = params.output_hw(input.shape[1:3], weight.shape[1:3])
    dtype = torch.int16 if input.dtype is torch.int16 else torch.int8
    c_out = weight.shape[3] * (2 if weight.dtype is torch.uint8 else 1)
    return input.new_empty((input.shape[0], oh, ow, c_out), dtype=dtype)


@define_operator(
    "depthwise_conv2d",
    "Tensor input, Tensor weight, Tensor bias, Tensor multipliers, Tensor shifts, int[] stride,"
    " int[] padding, int[] dilation, int depth_multiplier, int input_offset, int output_offset,"
    " int activation_min, int activation_max, int path, int scratch_bytes",
    _fake,
    scratch=True,
)
def depthwise_conv2d(
    input: torch.Tensor, weight: torch.Tensor, *arguments: Any, rounding: Rounding
) -> torch.Tensor:
    """Reference ``arm_depthwise_conv_s8``: NHWC int8 in, [1, KH, KW, Cout] weights;
    ``arguments`` as the schema lists them after the weight."""
    params = ConvParams.of("depthwise_conv2d", arguments)
    weight, packed = int4.logical_weight(weight)
    params.check(input, weight)
    _, kh, kw, c_out = weight.shape
    params.check_forward_window((kh, kw))
    int16 = input.dtype is torch.int16
    if packed:
        if int16 or input.shape[3] % 2:
            raise ValueError(
                "int4 depthwise weights take int8 activations and an even input channel count"
            )
    elif int16:
        params.check_s16()
        if max(*input.shape, c_out) > S16_DIM_MAX:
            raise ValueError(f"int16 depthwise dims above {S16_DIM_MAX} (CMSIS-NN's int16 counts)")
    check_path(params, input, (kh, kw), packed)
    lanes = params.path == LANES  # our kernel pads any end
    if not (packed or int16 or lanes or three_by_three_pads(params, (kh, kw))):
        raise ValueError(
            f"padding {params.padding}: a 3x3 depthwise convolution pads each end by at most 1"
        )
    c_in, depth_multiplier = input.shape[3], params.depth_multiplier
    if weight.shape[0] != 1 or depth_multiplier < 1 or c_out != c_in * depth_multiplier or c_in < 2:
        raise ValueError(
            f"weight {tuple(weight.shape)} does not match {c_in} input channels (at least 2: "
            f"one is an ordinary convolution) with depth multiplier {depth_multiplier}"
        )
    windows = params.windows(input, (kh, kw))
    source = torch.arange(c_out) // depth_multiplier
    windows = windows.index_select(3, source)  # [N, OH, OW, Cout, KH, KW]
    kernel = weight[0].to(torch.int64).permute(2, 0, 1)  # [Cout, KH, KW]
    return params.finish((windows * kernel).sum(dim=(-2, -1)), rounding, input.dtype)
