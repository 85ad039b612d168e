"""The kernel cost model: instructions a depthwise call takes on MVE (M55) in our
``depthwise_conv_lanes_s8`` and in CMSIS-NN's ``arm_depthwise_conv_wrapper_s8``, so that
``plan.paths`` gives a call our kernel only where it is faster for that shape.

Each estimate is a sum of counts that follow the function's loops (:func:`lanes_counts`,
:func:`wrapper_counts`), each weighed by instructions per count fitted to measurements under
QEMU: ``kernel_costs.json`` beside this file, written by ``benchmarks/kernel_costs.py`` (which
runs ``tests/target/compute`` on a grid of shapes and records the fit's worst error).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from functools import cache
from pathlib import Path

from cortex_m_nn.core import compute

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


@cache
def _weights() -> dict[str, list[float]]:
    data = json.loads(MODEL.read_text())
    return {name: data[name]["instructions_per_count"] for name in ("lanes", "wrapper")}


def lanes_instructions(
    input_nhwc: Sequence[int], output_nhwc: Sequence[int], stride: Sequence[int], tile: int
) -> float:
    """The instructions ``depthwise_conv_lanes_s8`` is expected to take on MVE."""
    counts = lanes_counts(input_nhwc, output_nhwc, stride, tile)
    return sum(w * c for w, c in zip(_weights()["lanes"], counts, strict=True))


def wrapper_instructions(input_nhwc: Sequence[int], output_nhwc: Sequence[int]) -> float:
    """The instructions ``arm_depthwise_conv_wrapper_s8`` is expected to take on MVE."""
    counts = wrapper_counts(input_nhwc, output_nhwc)
    return sum(w * c for w, c in zip(_weights()["wrapper"], counts, strict=True))


def lanes_faster(
    input_nhwc: Sequence[int], output_nhwc: Sequence[int], stride: Sequence[int], tile: int
) -> bool:
    """Whether ``depthwise_conv_lanes_s8`` with ``tile`` is expected to take fewer
    instructions than the wrapper, by :data:`MARGIN`."""
    ours = lanes_instructions(input_nhwc, output_nhwc, stride, tile)
    return ours < MARGIN * wrapper_instructions(input_nhwc, output_nhwc)
