"""Scratch sizes from CMSIS-NN's getters, checked against the C formulas worked by hand."""

from __future__ import annotations

import pytest
from torch.fx.passes.shape_prop import ShapeProp

from cortex_m_nn.core.cmsis_nn import mve_one_by_n_inexact
from cortex_m_nn.core.target import Core, Isa, Target
from cortex_m_nn.lower.scratch import (
    TransposeConvScratch,
    avg_pool2d_scratch_bytes,
    batch_matmul_scratch_bytes,
    conv2d_scratch_bytes,
    depthwise_conv2d_scratch_bytes,
    linear_scratch_bytes,
    transpose_conv2d_scratch,
)

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
@pytest.mark.parametrize(("kh", "kw"), [(3, 3), (1, 1), (1, 5)])
def test_grouped_conv2d_is_sized_from_all_input_channels(isa: Isa, kh: int, kw: int) -> None:
    """Grouped (12 input channels, 4 per group: groups 3): the wrapper always takes
    arm_convolve_s8 (even 1x1 and 1xN), and the getter sizes its im2col from input_dims->c,
    all 12 channels, though each group's columns hold 4."""
    got = conv2d_scratch_bytes(
        M55[isa], [1, 1, 8, 12], [6, kh, kw, 4], [1, 1, 8, 6], [1, 1], [kh // 2, kw // 2], [1, 1]
    )
    assert got == conv_im2col_bytes(isa, kh, kw, 12)


@pytest.mark.parametrize(
    ("length", "kernel", "stride", "padding", "refused"),
    [
        (8, 3, 2, 1, True),  # 4 outputs: one column of padding in all, CMSIS-NN assumes 2
        (16, 3, 2, 1, True),
        (9, 3, 2, 1, False),  # 5 outputs: 2 columns, as assumed
        (8, 3, 1, 1, False),
        (8, 5, 2, 2, True),  # 4 outputs: 3 columns, assumed 4 or 5
        (9, 5, 2, 2, True),  # 5 outputs, 2 + 2 pads: the last window holds two pads
        (8, 3, 2, 1, True),  # TF-SAME needs pads 0 / 1; PyTorch's padding 1 pads the left
        (16, 4, 1, 1, False),  # 15 outputs, total 2: one pad in the first and the last window
        (12, 4, 4, 0, False),  # no padding: three unpadded windows
        (9, 3, 1, 1, False),  # pads 1 / 1: one pad in the first and the last window
        # 3 outputs: total -1 (C's -1 % 2 is -1: 0 + (-1) == -1, no failure), but the right
        # section pads the last window's third tap, which is input 6
        (8, 3, 2, 0, True),
    ],
)
def test_mve_one_by_n_refusal_by_hand(
    length: int, kernel: int, stride: int, padding: int, refused: bool
) -> None:
    """arm_convolve_1_x_n_s8 (MVE) fails unless 2 * pad + (total % 2) == total, where total =
    (out - 1) * stride + kernel - length, and miscomputes unless its first right-padded window
    holds one pad; the compiler then plans arm_convolve_s8's buffer. Worked by hand."""
    out = (length + 2 * padding - kernel) // stride + 1
    shapes = ([1, 1, length, 8], [4, 1, kernel, 8], [1, 1, out, 4])
    window = ([1, stride], [0, padding], [1, 1])
    assert mve_one_by_n_inexact(*shapes, *window) is refused
    if refused:  # arm_convolve_s8's MVE im2col, not the 1xN path's buffer
        assert conv2d_scratch_bytes(M55[Isa.MVE], *shapes, *window) == conv_im2col_bytes(
            Isa.MVE, 1, kernel, 8
        )


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


@pytest.mark.parametrize("isa", list(Isa))
def test_transpose_conv_rolling_buffer_by_hand(isa: Isa) -> None:
    """arm_transpose_conv_s8: max(KH, sh) rows of ((W - 1) * sw + max(KW, sw)) * Cout int32s."""
    got = transpose_conv2d_scratch(
        M55[isa], [1, 5, 5, 4], [3, 3, 3, 4], [1, 10, 10, 3], [2, 2], [1, 1]
    )
    assert got == TransposeConvScratch(buffer_bytes=3 * (4 * 2 + 3) * 3 * 4, reverse_conv_bytes=0)
    assert got.reverse_conv_offset == got.total_bytes == 396


def test_transpose_conv_reverse_conv_path_by_hand() -> None:
    """More than 16 input channels, stride <= 2: arm_convolve_s8 over the upsampled input
    (its im2col buffer) plus the reversed filter (Cout * KH * KW * Cin bytes) after it."""
    shapes = ([1, 5, 5, 20], [3, 3, 3, 20], [1, 10, 10, 3], [2, 2], [1, 1])
    sizes = {isa: transpose_conv2d_scratch(M55[isa], *shapes) for isa in Isa}
    columns = 3 * 3 * 20
    assert sizes[Isa.MVE].buffer_bytes == 4 * ((columns + 15) // 16) * 16
    assert sizes[Isa.DSP].buffer_bytes == sizes[Isa.SCALAR].buffer_bytes == 2 * columns * 2
    for size in sizes.values():
        assert size.reverse_conv_bytes == 3 * 3 * 3 * 20
        assert size.reverse_conv_offset == size.buffer_bytes
        assert size.total_bytes == size.buffer_bytes + 540


def test_transpose_conv_plans_more_than_the_getter_when_it_undersizes() -> None:
    """The getter takes max(KW, stride_h) for the row width; the kernel uses stride_w."""
    got = transpose_conv2d_scratch(
        M55[Isa.DSP], [1, 4, 4, 4], [5, 2, 2, 4], [1, 5, 11, 5], [1, 3], [0, 0]
    )
    assert got.buffer_bytes == 2 * (3 * 3 + 3) * 5 * 4  # not the getter's (3 * 3 + 2)


def test_transpose_conv_offset_is_aligned_and_never_zero() -> None:
    assert TransposeConvScratch(0, 0).reverse_conv_offset == 4
    assert TransposeConvScratch(13, 7).reverse_conv_offset == 16
    assert TransposeConvScratch(13, 7).total_bytes == 23


def test_batch_matmul_by_hand() -> None:
    sizes = {isa: batch_matmul_scratch_bytes(M55[isa], [2, 3, 7, 16]) for isa in Isa}
    assert sizes == {Isa.MVE: 7 * 4, Isa.DSP: 0, Isa.SCALAR: 0}  # MVE: int32 sum per rhs row


# --- the scratch a compiled program plans, per ISA ------------------------------------------


@pytest.fixture(scope="module", params=list(Isa), ids=lambda isa: isa.value)
def compiled_stack(request, quantized_models):
    """conv_stack exported and calibrated once for the session, lowered for each ISA."""
    from .models import conv_stack

    quantized = quantized_models.get("conv_stack", conv_stack)
    target = M55[request.param]
    compiled = quantized.lower(target)
    ShapeProp(compiled.lowered).propagate(*quantized.source.example_inputs)
    return target, compiled


def _shape(node) -> list[int]:
    meta = node.meta["tensor_meta"]
    return list((meta if hasattr(meta, "shape") else meta[0]).shape)


def getter_bytes(target: Target, node) -> int:
    """What CMSIS-NN's getter asks for this lowered operator, from its tensors' shapes."""
    name = node.target._schema.name.removeprefix("cortex_m_nn::")
    args = node.args
    if name == "conv2d":
        return conv2d_scratch_bytes(
            target, _shape(args[0]), _shape(args[1]), _shape(node), *args[5:8]
        )
    if name == "depthwise_conv2d":
        return depthwise_conv2d_scratch_bytes(
            target, _shape(args[0]), _shape(args[1]), _shape(node), *args[5:9]
        )
    if name == "avg_pool2d":
        return avg_pool2d_scratch_bytes(target, _shape(args[0]), _shape(node))
    raise AssertionError(f"no getter for {name}")


def test_planned_scratch_equals_the_getters(compiled_stack) -> None:
    target, compiled = compiled_stack
    ops = [
        n
        for n in compiled.lowered.graph.nodes
        if n.op == "call_function"
        and hasattr(n.target, "_schema")
        and len(n.target._schema.returns) == 2
    ]
    expected = [getter_bytes(target, n) for n in ops]
    assert [n.args[-1] for n in ops] == expected
    planned = [t.nbytes for t in compiled.memory.tensors if t.kind == "scratch"]
    assert planned == expected
    # conv 3x3x3 im2col, depthwise (multiplier 2: none), pointwise, two pools
    by_isa = {
        Isa.MVE: [4 * 32, 0, 0, 0, 0],
        Isa.DSP: [2 * 28 * 2, 0, 0, 16 * 4, 16 * 4],
        Isa.SCALAR: [2 * 28 * 2, 0, 0, 0, 0],
    }
    assert expected == by_isa[target.isa]


def test_linear_buffer_is_compile_time_kernel_sums(compiled_stack) -> None:
    """What CMSIS-NN's linear getter asks for (MVE: an int32 kernel sum per output) is a
    constant of the program, not scratch; other ISAs need nothing."""
    target, compiled = compiled_stack
    (node,) = [
        n
        for n in compiled.lowered.graph.nodes
        if getattr(n.target, "__name__", "") == "linear.default"
    ]
    sums = node.args[3]
    need = linear_scratch_bytes(target, _shape(node.args[0]), _shape(node.args[1]))
    if target.isa is Isa.MVE:
        assert sums is not None and node.args[2] is None
        assert 4 * getattr(compiled.lowered, sums.target).numel() == need == 4 * 5
    else:
        assert sums is None and need == 0
