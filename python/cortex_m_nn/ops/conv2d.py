"""``cortex_m_nn::conv2d``: int8 NHWC convolution with per-channel requantization.

Reference for ``arm_convolve_wrapper_s8`` (all its fast paths compute the same numbers):
accumulate ``(x + input_offset) * w`` in int32 over the receptive field, add the bias,
requantize per output channel (:func:`~cortex_m_nn.ops.arithmetic.requantize`), add
``output_offset`` and clamp to ``[activation_min, activation_max]``.

Layouts: input ``[N, H, W, Cin]``, weight ``[Cout, KH, KW, Cin / groups]`` (OHWI),
bias/multipliers/shifts ``[Cout]`` (per output channel, grouped or not).

Groups are CMSIS-NN's: implied by the shapes, ``groups = Cin / weight.shape[3]`` (1: an
ordinary convolution), both ``Cin`` and ``Cout`` divisible by it; output channel ``o`` belongs
to group ``o // (Cout / groups)`` and reads that group's input channels only. The wrapper sends
every grouped convolution to ``arm_convolve_s8`` (its 1x1 and 1xN paths need
``Cin == weight.shape[3]``), which computes groups on MVE, DSP and scalar alike (on MVE
without precomputed kernel sums: its matrix product applies the input offset itself).

``padding`` is ``[pad_h, pad_w]`` on both sides, or ``[top, left, bottom, right]`` where an
end unlike its start pads less than the kernel's extent (TensorFlow's SAME at an even extent,
a patch-based stage's strips: CMSIS-NN takes the top/left pad and reads past the bottom/right
edge as far as the output dims make it); a
padded element acts as an input equal to ``-input_offset`` (the input zero point), so it
contributes nothing. The output size follows PyTorch:
``(H + top + bottom - dilation * (K - 1) - 1) // stride + 1``.
``input_offset`` is ``-input_zero_point``, ``output_offset`` is ``output_zero_point``.

int16 activations are the other case (``arm_convolve_wrapper_s16``, which only calls
``arm_convolve_s16``): int16 input and output, zero points 0, an int64 bias, no groups, and
the output stage ``arm_nn_requantize_s64`` (:func:`check_s16` lists the bounds that make
every ISA's sum exact). One configuration is refused: with more than 512 columns
(``KH * KW * Cin``) not a multiple of 4, an odd ``Cout`` and two or more output pixels, the
DSP kernel ``arm_nn_mat_mult_kernel_s16`` resets its odd-channel tail with the wrong count
(``docs/int16.md``, hazard 2).

``path`` picks the CMSIS-NN function of an int8 call, with the same numbers
(``core.cmsis_nn``): 0 the wrapper's choice, 1 ``arm_convolve_1x1_s8`` for a 1x1 convolution
without padding, dilation or groups — one output row at a time, so its output may take the
bytes of input rows already read on every ISA (``plan.overlap``), where the DSP and scalar
wrapper's ``arm_convolve_1x1_s8_fast`` walks the whole image once per pair of output channels.

int4 weights are the third case (``arm_convolve_wrapper_s4``; on MVE a 1xN convolution calls
``arm_convolve_s4`` itself, since the wrapper's 1xN path fails some shapes without falling
back, ``docs/int4.md``): a uint8 weight ``[Cout, KH, KW * Cin / 2]`` of packed pairs
(:mod:`cortex_m_nn.ops.int4`), int8 activations, no groups. The arithmetic is the s8 one.
"""

from __future__ import annotations

from typing import Any

import torch

from cortex_m_nn.core.cmsis_nn import POINTWISE, ROWS, WINDOW, WRAPPER
from cortex_m_nn.ops import int4
from cortex_m_nn.ops.arithmetic import Rounding
from cortex_m_nn.ops.library import define_operator
from cortex_m_nn.ops.params import ConvParams, int16_sums_fit, output_size

__all__ = ["conv2d", "groups_of", "output_size"]


def groups_of(in_channels: int, per_group: int, out_channels: int) -> int:
    """``in_channels / per_group`` (the weight's channels); ValueError unless both channel
    counts divide into that many groups."""
    if per_group < 1 or in_channels % per_group or out_channels % (in_channels // per_group):
        raise ValueError(
            f"input has {in_channels} channels, weight expects {per_group} per group: not "
            f"{out_channels} output channels in whole groups"
        )
    return in_channels // per_group


def _fake(input: torch.Tensor, weight: torch.Tensor, *arguments: Any) -> torch.Tensor:
    window = int4.conv_window(weight, input.shape[3])
    oh, ow = ConvParams.of("conv2d", arguments).output_hw(input.shape[1:3], window)
    dtype = torch.int16 if input.dtype is torch.int16 else torch.int8
    return input.new_empty((input.shape[0], oh, ow, weight.shape[0]), dtype=dtype)


@define_operator(
    "conv2d",
    "Tensor input, Tensor weight, Tensor bias, Tensor multipliers, Tensor shifts, int[] stride,"
    " int[] padding, int[] dilation, int input_offset, int output_offset, int activation_min,"
    " int activation_max, int path, int scratch_bytes",
    _fake,
    scratch=True,
)
def conv2d(
    input: torch.Tensor, weight: torch.Tensor, *arguments: Any, rounding: Rounding
) -> torch.Tensor:
    """Reference ``arm_convolve_s8``: NHWC int8 in, OHWI int8 weights, NHWC int8 out;
    ``arguments`` as the schema lists them after the weight."""
    params = ConvParams.of("conv2d", arguments)
    weight, packed = int4.logical_weight(weight, input.shape[3] if input.dim() == 4 else 0)
    params.check(input, weight)
    c_out, kh, kw, per_group = weight.shape
    if packed and (input.dtype is not torch.int8 or per_group != input.shape[3]):
        raise ValueError("int4 weights take int8 activations and no groups (arm_convolve_s4)")
    params.check_forward_window((kh, kw))
    groups = groups_of(input.shape[3], per_group, c_out)
    check_path(params, input, (kh, kw), per_group, packed)
    if input.dtype is torch.int16:
        check_s16(params, input, weight)
    windows = params.windows(input, (kh, kw))  # [N, OH, OW, Cin, KH, KW]
    windows = windows.unflatten(3, (groups, per_group))
    kernel = weight.to(torch.int64).unflatten(0, (groups, c_out // groups))
    acc = torch.einsum("nhwgckl,goklc->nhwgo", windows, kernel).flatten(3)
    return params.finish(acc, rounding, input.dtype)


def check_path(
    params: ConvParams, input: torch.Tensor, kernel: tuple[int, int], per_group: int, packed: bool
) -> None:
    """The call's path (``core.cmsis_nn``): the wrapper's, ``ROWS`` for an int8 1x1
    convolution without padding, dilation or groups (``arm_convolve_1x1_s8``), ``POINTWISE``
    for one of stride 1 too (our ``pointwise_conv_s8``), or ``WINDOW`` for an int8 convolution
    without groups (our ``window_conv_s8``; off MVE it also needs a multiple of 4 input
    channels, ``core.compute.window_computes``). ValueError."""
    if params.path == WRAPPER:
        return
    one_by_one = kernel == (1, 1) and not any(params.padding) and list(params.dilation) == [1, 1]
    int8 = input.dtype is torch.int8 and not packed and per_group == input.shape[3]
    unit = list(params.stride) == [1, 1]
    allowed = {ROWS: one_by_one, POINTWISE: one_by_one and unit, WINDOW: True}
    if not (int8 and allowed.get(params.path, False)):
        raise ValueError(
            f"conv2d path {params.path}: 0 (the wrapper's), 1 (arm_convolve_1x1_s8) for an "
            "int8 1x1 convolution without padding, dilation or groups, 2 (pointwise_conv_s8) "
            "for one of stride 1, or 3 (window_conv_s8) for an int8 convolution without groups"
        )


def check_s16(params: ConvParams, input: torch.Tensor, weight: torch.Tensor) -> None:
    """The int16 case's bounds (:meth:`ConvParams.check_s16`, no groups, CMSIS-NN's DSP tail
    defect avoided) and no output channel whose int32 partial sums could wrap: CMSIS-NN sums
    the first 512 products of a window in int32 (the non-MVE single-pixel path all of them);
    with ``sum |w| * 2^15 < 2^31`` every path's sum is the exact one. ValueError."""
    params.check_s16()
    if not int16_sums_fit(weight):
        raise ValueError(
            "an output channel's weights could wrap CMSIS-NN's int32 partial sums of int16 "
            "inputs (sum |w| * 2^15 >= 2^31)"
        )
    c_out, kh, kw, per_group = weight.shape
    if per_group != input.shape[3]:
        raise ValueError("the int16 convolution has no groups (arm_convolve_s16)")
    oh, ow = params.output_hw(input.shape[1:3], (kh, kw))
    if dsp_tail_defect(kh * kw * per_group, c_out, oh * ow):
        raise ValueError(
            "int16 convolution with more than 512 columns not a multiple of 4, odd output "
            "channels and several output pixels: CMSIS-NN's DSP kernel miscomputes it"
        )


def dsp_tail_defect(columns: int, out_channels: int, pixels: int) -> bool:
    """Whether ``arm_nn_mat_mult_kernel_s16`` (two pixels at a time, non-MVE) would reach its
    defective odd-channel tail."""
    return columns > 512 and columns % 4 != 0 and out_channels % 2 == 1 and pixels >= 2
