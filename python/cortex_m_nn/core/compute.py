"""Our own compute functions (``kernels/compute``, ``cortex_m_nn/compute.h``): the calls each
computes and the buffer it takes, mirrored from its C++ so that the compiler plans the same
bytes the kernel reads. Torch-free.

``depthwise_conv_lanes_s8`` (``depthwise_conv2d``'s ``LANES`` path): an int8 3x3 depthwise
convolution of multiplier 1, no dilation, stride 1 or 2 across, a multiple of 4 channels. On
MVE its buffer holds the current block of four channels' first sum (16 bytes) and weights (36
bytes), then the input rows a tile of output rows reads, gathered a word (four channels) per
column: ``(tile - 1) * stride_h + 3`` rows of ``(out_w - 1) * stride_w + 3`` words. The kernel
computes the tallest tile its buffer holds and writes the output a tile at a time
(``plan.overlap``); with less than one row's tile (tile 0, no buffer at all) each group of four
output pixels gathers its own window into 160 bytes of stack, output rows in order. Other ISAs
(DSP, and the host build): per block of four channels, its rows gathered as four planes of
int16, so the buffer holds four planes of ``(tile - 1) * stride_h + 3`` rows of
:func:`planar_width` int16; with no buffer each output row of each channel gathers its rows into
240 bytes of stack.

``pointwise_conv_s8`` (``conv2d``'s ``POINTWISE`` path): an int8 1x1 convolution of stride 1
without padding, dilation or groups. Off MVE it widens a pair of pixels' inputs to int16, four
bytes per input channel; on MVE it gathers a quad of pixels' inputs, 64 bytes per 16 input
channels (:func:`quad_bytes`); either on the stack up to :data:`STACK_DEPTH` input channels (no
buffer), else into its buffer. It reads each pair (quad) before writing it, so its output may
start where its input does (``plan.overlap``; on MVE with up to :data:`QUAD_BLOCK` output
channels, which it computes in one block).

``window_conv_s8`` (``conv2d``'s ``WINDOW`` path): an int8 convolution without groups, any
window, stride, padding and dilation, off MVE of a multiple of 4 input channels. Its buffer
holds a pair of output pixels' windows widened to int16, four bytes per weight of an output
channel (what ``arm_convolve_s8`` takes off MVE); on MVE a quad's windows, 64 bytes per 16
weights of an output channel (what ``arm_convolve_s8`` takes on MVE).
"""

from __future__ import annotations

from collections.abc import Sequence

from cortex_m_nn.core.target import Isa

KERNEL = 3  #: the window the lanes kernel computes, both ways
BLOCK_BYTES = 16 + 36  #: a block's first sum and weights, at the buffer's start


def lanes_computes(
    input_nhwc: Sequence[int],
    kernel_hw: Sequence[int],
    stride: Sequence[int],
    dilation: Sequence[int],
    depth_multiplier: int,
) -> bool:
    """Whether ``depthwise_conv_lanes_s8`` computes this int8 depthwise call."""
    window = tuple(int(k) for k in kernel_hw) == (KERNEL, KERNEL)
    plain = [int(d) for d in dilation] == [1, 1] and int(depth_multiplier) == 1
    return window and plain and int(stride[1]) in (1, 2) and int(input_nhwc[3]) % 4 == 0


def _padded(out_w: int, stride_w: int) -> int:
    return (out_w - 1) * stride_w + KERNEL


def _rows(tile: int, stride_h: int) -> int:
    return (tile - 1) * stride_h + KERNEL


def planar_width(out_w: int, stride_w: int) -> int:
    """The int16 columns of a row gathered off MVE: the window's padded columns and one more,
    even (``planar_width`` in ``depthwise_conv_lanes_planar.h``)."""
    return (_padded(out_w, stride_w) + 2) // 2 * 2


def lanes_buffer_bytes(
    isa: Isa, output_nhwc: Sequence[int], stride: Sequence[int], tile: int
) -> int:
    """The buffer of a tile of ``tile`` output rows (at most the output's height; 0: none,
    windows gathered on the stack) on ``isa`` (``depthwise_conv_lanes_s8_get_buffer_size``)."""
    if tile < 1:
        return 0
    _, out_h, out_w, _ = (int(d) for d in output_nhwc)
    rows = _rows(min(tile, out_h), int(stride[0]))
    if isa is not Isa.MVE:
        return 8 * rows * planar_width(out_w, int(stride[1]))
    return BLOCK_BYTES + 4 * rows * _padded(out_w, int(stride[1]))


def lanes_tile(isa: Isa, output_nhwc: Sequence[int], stride: Sequence[int], buffer: int) -> int:
    """The output rows the kernel computes per tile with a buffer of ``buffer`` bytes (0: less
    than a row's tile, a window or a strip at a time)."""
    _, out_h, out_w, _ = (int(d) for d in output_nhwc)
    if isa is Isa.MVE:
        room, padded = (buffer - BLOCK_BYTES) // 4, _padded(out_w, int(stride[1]))
    else:
        room, padded = buffer // 8, planar_width(out_w, int(stride[1]))
    if room < KERNEL * padded:
        return 0
    return min(out_h, (room // padded - KERNEL) // int(stride[0]) + 1)


GROUP = 4  #: the input channels ``pointwise_conv_s8`` widens as one group off MVE
STACK_DEPTH = 64  #: up to this depth ``pointwise_conv_s8`` gathers on the stack (``kStackDepth``)
QUAD_BLOCK = 64  #: the output channels a pixel-quad product computes at a time (``kBlock``)


def quad_bytes(depth: int) -> int:
    """A pixel quad's gathered inputs on MVE (``quads::gathered_bytes``): 64 bytes per 16 of
    ``depth``."""
    return 64 * -(-int(depth) // 16)


def pointwise_computes(
    input_nhwc: Sequence[int],
    weight_ohwi: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    dilation: Sequence[int],
) -> bool:
    """Whether ``pointwise_conv_s8`` computes this int8 convolution."""
    _, kernel_h, kernel_w, per_group = (int(d) for d in weight_ohwi)
    plain = [int(s) for s in stride] == [1, 1] and [int(d) for d in dilation] == [1, 1]
    return (
        (kernel_h, kernel_w) == (1, 1)
        and plain
        and not any(int(p) for p in padding)
        and (per_group == int(input_nhwc[3]))
    )


def pointwise_buffer_bytes(isa: Isa, depth: int) -> int:
    """The buffer of a call of ``depth`` input channels on ``isa``
    (``pointwise_conv_s8_get_buffer_size``): none up to :data:`STACK_DEPTH`."""
    if int(depth) <= STACK_DEPTH:
        return 0
    return quad_bytes(depth) if isa is Isa.MVE else 4 * int(depth)


def window_computes(isa: Isa, input_nhwc: Sequence[int], weight_ohwi: Sequence[int]) -> bool:
    """Whether ``window_conv_s8`` computes this int8 convolution on ``isa``."""
    per_group = int(weight_ohwi[3])
    return per_group == int(input_nhwc[3]) and (isa is Isa.MVE or per_group % GROUP == 0)


def window_buffer_bytes(isa: Isa, weight_ohwi: Sequence[int]) -> int:
    """The buffer of ``window_conv_s8`` on ``isa`` (``window_conv_s8_get_buffer_size``)."""
    _, kernel_h, kernel_w, depth = (int(d) for d in weight_ohwi)
    weights = kernel_h * kernel_w * depth
    return quad_bytes(weights) if isa is Isa.MVE else 4 * weights
