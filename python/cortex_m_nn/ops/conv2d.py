"""``cortex_m_nn::conv2d``: int8 NHWC convolution with per-channel requantization.

Reference for ``arm_convolve_wrapper_s8`` (all its fast paths compute the same numbers):
accumulate ``(x + input_offset) * w`` in int32 over the receptive field, add the bias,
requantize per output channel (:func:`~cortex_m_nn.ops.arithmetic.requantize`), add
``output_offset`` and clamp to ``[activation_min, activation_max]``.

Layouts: input ``[N, H, W, Cin]``, weight ``[Cout, KH, KW, Cin]`` (OHWI), bias/multipliers/
shifts ``[Cout]``. ``padding`` is ``[pad_h, pad_w]`` on both sides; a padded element acts as
an input equal to ``-input_offset`` (the input zero point), so it contributes nothing. The
output size follows PyTorch: ``(H + 2 * pad - dilation * (K - 1) - 1) // stride + 1``.
``input_offset`` is ``-input_zero_point``, ``output_offset`` is ``output_zero_point``.
"""

from __future__ import annotations

import torch

from cortex_m_nn.ops.arithmetic import active_rounding, requantize, wrap_int32
from cortex_m_nn.ops.library import define_operator


def output_size(size: int, kernel: int, stride: int, padding: int, dilation: int) -> int:
    """Output extent of a padded, strided, dilated window along one dimension."""
    return (size + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1


def patches(
    input: torch.Tensor,
    kernel: tuple[int, int],
    stride: list[int],
    padding: list[int],
    dilation: list[int],
    pad_value: int = 0,
) -> torch.Tensor:
    """Windows of an NHWC tensor as ``[N, OH, OW, C, KH, KW]`` (a view of the padded input)."""
    pad_h, pad_w = padding
    padded = torch.nn.functional.pad(input, (0, 0, pad_w, pad_w, pad_h, pad_h), value=pad_value)
    span_h = dilation[0] * (kernel[0] - 1) + 1
    span_w = dilation[1] * (kernel[1] - 1) + 1
    windows = padded.unfold(1, span_h, stride[0]).unfold(2, span_w, stride[1])
    return windows[..., :: dilation[0], :: dilation[1]]


def finish(
    acc: torch.Tensor,
    multipliers: torch.Tensor | int,
    shifts: torch.Tensor | int,
    output_offset: int,
    activation_min: int,
    activation_max: int,
) -> torch.Tensor:
    """int32 accumulators (bias added) → requantize, add the output offset, clamp, int8."""
    out = requantize(wrap_int32(acc), multipliers, shifts, active_rounding()) + output_offset
    return out.clamp(activation_min, activation_max).to(torch.int8)


def check_conv_arguments(
    input: torch.Tensor,
    weight: torch.Tensor,
    stride: list[int],
    padding: list[int],
    dilation: list[int],
) -> None:
    if input.dim() != 4 or weight.dim() != 4:
        raise ValueError(
            f"expected 4-D input and weight, got {tuple(input.shape)} and {tuple(weight.shape)}"
        )
    for name, value in (("stride", stride), ("padding", padding), ("dilation", dilation)):
        if len(value) != 2:
            raise ValueError(f"{name} must have two entries (h, w), got {list(value)}")
    if min(*stride, *dilation) < 1 or min(padding) < 0:
        raise ValueError(f"invalid stride {stride}, padding {padding} or dilation {dilation}")


def _fake(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    multipliers: torch.Tensor,
    shifts: torch.Tensor,
    stride: list[int],
    padding: list[int],
    dilation: list[int],
    input_offset: int,
    output_offset: int,
    activation_min: int,
    activation_max: int,
) -> torch.Tensor:
    n, h, w, _ = input.shape
    c_out, kh, kw, _ = weight.shape
    oh = output_size(h, kh, stride[0], padding[0], dilation[0])
    ow = output_size(w, kw, stride[1], padding[1], dilation[1])
    return input.new_empty((n, oh, ow, c_out), dtype=torch.int8)


@define_operator(
    "conv2d",
    "Tensor input, Tensor weight, Tensor bias, Tensor multipliers, Tensor shifts, int[] stride,"
    " int[] padding, int[] dilation, int input_offset, int output_offset, int activation_min,"
    " int activation_max, int scratch_bytes",
    _fake,
    scratch=True,
)
def conv2d(
    input: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    multipliers: torch.Tensor,
    shifts: torch.Tensor,
    stride: list[int],
    padding: list[int],
    dilation: list[int],
    input_offset: int,
    output_offset: int,
    activation_min: int,
    activation_max: int,
) -> torch.Tensor:
    """Reference ``arm_convolve_s8``: NHWC int8 in, OHWI int8 weights, NHWC int8 out."""
    check_conv_arguments(input, weight, stride, padding, dilation)
    c_out, kh, kw, c_in = weight.shape
    if input.shape[3] != c_in:
        raise ValueError(f"input has {input.shape[3]} channels, weight expects {c_in}")
    shifted = input.to(torch.int64) + input_offset
    windows = patches(shifted, (kh, kw), stride, padding, dilation)
    acc = torch.einsum("nhwckl,oklc->nhwo", windows, weight.to(torch.int64))
    acc = acc + bias.to(torch.int64)
    return finish(
        acc,
        multipliers.to(torch.int64),
        shifts.to(torch.int64),
        output_offset,
        activation_min,
        activation_max,
    )
