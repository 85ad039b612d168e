"""Scratch sizes from CMSIS-NN's getters, checked against the C formulas worked by hand."""

from __future__ import annotations

import pytest

from cortex_m_nn.scratch import (
    avg_pool2d_scratch_bytes,
    conv2d_scratch_bytes,
    depthwise_conv2d_scratch_bytes,
    linear_scratch_bytes,
)
from cortex_m_nn.target import Core, Isa, Target

M55 = {isa: Target(Core.M55, isa) for isa in Isa}
CH_IN_BLOCK_MVE = 124  # CMSIS-NN's channel block for the MVE depthwise kernel


def aligned4(n: int) -> int:
    return (n + 3) // 4 * 4


def conv_im2col_bytes(isa: Isa, kh: int, kw: int, c_in: int) -> int:
    """Generic conv: MVE four int8 im2col rows padded to 16; else two int16 rows aligned to 4."""
    cols = kh * kw * c_in
    if isa is Isa.MVE:
        return 4 * ((cols + 15) // 16) * 16
    return 2 * aligned4(cols) * 2


@pytest.mark.parametrize("isa", list(Isa))
@pytest.mark.parametrize(("kh", "kw", "c_in"), [(3, 3, 8), (3, 3, 3), (10, 4, 1), (5, 5, 17)])
def test_conv2d_generic(isa: Isa, kh: int, kw: int, c_in: int) -> None:
    got = conv2d_scratch_bytes(
        M55[isa], [1, 20, 12, c_in], [16, kh, kw, c_in], [1, 10, 6, 16], [2, 2], [1, 1], [1, 1]
    )
    assert got == conv_im2col_bytes(isa, kh, kw, c_in)


def test_conv2d_values_by_hand() -> None:
    shapes = ([1, 10, 10, 8], [16, 3, 3, 8], [1, 10, 10, 16], [1, 1], [1, 1], [1, 1])
    sizes = {isa: conv2d_scratch_bytes(M55[isa], *shapes) for isa in Isa}
    # 72 columns: MVE 4 * 80, DSP/scalar 2 * 72 * sizeof(int16)
    assert sizes == {Isa.MVE: 320, Isa.DSP: 288, Isa.SCALAR: 288}


@pytest.mark.parametrize("isa", list(Isa))
def test_conv2d_pointwise_needs_none(isa: Isa) -> None:
    got = conv2d_scratch_bytes(
        M55[isa], [1, 10, 10, 32], [64, 1, 1, 32], [1, 10, 10, 64], [1, 1], [0, 0], [1, 1]
    )
    assert got == 0


@pytest.mark.parametrize(
    ("kernel", "padding", "expected"),
    [
        # 3x3 with padding <= 1: DSP and scalar use the dedicated 3x3 kernel (no buffer).
        (3, 1, {Isa.MVE: 4 * CH_IN_BLOCK_MVE * 9, Isa.DSP: 0, Isa.SCALAR: 0}),
        # Otherwise DSP needs Cin * KH * KW int16s; scalar never needs a buffer.
        (5, 2, {Isa.MVE: 4 * CH_IN_BLOCK_MVE * 25, Isa.DSP: 32 * 25 * 2, Isa.SCALAR: 0}),
    ],
)
def test_depthwise_by_hand(kernel: int, padding: int, expected: dict[Isa, int]) -> None:
    for isa in Isa:
        got = depthwise_conv2d_scratch_bytes(
            M55[isa],
            [1, 10, 10, 32],
            [1, kernel, kernel, 32],
            [1, 10, 10, 32],
            [1, 1],
            [padding, padding],
            [1, 1],
            1,
        )
        assert got == expected[isa], isa


@pytest.mark.parametrize("isa", list(Isa))
def test_depthwise_with_multiplier_needs_none(isa: Isa) -> None:
    got = depthwise_conv2d_scratch_bytes(
        M55[isa], [1, 8, 8, 16], [1, 5, 5, 32], [1, 8, 8, 32], [1, 1], [2, 2], [1, 1], 2
    )
    assert got == 0
    derived = depthwise_conv2d_scratch_bytes(
        M55[isa], [1, 8, 8, 16], [1, 5, 5, 32], [1, 8, 8, 32], [1, 1], [2, 2], [1, 1]
    )
    assert derived == 0


def test_linear_by_hand() -> None:
    sizes = {isa: linear_scratch_bytes(M55[isa], [1, 64], [12, 64]) for isa in Isa}
    assert sizes == {Isa.MVE: 12 * 4, Isa.DSP: 0, Isa.SCALAR: 0}  # MVE: int32 kernel sums


def test_avg_pool2d_by_hand() -> None:
    sizes = {isa: avg_pool2d_scratch_bytes(M55[isa], [1, 5, 5, 64], [1, 1, 1, 64]) for isa in Isa}
    assert sizes == {Isa.MVE: 0, Isa.DSP: 64 * 4, Isa.SCALAR: 0}  # DSP: int32 sum per channel


def test_default_targets_follow_the_core() -> None:
    assert linear_scratch_bytes(Target.for_core(Core.M55), [3, 10], [7, 10]) == 28
    assert avg_pool2d_scratch_bytes(Target.for_core(Core.M4), [1, 4, 4, 3], [1, 2, 2, 3]) == 12
    assert avg_pool2d_scratch_bytes(Target.for_core(Core.M0PLUS), [1, 4, 4, 3], [1, 2, 2, 3]) == 0


def test_bad_shapes_are_rejected() -> None:
    target = M55[Isa.MVE]
    with pytest.raises(ValueError):
        conv2d_scratch_bytes(target, [1, 4, 4], [1, 1, 1, 4], [1, 4, 4, 1], [1, 1], [0, 0], [1, 1])
    with pytest.raises(ValueError):
        conv2d_scratch_bytes(target, [1, 4, 4, 4], [1, 1, 1, 4], [1, 4, 4, 1], [1], [0, 0], [1, 1])
    with pytest.raises(ValueError):
        linear_scratch_bytes(target, [1, 10], [7, 11])
