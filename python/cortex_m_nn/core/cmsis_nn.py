"""Which CMSIS-NN code path a call takes: its dtype case (:class:`Case`, which the lowering
records on each report row and the precision searches read), the CMSIS-NN function each
operator's kernel calls for each case (:data:`FUNCTIONS`: the rules name it from here, and a
test finds each in its kernel's source), and where the shape, not only the dtype and ISA,
decides (:func:`mve_one_by_n_inexact`: the lowering's scratch sizing, the
prepared-call table and the kernels, ``op_conv2d.cpp``, must agree on it). Torch-free: the
firmware steps (``cortex-m-compile embed``) read it.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence


class Case(str, enum.Enum):
    """The dtype case of a CMSIS-NN call, as its functions' suffixes name it."""

    S8 = "s8"  #: int8 activations, int8 weights (if any)
    S16 = "s16"  #: int16 activations, int8 weights (if any)
    S4 = "s4"  #: int8 activations, packed int4 weights

    def __str__(self) -> str:
        return self.value


S8, S16, S4 = Case.S8, Case.S16, Case.S4

#: (operator, case) → the CMSIS-NN functions its kernel (``kernels/op_<operator>.cpp``) calls
#: for that case: the usual one first, then those a shape, the ISA or a path selects (named
#: where the rule decides: a 1xN int4 convolution, int4 depthwise on MVE, per-channel int8
#: linear; an int8 convolution's variant ``path``), or one of our own compute functions that
#: stands in for them (``core.compute``).
FUNCTIONS: dict[tuple[str, Case], tuple[str, ...]] = {
    ("conv2d", S8): (
        "arm_convolve_wrapper_s8",
        "arm_convolve_1x1_s8",
        "pointwise_conv_s8",  # ours: kernels/compute (core.compute)
        "window_conv_s8",  # ours
    ),
    ("conv2d", S16): ("arm_convolve_wrapper_s16",),
    ("conv2d", S4): ("arm_convolve_wrapper_s4", "arm_convolve_s4"),
    ("depthwise_conv2d", S8): (
        "arm_depthwise_conv_wrapper_s8",
        "arm_depthwise_conv_3x3_s8",
        "depthwise_conv_lanes_s8",  # ours: kernels/compute (core.compute)
    ),
    ("depthwise_conv2d", S16): ("arm_depthwise_conv_wrapper_s16",),
    ("depthwise_conv2d", S4): ("arm_depthwise_conv_wrapper_s4", "arm_depthwise_conv_s4"),
    ("linear", S8): (
        "arm_fully_connected_s8",
        "arm_fully_connected_per_channel_s8",
        "fully_connected_quads_s8",  # ours: kernels/compute
    ),
    ("linear", S16): ("arm_fully_connected_s16",),
    ("linear", S4): ("arm_fully_connected_s4",),
    ("add", S8): ("arm_elementwise_add_s8",),
    ("add", S16): ("arm_elementwise_add_s16",),
    ("mul", S8): ("arm_elementwise_mul_s8",),
    ("mul", S16): ("arm_elementwise_mul_s16",),
    ("batch_matmul", S8): ("arm_batch_matmul_s8",),
    ("batch_matmul", S16): ("arm_batch_matmul_s16",),
    ("avg_pool2d", S8): ("arm_avgpool_s8",),
    ("avg_pool2d", S16): ("arm_avgpool_s16",),
    ("max_pool2d", S8): ("arm_max_pool_s8",),
    ("max_pool2d", S16): ("arm_max_pool_s16",),
    ("softmax", S8): ("arm_softmax_s8",),
    ("softmax", S16): ("arm_softmax_s16",),
    ("masked_softmax", S8): ("arm_softmax_s8",),
    ("lstm", S8): ("arm_lstm_unidirectional_s8",),
    ("lstm", S16): ("arm_lstm_unidirectional_s16",),
    # ours: CMSIS-NN has no GRU; its LSTM's building blocks, this one for the gate products
    ("gru", S8): ("arm_nn_vec_mat_mul_result_acc_s8_s16",),
}


#: A convolution's ``path`` argument: which CMSIS-NN function computes an int8 call. The
#: compiler chooses it per call (``plan.paths``, ``plan.strips``); its kernel case runs it.
WRAPPER = 0  #: the wrapper's own choice by shape and ISA (every case)
#: conv2d, a 1x1 convolution: ``arm_convolve_1x1_s8``, one output row at a time (row-major
#: where the DSP and scalar wrapper walks the whole image once per pair of output channels)
ROWS = 1
#: conv2d, a 1x1 convolution of stride 1: our ``pointwise_conv_s8`` (``core.compute``), faster
#: than CMSIS-NN's matrix product off MVE for the shapes ``plan.paths`` picks it for
POINTWISE = 2
#: conv2d, input channels a multiple of 4, no groups: our ``window_conv_s8`` (``core.compute``),
#: faster than CMSIS-NN's ``arm_convolve_s8`` off MVE for the shapes ``plan.paths`` picks it for
WINDOW = 3
#: linear, int8 per tensor: our ``fully_connected_quads_s8`` (``core.compute``), faster than
#: ``arm_fully_connected_s8`` off MVE for the shapes ``plan.paths`` picks it for
QUADS = 1
#: depthwise_conv2d, 3x3: ``arm_depthwise_conv_3x3_s8`` on every ISA (no scratch; MVE's
#: wrapper takes ``arm_depthwise_conv_s8_opt`` and its 4 x 124 x 9-byte buffer)
THREE_BY_THREE = 1
#: depthwise_conv2d, 3x3: our ``depthwise_conv_lanes_s8`` (``core.compute``), faster than
#: CMSIS-NN's functions on MVE for the shapes ``plan.paths`` picks it for
LANES = 2


def cmsis_function(operator: str, case: Case, variant: int = 0) -> str:
    """The CMSIS-NN function ``operator``'s kernel calls for ``case``: the usual one, or the
    ``variant``-th a shape or the ISA selects (:data:`FUNCTIONS`)."""
    return FUNCTIONS[operator, case][variant]


def mve_one_by_n_inexact(*shapes_and_window: Sequence[int]) -> bool:
    """Whether CMSIS-NN's MVE ``arm_convolve_1_x_n_s8`` would fail or miscompute this
    convolution, given as (input NHWC, weight OHWI, output NHWC, stride, padding, dilation);
    the kernel (``op_conv2d.cpp``, the same test) then calls ``arm_convolve_s8`` directly.

    The wrapper takes a 1xN convolution (input height 1, kernel height 1, dilation 1,
    ``stride_w * Cin`` a multiple of 4, not grouped, not an unpadded 1x1) to that path. It
    fails unless ``2 * pad + total % 2 == total`` (``total``: the padding the output length
    implies), and it computes three sections from buffers it fills: the left-padded windows from
    ``pad`` pads and the first ``kernel`` inputs, the unpadded ones from the input, the
    right-padded ones from the last ``kernel - 1`` inputs and pads. That is exact only when
    every window of a section reads inside its buffer and the first right-padded window starts
    ``kernel - 1`` before the input's end (PyTorch's kernel 5, stride 2, padding 2 on length 9
    does not: its last window holds two pads).
    """
    input_shape_nhwc, weight_shape_ohwi, output_shape_nhwc, stride, padding, dilation = (
        shapes_and_window
    )
    _, in_h, in_w, in_c = (int(d) for d in input_shape_nhwc)
    _, k_h, k, k_c = (int(d) for d in weight_shape_ohwi)
    out_w = int(output_shape_nhwc[2])
    stride_w, pad, dilation_w = int(stride[1]), int(padding[1]), int(dilation[1])
    unpadded = (int(padding[0]), pad) == (0, 0)
    undilated = (int(dilation[0]), dilation_w) == (1, 1)
    one_by_one = (k_h, k) == (1, 1) and unpadded and undilated and in_c == k_c
    one_by_n = in_h == 1 and k_h == 1 and dilation_w == 1 and (stride_w * in_c) % 4 == 0
    if one_by_one or not (one_by_n and in_c == k_c):
        return False
    return not _one_by_n_exact(in_w, k, out_w, stride_w, pad)


def _one_by_n_exact(in_w: int, k: int, out_w: int, stride: int, pad: int) -> bool:
    """The sections of ``arm_convolve_1_x_n_s8`` (see :func:`mve_one_by_n_inexact`), in C's
    integer arithmetic."""
    total = (out_w - 1) * stride + k - in_w
    asym = int(math.fmod(total, 2))  # C's remainder: -1 for a total of -1
    if pad * 2 + asym != total:
        return False  # CMSIS-NN fails the call
    right = max(1, (pad + asym + stride - 1) // stride) if pad + asym != 0 else 0
    left = max(1, (pad + stride - 1) // stride) if pad != 0 else 0
    middle = max(out_w - (right + left), 0)
    if right + middle + left != out_w:
        return True  # CMSIS-NN calls arm_convolve_s8 itself
    if k > in_w or (left and (left - 1) * stride - pad + k > in_w):
        return False  # the left section copies k inputs; its windows end inside the input
    if middle and (left * stride - pad < 0 or (left + middle - 1) * stride - pad + k > in_w):
        return False
    if right:
        first = (left + middle) * stride - pad
        pads = right if asym else pad
        return first + k - 1 == in_w and (right - 1) * stride + 1 <= pads
    return True
