"""The kernel cost model: instructions a depthwise call takes in our ``depthwise_conv_lanes_s8``
and in CMSIS-NN's ``arm_depthwise_conv_wrapper_s8``, per ISA (MVE, measured on the M55; DSP, on
the M33, where the wrapper runs ``arm_depthwise_conv_3x3_s8``), so that ``plan.paths`` gives a
call our kernel only where it is faster for that shape on that core; our matrix products'
models (``plan.product_costs``) read theirs from the same file.

Each estimate is a sum of counts that follow the function's loops (:func:`lanes_counts`,
:func:`wrapper_counts`), each weighed by instructions per count fitted to measurements under
QEMU: ``kernel_costs.json`` beside this file, one model per ISA, written by
``benchmarks/kernel_costs.py`` (which runs ``tests/target/compute`` on a grid of shapes and
records the fit's worst error).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from cortex_m_nn.core import compute
from cortex_m_nn.core.target import Isa

MODEL = Path(__file__).with_name("kernel_costs.json")

#: CMSIS-NN's MVE depthwise kernel copies windows for at most this many channels at a time
MVE_CHANNEL_BLOCK = 124
#: ours is chosen only where expected below this share of CMSIS-NN's instructions: the fit's
#: error near the crossing is a few percent
MARGIN = 0.95

LANES_COUNTS = [
    "calls", "blocks", "gathered_rows", "gathers", "groups", "singles", "row_blocks", "windows",
]  # fmt: skip
WRAPPER_COUNTS = ["calls", "tap_copies", "copied_vectors", "group_blocks", "pixel_chunks"]
PLANAR_COUNTS = [
    "calls", "blocks", "gathered_rows", "gathered_pairs", "pad_columns", "channel_tiles",
    "passes", "lines", "groups", "singles", "outputs", "strips", "strip_columns",
]  # fmt: skip
THREE_BY_THREE_COUNTS = ["calls", "pixels", "pixel_blocks", "block_rows", "block_taps"]
#: the output pixels of a strip of the planar kernel with no buffer, by stride across
#: (``kPixels`` in ``depthwise_conv_lanes_planar.h``)
STRIP_PIXELS = {1: 36, 2: 18}
#: the sums a pass of the planar kernel keeps on the stack (``kChunk``)
CHUNK = 32


def lanes_counts(
    input_nhwc: Sequence[int], output_nhwc: Sequence[int], stride: Sequence[int], tile: int
) -> list[float]:
    """The counts of ``depthwise_conv_lanes_s8``'s loops: the call, the blocks of four
    channels prepared (once a tile), rows gathered and vector gathers, four-pixel groups and
    single pixels computed, output rows of a block, and (tile 0: no buffer) windows gathered."""
    batch, _, in_w, channels = (int(d) for d in input_nhwc)
    _, out_h, out_w, _ = (int(d) for d in output_nhwc)
    blocks = channels // 4
    tiles, rows = 0, 0
    for first in range(0, out_h, max(tile, 1)):
        count = min(max(tile, 1), out_h - first)
        tiles += 1
        rows += (count - 1) * int(stride[0]) + compute.KERNEL
    padded = (out_w - 1) * int(stride[1]) + compute.KERNEL
    row_blocks = batch * out_h * blocks
    groups, singles = row_blocks * (out_w // 4), row_blocks * (out_w % 4)
    if tile < 1:
        counts = [1, row_blocks, 0, 0, groups, singles, row_blocks, groups + singles]
    else:
        gathered = batch * blocks * rows
        gathers = gathered * math.ceil(min(in_w, padded) / 4)
        counts = [1, batch * blocks * tiles, gathered, gathers, groups, singles, row_blocks, 0]
    return [float(c) for c in counts]


def planar_counts(
    input_nhwc: Sequence[int], output_nhwc: Sequence[int], stride: Sequence[int], tile: int
) -> list[float]:
    """The counts of ``depthwise_conv_lanes_s8``'s loops off MVE (``PLANAR_COUNTS``): per
    tile, the blocks of four channels gathered, their rows, column pairs and pad columns, each
    channel's taps, the passes of sums and requantization, the output rows, four-pixel groups,
    single pixels and outputs of those passes; with no buffer, the strips and their gathered
    columns."""
    batch, _, in_w, channels = (int(d) for d in input_nhwc)
    _, out_h, out_w, _ = (int(d) for d in output_nhwc)
    stride_h, stride_w = int(stride[0]), int(stride[1])
    blocks = channels // 4
    outputs = batch * out_h * out_w * channels
    counts = dict.fromkeys(PLANAR_COUNTS, 0)
    counts.update(calls=1, outputs=outputs)
    if tile < 1:
        pixels = STRIP_PIXELS[stride_w]
        strips = [min(pixels, out_w - x) for x in range(0, out_w, pixels)]
        lines = batch * out_h * channels
        counts.update(channel_tiles=lines, strips=lines * len(strips), passes=lines * len(strips))
        counts.update(lines=lines * len(strips))
        counts.update(strip_columns=lines * sum(compute.KERNEL * compute.planar_width(n, stride_w)
                                                for n in strips))  # fmt: skip
        counts.update(groups=lines * sum(n // 4 for n in strips))
        counts.update(singles=lines * sum(n % 4 for n in strips))
        return [float(counts[name]) for name in PLANAR_COUNTS]
    width = compute.planar_width(out_w, stride_w)
    tiles, gathered, passes = 0, 0, 0
    for first in range(0, out_h, tile):
        count = min(tile, out_h - first)
        tiles += 1
        gathered += (count - 1) * stride_h + compute.KERNEL
        per_pass = CHUNK // out_w
        passes += -(-count // per_pass) if per_pass else count * -(-out_w // CHUNK)
    inside = min(in_w, width)
    counts.update(blocks=batch * blocks * tiles, gathered_rows=batch * blocks * gathered)
    counts.update(gathered_pairs=batch * blocks * gathered * (inside // 2 + inside % 2))
    counts.update(pad_columns=batch * blocks * gathered * (width - inside))
    counts.update(channel_tiles=batch * channels * tiles, passes=batch * channels * passes)
    lines = batch * channels * out_h
    counts.update(lines=lines, groups=lines * (out_w // 4), singles=lines * (out_w % 4))
    return [float(counts[name]) for name in PLANAR_COUNTS]


def three_by_three_counts(
    input_nhwc: Sequence[int],
    output_nhwc: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
) -> list[float]:
    """The counts of ``arm_depthwise_conv_3x3_s8``'s loops (the DSP wrapper's path for a 3x3
    call of multiplier 1, pads of at most 1, one image): the call, the output pixels, their
    blocks of four channels, and the window rows and taps inside the input those blocks read."""
    _, in_h, in_w, channels = (int(d) for d in input_nhwc)
    _, out_h, out_w, _ = (int(d) for d in output_nhwc)
    top, left = int(padding[0]), int(padding[1])
    rows = [
        min(compute.KERNEL, in_h - (y * int(stride[0]) - top)) - max(0, top - y * int(stride[0]))
        for y in range(out_h)
    ]
    columns = [
        1 + (x * int(stride[1]) >= left) + (in_w - (x * int(stride[1]) - left) >= 3)
        for x in range(out_w)
    ]
    pixels = out_h * out_w
    blocks = channels // 4
    return [1.0, float(pixels), float(pixels * blocks), float(blocks * sum(rows) * out_w),
            float(blocks * sum(rows) * sum(columns))]  # fmt: skip


def wrapper_counts(input_nhwc: Sequence[int], output_nhwc: Sequence[int]) -> list[float]:
    """The counts of ``arm_depthwise_conv_s8_opt``'s loops on MVE (the wrapper's path for
    multiplier 1 without dilation): the call, the window copies (one per tap, pixel and block
    of 124 channels), the vectors they copy, the four-pixel groups of four channels, and the
    pixels of each block of 124 channels."""
    batch, _, _, channels = (int(d) for d in input_nhwc)
    _, out_h, out_w, _ = (int(d) for d in output_nhwc)
    pixels = batch * out_h * out_w
    chunks = math.ceil(channels / MVE_CHANNEL_BLOCK)
    copies = pixels * compute.KERNEL * compute.KERNEL * chunks
    vectors = pixels * compute.KERNEL * compute.KERNEL * math.ceil(channels / 16)
    groups = math.ceil(pixels / 4) * math.ceil(channels / 4)
    return [1.0, float(copies), float(vectors), float(groups), float(pixels * chunks)]


def ours_counts(
    isa: Isa,
    input_nhwc: Sequence[int],
    output_nhwc: Sequence[int],
    stride: Sequence[int],
    tile: int,
) -> list[float]:
    """The counts of ``depthwise_conv_lanes_s8``'s loops on ``isa`` (:data:`COUNT_NAMES`)."""
    if isa is Isa.MVE:
        return lanes_counts(input_nhwc, output_nhwc, stride, tile)
    return planar_counts(input_nhwc, output_nhwc, stride, tile)


def theirs_counts(
    isa: Isa,
    input_nhwc: Sequence[int],
    output_nhwc: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
) -> list[float]:
    """The counts of the loops of the function ``arm_depthwise_conv_wrapper_s8`` runs on
    ``isa`` (:data:`COUNT_NAMES`)."""
    if isa is Isa.MVE:
        return wrapper_counts(input_nhwc, output_nhwc)
    return three_by_three_counts(input_nhwc, output_nhwc, stride, padding)


#: ISA → the names of :func:`ours_counts` and of :func:`theirs_counts`
COUNT_NAMES = {
    Isa.MVE: (LANES_COUNTS, WRAPPER_COUNTS),
    Isa.DSP: (PLANAR_COUNTS, THREE_BY_THREE_COUNTS),
}


@cache
def _models() -> dict[str, dict]:
    return json.loads(MODEL.read_text())


def _weights(isa: Isa, function: str) -> list[float]:
    return _models()[isa.value][function]["instructions_per_count"]


def modelled(isa: Isa, function: str | None = None) -> bool:
    """Whether the cost model has measurements of ``isa`` (of ``function``'s model, if
    given)."""
    found = _models().get(isa.value)
    return found is not None and (function is None or function in found)


def instructions(isa: Isa, function: str, counts: Sequence[float]) -> float:
    """The instructions ``function``'s model on ``isa`` expects for its loops' ``counts``."""
    return sum(w * c for w, c in zip(_weights(isa, function), counts, strict=True))


def lanes_instructions(
    isa: Isa,
    input_nhwc: Sequence[int],
    output_nhwc: Sequence[int],
    stride: Sequence[int],
    tile: int,
) -> float:
    """The instructions ``depthwise_conv_lanes_s8`` is expected to take on ``isa``."""
    return instructions(isa, "lanes", ours_counts(isa, input_nhwc, output_nhwc, stride, tile))


def wrapper_instructions(
    isa: Isa,
    input_nhwc: Sequence[int],
    output_nhwc: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
) -> float:
    """The instructions ``arm_depthwise_conv_wrapper_s8`` is expected to take on ``isa``."""
    counts = theirs_counts(isa, input_nhwc, output_nhwc, stride, padding)
    return instructions(isa, "wrapper", counts)


def lanes_faster(
    isa: Isa,
    input_nhwc: Sequence[int],
    output_nhwc: Sequence[int],
    stride: Sequence[int],
    padding: Sequence[int],
    tile: int,
) -> bool:
    """Whether ``depthwise_conv_lanes_s8`` with ``tile`` is expected to take fewer
    instructions than the wrapper on ``isa``, by :data:`MARGIN`."""
    ours = lanes_instructions(isa, input_nhwc, output_nhwc, stride, tile)
    return ours < MARGIN * wrapper_instructions(isa, input_nhwc, output_nhwc, stride, padding)
