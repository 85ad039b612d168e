"""Scratch-buffer sizes in bytes, from CMSIS-NN's own ``*_get_buffer_size*`` functions.

The numbers come from the CMSIS-NN Python binding shipped in the ExecuTorch wheel, asking for
the code path (MVE, DSP or scalar) of the target's ISA, so they match what the kernels built
for that target request. All shapes are CMSIS-NN's: activations NHWC, conv weights OHWI,
depthwise weights ``[1, KH, KW, Cout]``, linear weights ``[out, in]``.

A grouped convolution (weight ``[Cout, KH, KW, Cin / groups]``) is asked for as it is: the
wrapper sends it to ``arm_convolve_s8``, whose getter sizes the im2col from ``input_dims->c``
(all input channels), more than one group's columns take; the kernel checks the same getter.

Note: for a 1x1, stride-1, unpadded convolution the DSP path needs ``4 * Cin`` bytes only when
CMSIS-NN is compiled with Arm Compiler 6; the binding (and GCC builds) report 0.

Transposed convolution needs two buffers, planned here as one (see
:class:`TransposeConvScratch`). ``arm_transpose_conv_s8_get_buffer_size`` sizes the rolling
buffer's width with ``max(KW, stride_h)`` where the kernel uses ``max(KW, stride_w)``; the
larger of the getter and the kernel's own formula is planned.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from executorch.backends.cortex_m.library._cmsis_nn import cmsis_nn

from cortex_m_nn.core.cmsis_nn import mve_one_by_n_inexact
from cortex_m_nn.core.target import Isa, Target
from cortex_m_nn.ops.params import sides

_BACKENDS = {
    Isa.MVE: cmsis_nn.Backend.MVE,
    Isa.DSP: cmsis_nn.Backend.DSP,
    Isa.SCALAR: cmsis_nn.Backend.SCALAR,
}


def _backend(target: Target) -> cmsis_nn.Backend:
    return _BACKENDS[target.isa]


def _four(shape: Sequence[int], what: str) -> list[int]:
    if len(shape) != 4:
        raise ValueError(f"{what} must be 4-D, got {list(shape)}")
    return [int(d) for d in shape]


def _two(values: Sequence[int], what: str) -> list[int]:
    if len(values) != 2:
        raise ValueError(f"{what} must have two entries (h, w), got {list(values)}")
    return [int(v) for v in values]


def _window(*shapes_and_geometry: Sequence[int]) -> dict[str, list[int]]:
    """The keyword arguments both convolution buffer-size getters take, checked, from
    (input NHWC, weight, output NHWC, stride, padding, dilation)."""
    input_nhwc, weight, output_nhwc, stride, padding, dilation = shapes_and_geometry
    return {
        "input_nhwc": _four(input_nhwc, "input shape"),
        "filter_nhwc": _four(weight, "weight shape"),
        "output_nhwc": _four(output_nhwc, "output shape"),
        "padding_hw": [int(p) for p in sides(padding)[:2]],  # CMSIS-NN takes the top/left
        "stride_hw": _two(stride, "stride"),
        "dilation_hw": _two(dilation, "dilation"),
    }


def conv2d_scratch_bytes(
    target: Target,
    input_shape_nhwc: Sequence[int],
    weight_shape_ohwi: Sequence[int],
    output_shape_nhwc: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    int16: bool = False,
    int4: bool = False,
) -> int:
    """Bytes ``arm_convolve_wrapper_s8`` (``int16``: ``arm_convolve_wrapper_s16``; ``int4``:
    ``arm_convolve_wrapper_s4``) needs for this convolution on ``target`` (the weight shape
    logical, OHWI).

    On MVE a 1xN convolution ``arm_convolve_1_x_n_s8`` would not compute exactly (see
    :func:`mve_one_by_n_inexact`) runs ``arm_convolve_s8`` itself; its getter is asked
    for through the wrapper's, with a dilation that steers the wrapper to that path (the
    getter does not read the dilation). The s16 wrapper has one path, ``arm_convolve_s16``.
    With int4 weights every 1xN convolution takes the general path (``op_conv2d.cpp``), its
    size asked for the same way.
    """
    shapes = (input_shape_nhwc, weight_shape_ohwi, output_shape_nhwc)
    window = _window(*shapes, stride, padding, dilation)
    if int4:
        if is_one_by_n(*shapes, stride, padding, dilation):
            window["dilation_hw"] = [int(dilation[0]), 2]
        return int(
            cmsis_nn.convolve_wrapper_buffer_size(
                _backend(target), cmsis_nn.DataType.A8W4, **window
            )
        )
    if (
        not int16
        and target.isa is Isa.MVE
        and mve_one_by_n_inexact(*shapes, stride, padding, dilation)
    ):
        window["dilation_hw"] = [1, 2]
    data_type = cmsis_nn.DataType.A16W8 if int16 else cmsis_nn.DataType.A8W8
    return int(cmsis_nn.convolve_wrapper_buffer_size(_backend(target), data_type, **window))


def is_one_by_n(
    input_nhwc: Sequence[int],
    weight_ohwi: Sequence[int],
    output_nhwc: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
) -> bool:
    """CMSIS-NN's ``arm_nn_is_convolve_1_x_n`` and not ``arm_nn_is_convolve_1x1``."""
    pad_h, pad_w = (int(p) for p in sides(padding)[:2])
    _, kh, kw, c = (int(d) for d in weight_ohwi)
    c_in = int(input_nhwc[3])
    one_by_one = (pad_h, pad_w, kh, kw, *dilation) == (0, 0, 1, 1, 1, 1) and c_in == c
    one_by_n = (
        int(input_nhwc[1]) == 1
        and int(dilation[1]) == 1
        and kh == 1
        and (int(stride[1]) * c_in) % 4 == 0
        and c_in == c
    )
    return one_by_n and not one_by_one


def depthwise_conv2d_scratch_bytes(
    target: Target,
    input_shape_nhwc: Sequence[int],
    weight_shape_1hwc: Sequence[int],
    output_shape_nhwc: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
    depth_multiplier: int | None = None,
    int16: bool = False,
    int4: bool = False,
) -> int:
    """Bytes ``arm_depthwise_conv_wrapper_s8`` (``int16``: ``_s16``; ``int4``: ``_s4``) needs
    for this convolution on ``target`` (the weight shape logical).

    ``depth_multiplier`` defaults to output channels // input channels.
    """
    if depth_multiplier is None:
        depth_multiplier = int(output_shape_nhwc[3]) // int(input_shape_nhwc[3])
    shapes = (input_shape_nhwc, weight_shape_1hwc, output_shape_nhwc)
    window = _window(*shapes, stride, padding, dilation)
    if int4 and target.isa is Isa.MVE:
        return 0  # op_depthwise_conv2d.cpp: the generic arm_depthwise_conv_s4 on MVE
    data_type = cmsis_nn.DataType.A16W8 if int16 else cmsis_nn.DataType.A8W8
    data_type = cmsis_nn.DataType.A8W4 if int4 else data_type
    return int(
        cmsis_nn.depthwise_conv_wrapper_buffer_size(
            _backend(target), data_type, **window, ch_mult=int(depth_multiplier)
        )
    )


def linear_scratch_bytes(
    target: Target, input_shape: Sequence[int], weight_shape: Sequence[int]
) -> int:
    """Bytes ``arm_fully_connected_s8`` needs (MVE: the per-row kernel sums) on ``target``.

    ``input_shape`` is accepted for symmetry and checked against the weight; CMSIS-NN sizes
    the buffer from the weight alone (filter dims ``n`` = in features, ``c`` = out features).
    """
    if len(weight_shape) != 2:
        raise ValueError(f"linear weight must be [out, in], got {list(weight_shape)}")
    out_features, in_features = (int(d) for d in weight_shape)
    if len(input_shape) < 1 or int(input_shape[-1]) != in_features:
        raise ValueError(f"input {list(input_shape)} does not match weight {list(weight_shape)}")
    return int(
        cmsis_nn.fully_connected_buffer_size(
            _backend(target),
            cmsis_nn.DataType.A8W8,
            filter_nhwc=[in_features, 1, 1, out_features],
        )
    )


def avg_pool2d_scratch_bytes(
    target: Target,
    input_shape_nhwc: Sequence[int],
    output_shape_nhwc: Sequence[int],
    int16: bool = False,
) -> int:
    """Bytes ``arm_avgpool_s8`` (``int16``: ``_s16``) needs (DSP: one int32 sum per channel)
    on ``target``."""
    channels = _four(input_shape_nhwc, "input shape")[3]
    output_width = _four(output_shape_nhwc, "output shape")[2]
    return int(
        cmsis_nn.avgpool_buffer_size(
            _backend(target),
            cmsis_nn.DataType.A16W8 if int16 else cmsis_nn.DataType.A8W8,
            dim_dst_width=output_width,
            ch_src=channels,
        )
    )


@dataclass(frozen=True)
class TransposeConvScratch:
    """``arm_transpose_conv_wrapper_s8``'s two buffers, placed one after the other.

    ``ctx`` (the rolling int32 buffer, or the reverse-conv path's im2col buffer) comes first, at
    offset 0, rounded up to 4 bytes; ``reverse_conv_ctx`` (the reversed filter, 0 bytes outside
    the reverse-conv path) starts at ``reverse_conv_offset``.
    """

    buffer_bytes: int
    reverse_conv_bytes: int

    @property
    def reverse_conv_offset(self) -> int:
        return max(4, (self.buffer_bytes + 3) // 4 * 4)

    @property
    def total_bytes(self) -> int:
        return self.reverse_conv_offset + self.reverse_conv_bytes


def transpose_conv2d_scratch(
    target: Target,
    input_shape_nhwc: Sequence[int],
    weight_shape_ohwi: Sequence[int],
    output_shape_nhwc: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
) -> TransposeConvScratch:
    """Both buffers ``arm_transpose_conv_wrapper_s8`` needs for this layer on ``target``."""
    common = _window(
        input_shape_nhwc, weight_shape_ohwi, output_shape_nhwc, stride, padding, (1, 1)
    )
    output_nhwc = common.pop("output_nhwc")  # the reverse-convolution getter does not take it
    input_nhwc, filter_nhwc, stride_hw = (
        common[k] for k in ("input_nhwc", "filter_nhwc", "stride_hw")
    )
    backend = _backend(target)
    buffer = int(
        cmsis_nn.transpose_conv_buffer_size(
            backend, cmsis_nn.DataType.A8W8, output_nhwc=output_nhwc, **common
        )
    )
    reverse = int(
        cmsis_nn.transpose_conv_reverse_conv_buffer_size(backend, cmsis_nn.DataType.A8W8, **common)
    )
    if reverse == 0:  # arm_transpose_conv_s8: max(KH, sh) rows of the rolling int32 buffer
        width = (input_nhwc[2] - 1) * stride_hw[1] + max(filter_nhwc[2], stride_hw[1])
        rows = max(filter_nhwc[1], stride_hw[0])
        buffer = max(buffer, rows * width * output_nhwc[3] * 4)
    return TransposeConvScratch(buffer, reverse)


def batch_matmul_scratch_bytes(target: Target, rhs_transposed_shape: Sequence[int]) -> int:
    """Bytes ``arm_batch_matmul_s8`` needs (MVE: one int32 kernel sum per rhs row).

    CMSIS-NN documents ``arm_fully_connected_s8_get_buffer_size`` for it, with the rhs
    ``[..., N, K]`` as the filter (``n`` = K columns, ``c`` = N rows).
    """
    if len(rhs_transposed_shape) < 2:
        raise ValueError(f"rhs must be [..., N, K], got {list(rhs_transposed_shape)}")
    rows, columns = (int(d) for d in rhs_transposed_shape[-2:])
    return int(
        cmsis_nn.fully_connected_buffer_size(
            _backend(target), cmsis_nn.DataType.A8W8, filter_nhwc=[columns, 1, 1, rows]
        )
    )
