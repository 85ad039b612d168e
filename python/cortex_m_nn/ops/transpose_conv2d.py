"""``cortex_m_nn::transpose_conv2d``: int8 NHWC transposed convolution, per-channel requantization.

Reference for ``arm_transpose_conv_wrapper_s8``. Definition (PyTorch's, with dilation 1 and one
group): every input pixel ``(iy, ix)`` scatters ``(x + input_offset) * w[o, ky, kx, :]`` onto
output pixel ``(iy * stride_h + ky - pad_h, ix * stride_w + kx - pad_w)``; the int32 sums start
from the bias, are requantized per output channel, get ``output_offset`` and are clamped.

The wrapper runs one of two algorithms, chosen from ``stride`` and the input channels
(:func:`uses_reverse_conv`): a stride <= 2 layer with more than 16 input channels runs as
``arm_convolve_s8`` over the zero-upsampled input with the filter reversed; every other layer
runs ``arm_transpose_conv_s8``, which scatters input rows into a rolling int32 buffer. Both
compute the definition only for some paddings and output sizes (found by reading the C code and
checked against a host build of it); :func:`unsupported_reason` names the rest, and the
reference refuses them rather than compute numbers the kernel would not.

C++ kernel mapping (``arm_transpose_conv_wrapper_s8``):

* ``input`` ``[N, H, W, Cin]`` → ``input_dims`` ``{N, H, W, Cin}``, ``input_data``.
* ``weight`` ``[Cout, KH, KW, Cin]`` (PyTorch's ``[Cin, Cout, KH, KW]`` permuted (1, 2, 3, 0) at
  compile time) → ``filter_dims`` ``{Cout, KH, KW, Cin}``, ``filter_data``.
* ``bias`` ``[Cout]`` int32 (always present) → ``bias_data``; ``bias_dims`` ``{1, 1, 1, Cout}``
  (unused by CMSIS-NN).
* ``multipliers``/``shifts`` ``[Cout]`` → ``cmsis_nn_per_channel_quant_params``.
* ``stride``/``padding`` ``[h, w]`` → ``transpose_conv_params.stride``/``.padding``;
  ``.dilation = {1, 1}``, ``.padding_offsets = {0, 0}`` (unused by the s8 kernels).
* ``input_offset``, ``output_offset``, ``activation_min``/``max`` → the same-named fields.
* ``output_padding`` only sizes the output: ``output_dims`` ``{N, OH, OW, Cout}`` is the out
  tensor's shape, ``OH = (H - 1) * stride_h - 2 * pad_h + KH + output_padding_h``.
* ``scratch`` holds both CMSIS-NN buffers: ``ctx = {scratch, reverse_conv_offset}`` and
  ``reverse_conv_ctx = {scratch + reverse_conv_offset, scratch_bytes - reverse_conv_offset}``
  (the reversed filter; size 0 when the wrapper does not take the reverse-conv path).
  ``reverse_conv_offset`` is a multiple of 4 and never 0 (the wrapper rejects a NULL ``ctx``).
"""

from __future__ import annotations

from typing import Any

import torch

from cortex_m_nn.ops.arithmetic import Rounding
from cortex_m_nn.ops.library import define_operator
from cortex_m_nn.ops.params import ConvParams

#: CMSIS-NN's REVERSE_TCOL_EFFICIENT_THRESHOLD: more input channels than this (and stride <= 2)
#: make the wrapper run the reverse-conv path.
REVERSE_CONV_MIN_CHANNELS = 17


def output_size(size: int, kernel: int, stride: int, padding: int, output_padding: int) -> int:
    """Output extent along one dimension (PyTorch's formula, dilation 1)."""
    return (size - 1) * stride - 2 * padding + kernel + output_padding


def uses_reverse_conv(stride: list[int], in_channels: int) -> bool:
    """Whether ``arm_transpose_conv_wrapper_s8`` runs the reverse-conv (arm_convolve_s8) path."""
    return max(stride) <= 2 and in_channels >= REVERSE_CONV_MIN_CHANNELS


def unsupported_reason(
    input_hw: tuple[int, int],
    in_channels: int,
    kernel: tuple[int, int],
    stride: list[int],
    padding: list[int],
    output_padding: list[int],
) -> str | None:
    """Why CMSIS-NN would not compute this transposed convolution exactly, or None.

    Reverse-conv path: it convolves with padding ``K - 1 - pad``, so ``pad <= K - 1``.
    ``arm_transpose_conv_s8``: each buffer row holds ``(W - 1) * s + max(K, s)`` columns, so
    ``pad + out`` must fit: ``output_padding <= pad`` or ``K + output_padding - pad <= s``
    (both dimensions). Rows: the main loop flushes ``H * s - pad`` rows without bounds checks,
    so ``s + pad <= K + output_padding``, and the leftover rows are addressed from ``H * s``,
    so ``pad <= H * s``.
    """
    for axis, name in enumerate(("height", "width")):
        k, s, p, op = kernel[axis], stride[axis], padding[axis], output_padding[axis]
        if output_size(input_hw[axis], k, s, p, op) < 1:
            return f"empty output {name}"
        if uses_reverse_conv(stride, in_channels):
            if p > k - 1:
                return f"padding {p} > kernel {name} - 1 (CMSIS-NN reverse-conv path)"
            continue
        if op > p and k + op - p > s:
            return (
                f"output_padding {op} > padding {p} in {name} (CMSIS-NN computes no rows or "
                "columns beyond the full transposed-convolution extent)"
            )
        if axis == 0 and s + p > k + op:
            return f"stride {s} + padding {p} > kernel {k} + output_padding {op} in height"
        if axis == 0 and p > input_hw[0] * s:
            return f"padding {p} > input height * stride in height"
    return None


def _check(input: torch.Tensor, weight: torch.Tensor, params: ConvParams) -> None:
    params.check(input, weight)
    if input.shape[3] != weight.shape[3]:
        raise ValueError(f"input has {input.shape[3]} channels, weight expects {weight.shape[3]}")
    stride, padding = params.stride, params.padding
    output_padding = params.check_window("output_padding")
    if min(stride) < 1 or min(padding) < 0 or min(output_padding) < 0:
        raise ValueError(f"invalid stride {stride}, padding {padding} or output_padding")
    reason = unsupported_reason(
        (int(input.shape[1]), int(input.shape[2])),
        int(input.shape[3]),
        (int(weight.shape[1]), int(weight.shape[2])),
        stride,
        padding,
        output_padding,
    )
    if reason is not None:
        raise ValueError(f"transpose_conv2d not computed exactly by CMSIS-NN: {reason}")


def _output_hw(input: torch.Tensor, weight: torch.Tensor, params: ConvParams) -> tuple[int, int]:
    stride, padding, output_padding = params.stride, params.padding, params.output_padding
    return (
        output_size(input.shape[1], weight.shape[1], stride[0], padding[0], output_padding[0]),
        output_size(input.shape[2], weight.shape[2], stride[1], padding[1], output_padding[1]),
    )


def _fake(input: torch.Tensor, weight: torch.Tensor, *arguments: Any) -> torch.Tensor:
    oh, ow = _output_hw(input, weight, ConvParams.of("transpose_conv2d", arguments))
    return input.new_empty((input.shape[0], oh, ow, weight.shape[0]), dtype=torch.int8)


@define_operator(
    "transpose_conv2d",
    "Tensor input, Tensor weight, Tensor bias, Tensor multipliers, Tensor shifts, int[] stride,"
    " int[] padding, int[] output_padding, int input_offset, int output_offset,"
    " int activation_min, int activation_max, int reverse_conv_offset, int scratch_bytes",
    _fake,
    scratch=True,
)
def transpose_conv2d(
    input: torch.Tensor, weight: torch.Tensor, *arguments: Any, rounding: Rounding
) -> torch.Tensor:
    """Reference ``arm_transpose_conv_wrapper_s8``: NHWC int8 in, OHWI int8 weights, NHWC out;
    ``arguments`` as the schema lists them after the weight."""
    params = ConvParams.of("transpose_conv2d", arguments)
    _check(input, weight, params)
    n, h, w, _ = input.shape
    c_out, kh, kw, _ = weight.shape
    stride, padding = params.stride, params.padding
    oh, ow = _output_hw(input, weight, params)
    # Every input pixel times every filter tap: [N, H, W, KH, KW, Cout].
    taps = torch.einsum(
        "nhwc,oklc->nhwklo", input.to(torch.int64) + params.input_offset, weight.to(torch.int64)
    )
    # Scatter onto the uncropped output, large enough for the padding rows and columns too.
    full_h = max((h - 1) * stride[0] + kh, padding[0] + oh)
    full_w = max((w - 1) * stride[1] + kw, padding[1] + ow)
    full = torch.zeros((n, full_h, full_w, c_out), dtype=torch.int64)
    rows = (h - 1) * stride[0] + 1
    cols = (w - 1) * stride[1] + 1
    for ky in range(kh):
        for kx in range(kw):
            full[:, ky : ky + rows : stride[0], kx : kx + cols : stride[1]] += taps[:, :, :, ky, kx]
    return params.finish(
        full[:, padding[0] : padding[0] + oh, padding[1] : padding[1] + ow], rounding
    )
