"""The cost models of our matrix products (``kernels/compute``) and of the CMSIS-NN functions
they stand in for, per ISA, so that ``plan.paths`` gives a call ours only where it is faster
for that shape on that core:

- on DSP (measured on the M33): ``pointwise_conv_s8`` against the wrapper's
  ``arm_convolve_1x1_s8_fast``, ``window_conv_s8`` against ``arm_convolve_s8`` (each a
  pixel-pair product), ``fully_connected_quads_s8`` against ``arm_fully_connected_s8``
  (``arm_nn_vec_mat_mult_t_s8``);
- on MVE (measured on the M55): the same three against the same functions' MVE code, ours
  a pixel-quad product (``pixel_quads.h``) and a four-feature one.

Each estimate is a sum of counts that follow the function's loops, each weighed by
instructions per count fitted to measurements under QEMU (``plan.costs.MODEL``, written by
``benchmarks/kernel_costs.py``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cortex_m_nn.core import compute
from cortex_m_nn.core.target import Isa
from cortex_m_nn.plan import costs

POINTWISE_COUNTS = ["calls", "channels", "pixel_pairs", "widened_groups", "blocks", "block_groups"]
ONE_BY_ONE_COUNTS = [
    "calls", "channel_pairs", "offset_sums", "blocks", "block_chunks", "block_quads",
    "odd_row_quads", "odd_channel_quads",
]  # fmt: skip


def pointwise_counts(input_nhwc: Sequence[int], channels: int) -> list[float]:
    """The counts of ``pointwise_conv_s8``'s loops (``POINTWISE_COUNTS``) for a call of
    ``channels`` output channels whose depth is a multiple of four: the call, its output
    channels (each checked for the fast rounding), its pixel pairs and the groups of four
    inputs they widen, the blocks (a pair of output channels on a pixel
    pair: the sums, their requantization and stores) and the groups those blocks multiply."""
    batch, height, width, depth = (int(d) for d in input_nhwc)
    pairs = -(-batch * height * width // 2)
    groups = depth // compute.GROUP
    blocks = pairs * -(-int(channels) // 2)
    return [
        1.0, float(channels), float(pairs), float(pairs * groups), float(blocks),
        float(blocks * groups),
    ]  # fmt: skip


def one_by_one_counts(input_nhwc: Sequence[int], channels: int) -> list[float]:
    """The counts of the loops of ``arm_nn_mat_mult_nt_t_s8`` off MVE (what
    ``arm_convolve_1x1_s8_fast`` runs, for a depth that is a multiple of four;
    ``ONE_BY_ONE_COUNTS``): the call, the output channel pairs and the weights each sums for the
    input offset, the blocks of two pixels by two channels with their chunks of 16 inputs and
    quads of four after them, an odd last pixel's and an odd last channel's quads."""
    batch, height, width, depth = (int(d) for d in input_nhwc)
    pixels, pairs = batch * height * width, int(channels) // 2
    blocks = pairs * (pixels // 2)
    chunks, quads = depth // 16, depth % 16 // 4
    return [
        1.0, float(pairs), float(pairs * depth), float(blocks), float(blocks * chunks),
        float(blocks * quads), float(pixels % 2 * pairs * depth // 4),
        float(int(channels) % 2 * pixels * depth // 4),
    ]  # fmt: skip


WINDOW_COUNTS = [
    "calls", "channels", "pixel_pairs", "taps", "widened_groups", "blocks", "block_groups",
]  # fmt: skip
CONVOLVE_COUNTS = [
    "calls", "pixels", "taps", "pixel_quads", "blocks", "block_quads", "odd_pixel_quads",
    "odd_channel_quads",
]  # fmt: skip


def window_counts(weight_ohwi: Sequence[int], output_nhwc: Sequence[int]) -> list[float]:
    """The counts of ``window_conv_s8``'s loops (``WINDOW_COUNTS``): the call, its output
    channels, its pixel pairs, the taps they gather and the groups of four inputs they widen,
    the blocks (a pair of output channels on a pixel pair) and the groups those multiply."""
    channels, kernel_h, kernel_w, depth = (int(d) for d in weight_ohwi)
    batch, out_h, out_w, _ = (int(d) for d in output_nhwc)
    pairs = -(-batch * out_h * out_w // 2)
    groups = kernel_h * kernel_w * depth // compute.GROUP
    blocks = pairs * -(-channels // 2)
    return [
        1.0, float(channels), float(pairs), float(pairs * kernel_h * kernel_w),
        float(pairs * groups), float(blocks), float(blocks * groups),
    ]  # fmt: skip


def convolve_counts(weight_ohwi: Sequence[int], output_nhwc: Sequence[int]) -> list[float]:
    """The counts of ``arm_convolve_s8``'s loops off MVE (``CONVOLVE_COUNTS``): the call, the
    output pixels, the taps each copies and its quads of inputs widened to int16, the blocks of
    two pixels by two channels (``arm_nn_mat_mult_kernel_s8_s16``) with their quads of inputs,
    an odd last pixel's and an odd last channel's quads."""
    channels, kernel_h, kernel_w, depth = (int(d) for d in weight_ohwi)
    batch, out_h, out_w, _ = (int(d) for d in output_nhwc)
    pixels = batch * out_h * out_w
    quads = kernel_h * kernel_w * depth // 4
    blocks = pixels // 2 * (channels // 2)
    return [
        1.0, float(pixels), float(pixels * kernel_h * kernel_w), float(pixels * quads),
        float(blocks), float(blocks * quads), float(pixels % 2 * channels * quads),
        float(channels % 2 * (pixels // 2) * quads),
    ]  # fmt: skip


QUADS_COUNTS = ["calls", "rows", "quads", "quad_groups", "tail_products", "channel_outputs"]
VEC_MAT_COUNTS = [
    "calls", "rows", "pairs", "pair_groups", "odd_groups", "tail_products", "channel_outputs",
]  # fmt: skip


def _linear_shape(input_shape: Sequence[int], weight_shape: Sequence[int]) -> tuple[int, ...]:
    """(rows, in features, out features) of a linear call."""
    features, depth = (int(d) for d in weight_shape)
    return math.prod(int(d) for d in input_shape) // depth, depth, features


def quads_counts(
    input_shape: Sequence[int], weight_shape: Sequence[int], per_channel: bool = False
) -> list[float]:
    """The counts of ``fully_connected_quads_s8``'s loops (``QUADS_COUNTS``): the call, its input
    rows, their quads of output features and the quads' groups of four inputs, the products
    of the last in_features % 4 inputs, and (``per_channel``) the outputs requantized each
    with its own multiplier and shift."""
    rows, depth, features = _linear_shape(input_shape, weight_shape)
    quads = rows * -(-features // 4)
    return [1.0, float(rows), float(quads), float(quads * (depth // 4)),
            float(rows * features * (depth % 4)), float(per_channel * rows * features)]  # fmt: skip


def vec_mat_counts(
    input_shape: Sequence[int], weight_shape: Sequence[int], per_channel: bool = False
) -> list[float]:
    """The counts of ``arm_nn_vec_mat_mult_t_s8``'s loops off MVE (its ``_per_ch`` form when
    ``per_channel``; ``VEC_MAT_COUNTS``): the call, its rows, their pairs of output features and
    the pairs' groups of four inputs, an odd last feature's groups, the products of the last
    in_features % 4 inputs, and the outputs requantized per channel."""
    rows, depth, features = _linear_shape(input_shape, weight_shape)
    pairs = rows * (features // 2)
    odd = rows * (features % 2) * (depth // 4)
    return [1.0, float(rows), float(pairs), float(pairs * (depth // 4)), float(odd),
            float(rows * features * (depth % 4)), float(per_channel * rows * features)]  # fmt: skip


CHUNK = 16  #: inputs one MVE vector multiplies


def _chunks(depth: int) -> int:
    return -(-int(depth) // CHUNK)


QUAD_COUNTS = [
    "calls", "weight_chunks", "quads", "gathered_pieces", "gathered_rows", "pairs",
    "pair_chunks", "pair_tails", "odd_chunks",
]  # fmt: skip


def _quad_counts(pixels: int, depth: int, channels: int, pieces: int, rows: int) -> list[float]:
    """The counts of a pixel-quad product's loops (``QUAD_COUNTS``) for ``pixels`` outputs of
    ``depth`` weights into ``channels``: the call, the weights summed for the requantization
    table, the quads of every block of 64 channels and the ``pieces`` (predicated copies) and
    ``rows`` (copies of a window row, or a pixel) each pixel's gather takes, the channel pairs
    and their chunks of 16 inputs (the last one predicated where depth % 16), and an odd last
    channel's chunks, in C."""
    blocks = [min(compute.QUAD_BLOCK, channels - f) for f in range(0, channels, compute.QUAD_BLOCK)]
    quads = -(-pixels // 4)
    pairs = quads * sum(b // 2 for b in blocks)
    odd = quads * sum(b % 2 for b in blocks)
    return [
        1.0, float(channels * _chunks(depth)), float(quads * len(blocks)),
        float(quads * len(blocks) * 4 * pieces), float(quads * len(blocks) * 4 * rows),
        float(pairs), float(pairs * (depth // CHUNK)), float(pairs * (depth % CHUNK > 0)),
        float(odd * _chunks(depth)),
    ]  # fmt: skip


def pointwise_quad_counts(input_nhwc: Sequence[int], channels: int) -> list[float]:
    """``pointwise_conv_s8``'s counts on MVE (``QUAD_COUNTS``): a pixel's gather is one row of
    ``depth`` inputs."""
    batch, height, width, depth = (int(d) for d in input_nhwc)
    return _quad_counts(batch * height * width, depth, int(channels), _chunks(depth), 1)


def window_quad_counts(weight_ohwi: Sequence[int], output_nhwc: Sequence[int]) -> list[float]:
    """``window_conv_s8``'s counts on MVE (``QUAD_COUNTS``): a pixel's gather is a copy per
    window row (of ``kernel_w * depth`` inputs, the pieces it spans; a tap at a time at the
    input's edges, which the fit absorbs)."""
    channels, kernel_h, kernel_w, depth = (int(d) for d in weight_ohwi)
    batch, out_h, out_w, _ = (int(d) for d in output_nhwc)
    row = kernel_w * depth
    pieces = sum(((k * row) % CHUNK + row + CHUNK - 1) // CHUNK for k in range(kernel_h))
    pixels = batch * out_h * out_w
    return _quad_counts(pixels, kernel_h * row, channels, pieces, kernel_h)


MAT_MULT_COUNTS = ["calls", "column_quads", "column_quad_chunks", "columns", "column_chunks"]


def _mat_mult_counts(pixels: int, depth: int, channels: int) -> list[float]:
    """``arm_nn_mat_mult_nt_t_s8``'s counts on MVE: four rows (pixels) by one column (output
    channel) with their chunks of 16, then the last pixels % 4 rows a column at a time."""
    quads, rest = (pixels // 4) * channels, (pixels % 4) * channels
    return [1.0, float(quads), float(quads * _chunks(depth)), float(rest),
            float(rest * _chunks(depth))]  # fmt: skip


def one_by_one_mve_counts(input_nhwc: Sequence[int], channels: int) -> list[float]:
    """``arm_convolve_1x1_s8_fast``'s counts on MVE (``MAT_MULT_COUNTS``): one product over
    the input."""
    batch, height, width, depth = (int(d) for d in input_nhwc)
    return _mat_mult_counts(batch * height * width, depth, int(channels))


CONVOLVE_MVE_COUNTS = ["pixels", "taps", "tap_chunks", "products", *MAT_MULT_COUNTS]


def convolve_mve_counts(weight_ohwi: Sequence[int], output_nhwc: Sequence[int]) -> list[float]:
    """``arm_convolve_s8``'s counts on MVE (``CONVOLVE_MVE_COUNTS``): each output pixel's taps
    copied (or set to the pad) with their chunks of 16, a product call per four pixels, and
    their products' counts."""
    channels, kernel_h, kernel_w, depth = (int(d) for d in weight_ohwi)
    batch, out_h, out_w, _ = (int(d) for d in output_nhwc)
    pixels, taps = batch * out_h * out_w, kernel_h * kernel_w
    product = _mat_mult_counts(pixels, taps * depth, channels)
    return [float(pixels), float(pixels * taps), float(pixels * taps * _chunks(depth)),
            float(-(-pixels // 4)), *product]  # fmt: skip


LINEAR_MVE_COUNTS = [
    "calls", "rows", "quads", "quad_chunks", "singles", "single_chunks", "channel_outputs",
]  # fmt: skip


def linear_mve_counts(
    input_shape: Sequence[int], weight_shape: Sequence[int], per_channel: bool = False
) -> list[float]:
    """The counts of ``fully_connected_quads_s8`` and of ``arm_nn_vec_mat_mult_t_s8`` on MVE
    (``LINEAR_MVE_COUNTS``; both compute four output features at a time): the call, its rows,
    their quads of features and the quads' chunks of 16 inputs, the last features % 4 and
    theirs (ours sums those in C, an input a time), and the outputs requantized per channel."""
    rows, depth, features = _linear_shape(input_shape, weight_shape)
    quads, singles = rows * (features // 4), rows * (features % 4)
    return [1.0, float(rows), float(quads), float(quads * _chunks(depth)), float(singles),
            float(singles * _chunks(depth)), float(per_channel * rows * features)]  # fmt: skip


@dataclass(frozen=True)
class Product:
    """Our matrix product's model and CMSIS-NN's on one ISA: each model's name in the model
    file, its counts (a function of the call's shape) and their names."""

    ours: str
    ours_counts: Callable[..., list[float]]
    ours_names: list[str]
    theirs: str
    theirs_counts: Callable[..., list[float]]
    theirs_names: list[str]


#: ISA → our matrix product → its :class:`Product`, both counts taking the same shape
#: arguments: pointwise (input NHWC, output channels), window (weight OHWI, output NHWC), quads
#: (input, weight [out, in], per channel)
PRODUCTS: dict[Isa, dict[str, Product]] = {
    Isa.DSP: {
        "pointwise": Product("pointwise", pointwise_counts, POINTWISE_COUNTS, "one_by_one",
                             one_by_one_counts, ONE_BY_ONE_COUNTS),
        "window": Product("window", window_counts, WINDOW_COUNTS, "convolve", convolve_counts,
                          CONVOLVE_COUNTS),
        "quads": Product("quads", quads_counts, QUADS_COUNTS, "vec_mat", vec_mat_counts,
                         VEC_MAT_COUNTS),
    },
    Isa.MVE: {
        "pointwise": Product("pointwise", pointwise_quad_counts, QUAD_COUNTS, "one_by_one",
                             one_by_one_mve_counts, MAT_MULT_COUNTS),
        "window": Product("window", window_quad_counts, QUAD_COUNTS, "convolve",
                          convolve_mve_counts, CONVOLVE_MVE_COUNTS),
        "quads": Product("quads", linear_mve_counts, LINEAR_MVE_COUNTS, "vec_mat",
                         linear_mve_counts, LINEAR_MVE_COUNTS),
    },
}  # fmt: skip


def product_modelled(isa: Isa, product: str) -> bool:
    """Whether the cost model has measurements of our ``product`` (:data:`PRODUCTS`) on
    ``isa``."""
    found = PRODUCTS.get(isa, {}).get(product)
    return found is not None and costs.modelled(isa, found.ours)


def product_instructions(isa: Isa, product: str, *shape: object) -> tuple[float, float]:
    """The instructions our ``product`` and the CMSIS-NN function it stands in for are
    expected to take on ``isa`` for a call of ``shape``."""
    found = PRODUCTS[isa][product]
    return (
        costs.instructions(isa, found.ours, found.ours_counts(*shape)),
        costs.instructions(isa, found.theirs, found.theirs_counts(*shape)),
    )


def product_faster(isa: Isa, product: str, *shape: object) -> bool:
    """Whether our ``product`` is expected to take fewer instructions than CMSIS-NN's function
    on ``isa`` for a call of ``shape``, by ``costs.MARGIN`` (false where it is not modelled)."""
    if not product_modelled(isa, product):
        return False
    ours, theirs = product_instructions(isa, product, *shape)
    return ours < costs.MARGIN * theirs
