"""``cortex_m_nn::conv2d``, ``::depthwise_conv2d`` and ``::transpose_conv2d``: one table, a
row per operator, against independent references — float64 ``F.conv2d`` on exact integers
(grouped for depthwise) and a plain-int scatter-add (transposed) — then Python-int requant.

CMSIS-NN's transposed-convolution algorithms, which decide that operator's supported domain,
are checked in test_transpose_conv2d.py."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from torch._subclasses.fake_tensor import FakeTensorMode

import cortex_m_nn.ops  # noqa: F401
from cortex_m_nn.core.abi import Rounding
from cortex_m_nn.core.cmsis_nn import LANES, ROWS, THREE_BY_THREE, WRAPPER
from cortex_m_nn.ops.conv2d import conv2d, dsp_tail_defect, output_size
from cortex_m_nn.ops.depthwise_conv2d import depthwise_conv2d
from cortex_m_nn.ops.params import int16_sums_fit, sides
from cortex_m_nn.ops.transpose_conv2d import transpose_conv2d, unsupported_reason

from .independent import ref_requantize, ref_requantize_s64, wrap32

Case = dict[str, object]


def requantized(case: Case, acc: list, single: bool = False) -> torch.Tensor:
    """Per-channel Python-int requantization of nested accumulators ``[..., C]``: int32 ones
    to int8 (``arm_nn_requantize``), or, for an int16 input, exact ones to int16
    (``arm_nn_requantize_s64``)."""
    mults, shifts = case["multipliers"].tolist(), case["shifts"].tolist()
    low, high = case["activation_min"], case["activation_max"]
    s16 = case["input"].dtype == torch.int16

    def one(a: int, o: int) -> int:
        if s16:
            y = ref_requantize_s64(a, mults[o], shifts[o])
        else:
            y = ref_requantize(wrap32(a), mults[o], shifts[o], single)
        y += case["output_offset"]
        return min(max(y, low), high)

    def walk(values: list) -> list:
        if values and isinstance(values[0], list):
            return [walk(v) for v in values]
        return [one(a, o) for o, a in enumerate(values)]

    return torch.tensor(walk(acc), dtype=torch.int16 if s16 else torch.int8)


def float_conv(case: Case, weight: torch.Tensor, groups: int = 1) -> list:
    """Zero-padded float64 conv of (x - zp) in NCHW, exact on these integers, plus bias."""
    x = (case["input"].to(torch.float64) + case["input_offset"]).permute(0, 3, 1, 2)
    padding = case["padding"]
    if len(padding) == 4:  # (top, left, bottom, right): zeros of x - zp on each side
        top, left, bottom, right = padding
        x, padding = torch.nn.functional.pad(x, (left, right, top, bottom)), [0, 0]
    acc = torch.nn.functional.conv2d(
        x,
        weight.to(torch.float64),
        stride=case["stride"],
        padding=padding,
        dilation=case["dilation"],
        groups=groups,
    ).permute(0, 2, 3, 1)
    return (acc.round().to(torch.int64) + case["bias"].to(torch.int64)).tolist()


def conv_accumulators(case: Case) -> list:
    """PyTorch's grouped conv: weight ``[Cout, Cin / groups, KH, KW]``, groups from the shapes."""
    weight = case["weight"].permute(0, 3, 1, 2)
    return float_conv(case, weight, groups=case["input"].shape[3] // weight.shape[1])


def depthwise_accumulators(case: Case) -> list:
    """Grouped conv (groups = Cin): output channel c reads input channel c // multiplier."""
    weight = case["weight"][0].permute(2, 0, 1).unsqueeze(1)  # [Cout, 1, KH, KW]
    return float_conv(case, weight, groups=case["input"].shape[3])


def out_extent(size: int, k: int, s: int, p: int, op: int) -> int:
    return (size - 1) * s - 2 * p + k + op


def scatter_add(case: Case) -> list:
    """The definition: every input pixel adds its products onto the pixels it reaches."""
    x, w = case["input"].tolist(), case["weight"].tolist()
    (sh, sw), (ph, pw), (oph, opw) = case["stride"], case["padding"], case["output_padding"]
    n, h, wd = len(x), len(x[0]), len(x[0][0])
    c_out, kh, kw = len(w), len(w[0]), len(w[0][0])
    oh, ow = out_extent(h, kh, sh, ph, oph), out_extent(wd, kw, sw, pw, opw)
    bias = case["bias"].tolist()
    acc = [[[list(bias) for _ in range(ow)] for _ in range(oh)] for _ in range(n)]
    for b in range(n):
        for iy in range(h):
            for ix in range(wd):
                pixel = [v + case["input_offset"] for v in x[b][iy][ix]]
                for ky in range(kh):
                    for kx in range(kw):
                        oy, ox = iy * sh + ky - ph, ix * sw + kx - pw
                        if 0 <= oy < oh and 0 <= ox < ow:
                            for o in range(c_out):
                                acc[b][oy][ox][o] += sum(
                                    a * c for a, c in zip(pixel, w[o][ky][kx], strict=True)
                                )
    return acc


def transpose_supported(case: Case) -> bool:
    _, h, w, c_in = case["input"].shape
    _, kh, kw, _ = case["weight"].shape
    reason = unsupported_reason(
        (h, w), c_in, (kh, kw), case["stride"], case["padding"], case["output_padding"]
    )
    return reason is None


# --- random cases: the geometry each operator takes ------------------------------------------


def _tensors(
    draw: st.DrawFn, shapes: dict[str, tuple[int, ...]], shift_low: int, weight_low: int = -128
) -> Case:
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    c_out = shapes["bias"][0]
    return {
        "input": torch.randint(-128, 128, shapes["input"], generator=gen, dtype=torch.int8),
        "weight": torch.randint(weight_low, 128, shapes["weight"], generator=gen, dtype=torch.int8),
        "bias": torch.randint(-(2**16), 2**16, (c_out,), generator=gen, dtype=torch.int32),
        "multipliers": torch.randint(2**30, 2**31 - 1, (c_out,), generator=gen, dtype=torch.int32),
        "shifts": torch.randint(shift_low, 2, (c_out,), generator=gen, dtype=torch.int32),
    }


def _offsets(draw: st.DrawFn) -> Case:
    act_min = draw(st.integers(-128, 0))
    return {
        "input_offset": -draw(st.integers(-128, 127)),
        "output_offset": draw(st.integers(-128, 127)),
        "activation_min": act_min,
        "activation_max": draw(st.integers(act_min, 127)),
    }


def _window(draw: st.DrawFn, h: int, w: int) -> tuple[int, int, list, list, list]:
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    stride = [draw(st.integers(1, 3)), draw(st.integers(1, 3))]
    padding = [draw(st.integers(0, 2)), draw(st.integers(0, 2))]
    dilation = [draw(st.integers(1, 2)), draw(st.integers(1, 2))]
    spans = (dilation[0] * (kh - 1), dilation[1] * (kw - 1))
    # TensorFlow's SAME: an end padded one more than its start, less than the kernel's extent
    ends = [
        p + int(p < span and draw(st.booleans())) for p, span in zip(padding, spans, strict=True)
    ]
    assume(h + padding[0] + ends[0] >= spans[0] + 1)
    assume(w + padding[1] + ends[1] >= spans[1] + 1)
    return kh, kw, stride, padding if ends == padding else padding + ends, dilation


@st.composite
def conv_cases(draw: st.DrawFn, depthwise: bool = False) -> Case:
    """conv2d's arguments (1 to 3 groups: weight ``[Cout, KH, KW, Cin / groups]``), or
    depthwise_conv2d's (weight ``[1, KH, KW, Cin * multiplier]``)."""
    n, h, w = draw(st.integers(1, 2)), draw(st.integers(1, 9)), draw(st.integers(1, 9))
    if depthwise:
        c_in, mult = draw(st.integers(2, 5)), draw(st.integers(1, 3))
        c_out = per_group = c_in * mult
    else:
        groups, per_group = draw(st.integers(1, 3)), draw(st.integers(1, 4))
        c_in, c_out = groups * per_group, groups * draw(st.integers(1, 3))
    kh, kw, stride, padding, dilation = _window(draw, h, w)
    three_by_three = depthwise and (kh, kw) == (3, 3) and mult == 1 and dilation == [1, 1]
    assume(not (three_by_three and len(padding) == 4 and max(padding[2:]) > 1))
    weight = (1, kh, kw, c_out) if depthwise else (c_out, kh, kw, per_group)
    shapes = {"input": (n, h, w, c_in), "weight": weight, "bias": (c_out,)}
    geometry = {"stride": stride, "padding": padding, "dilation": dilation}
    multiplier = {"depth_multiplier": mult} if depthwise else {}
    shift_low = -12 if depthwise else -14
    return _tensors(draw, shapes, shift_low) | geometry | multiplier | _offsets(draw)


@st.composite
def rows_cases(draw: st.DrawFn) -> Case:
    """conv2d's path 1: a 1x1 convolution without padding, dilation or groups."""
    n, h, w = draw(st.integers(1, 2)), draw(st.integers(1, 9)), draw(st.integers(1, 9))
    c_in, c_out = draw(st.integers(1, 8)), draw(st.integers(1, 6))
    shapes = {"input": (n, h, w, c_in), "weight": (c_out, 1, 1, c_in), "bias": (c_out,)}
    stride = [draw(st.integers(1, 3)), draw(st.integers(1, 3))]
    geometry = {"stride": stride, "padding": [0, 0], "dilation": [1, 1]}
    return _tensors(draw, shapes, -14) | geometry | _offsets(draw)


@st.composite
def three_by_three_cases(draw: st.DrawFn) -> Case:
    """depthwise_conv2d's path 1: 3x3, multiplier 1, no dilation, pads of at most 1, one
    image."""
    top, left, bottom, right = (draw(st.integers(0, 1)) for _ in range(4))
    h, w = draw(st.integers(3 - top - bottom, 9)), draw(st.integers(3 - left - right, 9))
    c = draw(st.integers(2, 6))
    shapes = {"input": (1, h, w, c), "weight": (1, 3, 3, c), "bias": (c,)}
    stride = [draw(st.integers(1, 2)), draw(st.integers(1, 2))]
    geometry = {"stride": stride, "padding": [top, left, bottom, right], "dilation": [1, 1]}
    multiplier = {"depth_multiplier": 1}
    return _tensors(draw, shapes, -12) | geometry | multiplier | _offsets(draw)


@st.composite
def lanes_cases(draw: st.DrawFn) -> Case:
    """depthwise_conv2d's path 2: 3x3, multiplier 1, no dilation, stride 1 or 2 across, a
    multiple of 4 channels; any padding and batch."""
    top, left, bottom, right = (draw(st.integers(0, 2)) for _ in range(4))
    stride = [draw(st.integers(1, 3)), draw(st.integers(1, 2))]
    h, w = (
        draw(st.integers(max(1, 3 - top - bottom), 9)),
        draw(st.integers(max(1, 3 - left - right), 9)),
    )
    c = 4 * draw(st.integers(1, 3))
    shapes = {"input": (draw(st.integers(1, 2)), h, w, c), "weight": (1, 3, 3, c), "bias": (c,)}
    geometry = {"stride": stride, "padding": [top, left, bottom, right], "dilation": [1, 1]}
    multiplier = {"depth_multiplier": 1}
    return _tensors(draw, shapes, -12) | geometry | multiplier | _offsets(draw)


@st.composite
def transpose_cases(
    draw: st.DrawFn, channels: tuple[int, int] = (1, 5), max_stride: int = 3
) -> Case:
    n, h, w = draw(st.integers(1, 2)), draw(st.integers(1, 5)), draw(st.integers(1, 5))
    c_in, c_out = draw(st.integers(*channels)), draw(st.integers(1, 4))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    stride = [draw(st.integers(1, max_stride)), draw(st.integers(1, max_stride))]
    padding = [draw(st.integers(0, 3)), draw(st.integers(0, 3))]
    output_padding = [draw(st.integers(0, stride[0] - 1)), draw(st.integers(0, stride[1] - 1))]
    assume(out_extent(h, kh, stride[0], padding[0], output_padding[0]) > 0)
    assume(out_extent(w, kw, stride[1], padding[1], output_padding[1]) > 0)
    shapes = {"input": (n, h, w, c_in), "weight": (c_out, kh, kw, c_in), "bias": (c_out,)}
    geometry = {"stride": stride, "padding": padding, "output_padding": output_padding}
    return _tensors(draw, shapes, -14, weight_low=-127) | geometry | _offsets(draw)


@st.composite
def conv_s16_cases(draw: st.DrawFn, depthwise: bool = False) -> Case:
    """The int16 case of conv2d or depthwise_conv2d: int16 input, int64 bias, zero offsets,
    an int16 range; a convolution has no groups and more than 512 columns in one case of two
    (CMSIS-NN's sums then go on in int64), weights within the int32 bound, not the DSP
    kernel's defective tail."""
    n, h, w = draw(st.integers(1, 2)), draw(st.integers(1, 7)), draw(st.integers(1, 7))
    kh, kw, stride, padding, dilation = _window(draw, h, w)
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    top, left, bottom, right = sides(padding)
    oh = output_size(h, kh, stride[0], top, dilation[0], bottom)
    ow = output_size(w, kw, stride[1], left, dilation[1], right)
    extra: Case = {}
    if depthwise:
        c_in, mult = draw(st.integers(2, 6)), draw(st.integers(1, 3))
        c_out = c_in * mult
        weight = torch.randint(-128, 128, (1, kh, kw, c_out), generator=gen, dtype=torch.int8)
        extra = {"depth_multiplier": mult}
    else:
        c_in = draw(st.integers(1, 6)) if draw(st.booleans()) else draw(st.integers(33, 60))
        c_out = draw(st.integers(1, 5))
        weight = torch.randint(-127, 128, (c_out, kh, kw, c_in), generator=gen, dtype=torch.int8)
        assume(int16_sums_fit(weight))
        assume(not dsp_tail_defect(kh * kw * c_in, c_out, oh * ow))
    act_min = draw(st.integers(-32768, 0))
    return (
        {
            "input": torch.randint(-32768, 32768, (n, h, w, c_in), generator=gen).to(torch.int16),
            "weight": weight,
            "bias": torch.randint(-(2**40), 2**40, (c_out,), generator=gen, dtype=torch.int64),
            "multipliers": torch.randint(
                2**30, 2**31 - 1, (c_out,), generator=gen, dtype=torch.int32
            ),
            "shifts": torch.randint(-14, 2, (c_out,), generator=gen, dtype=torch.int32),
            "stride": stride,
            "padding": padding,
            "dilation": dilation,
        }
        | extra
        | {
            "input_offset": 0,
            "output_offset": 0,
            "activation_min": act_min,
            "activation_max": draw(st.integers(act_min, 32767)),
        }
    )


def nibbles(packed: torch.Tensor) -> list[int]:
    """Packed int4 bytes as signed values, low nibble first: the test's own reading of
    CMSIS-NN's format (``(v ^ 8) - 8`` sign-extends 4 bits)."""
    values = []
    for byte in packed.reshape(-1).tolist():
        values += [((byte & 0xF) ^ 8) - 8, ((byte >> 4) ^ 8) - 8]
    return values


def _packed_by_hand(values: torch.Tensor) -> torch.Tensor:
    """int8 values in [-8, 7], an even count, as uint8 pairs, low nibble first."""
    flat = [v & 0xF for v in values.reshape(-1).tolist()]
    pairs = [low | (high << 4) for low, high in zip(flat[0::2], flat[1::2], strict=True)]
    return torch.tensor(pairs, dtype=torch.uint8)


@st.composite
def conv_s4_cases(draw: st.DrawFn, depthwise: bool = False) -> Case:
    """The int4 case of conv2d or depthwise_conv2d: weights in [-8, 7] packed two per byte
    (conv2d ``[Cout, KH, KW * Cin / 2]``, no groups, KW * Cin even; depthwise
    ``[1, KH, KW, Cout / 2]``, an even Cin), int8 activations, any offsets."""
    case = draw(conv_cases(depthwise=depthwise))
    n, h, w, _ = case["input"].shape
    kh, kw = case["weight"].shape[1:3]
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    if depthwise:
        c_in = 2 * draw(st.integers(1, 3))
        c_out = c_in * case["depth_multiplier"]
        shape = (1, kh, kw, c_out)
    else:
        c_in, c_out = draw(st.integers(1, 6)), draw(st.integers(1, 5))
        c_in += (kw * c_in) % 2
        shape = (c_out, kh, kw, c_in)
    values = torch.randint(-8, 8, shape, generator=gen, dtype=torch.int8)
    stored = (1, kh, kw, c_out // 2) if depthwise else (c_out, kh, kw * c_in // 2)
    case |= {
        "input": torch.randint(-128, 128, (n, h, w, c_in), generator=gen, dtype=torch.int8),
        "weight": _packed_by_hand(values).reshape(stored),
        "bias": case["bias"][:1].expand(c_out).clone(),
        "multipliers": case["multipliers"][:1].expand(c_out).clone(),
        "shifts": case["shifts"][:1].expand(c_out).clone(),
    }
    return case


def _unpacked(case: Case, depthwise: bool) -> Case:
    """The case with its packed weight read by :func:`nibbles` into the int8 layout."""
    weight, c_in = case["weight"], case["input"].shape[3]
    values = torch.tensor(nibbles(weight), dtype=torch.int8)
    if depthwise:
        return case | {"weight": values.reshape(*weight.shape[:-1], -1)}
    c_out, kh, row = weight.shape
    return case | {"weight": values.reshape(c_out, kh, 2 * row // c_in, c_in)}


# --- fixed cases ------------------------------------------------------------------------------


def _fixed_tensors(
    seed: int,
    shapes: tuple[tuple[int, ...], tuple[int, ...]],
    bias: list[int],
    multipliers: list[int],
    shifts: list[int],
    weight_low: int = -128,
    int16: bool = False,
) -> Case:
    """A fixed case's int8 input (``int16``: an int16 one at full scale, and an int64 bias) and
    int8 weight (random from ``seed``, ``shapes`` in that order) and its per-channel bias,
    multipliers and shifts."""
    gen = torch.Generator().manual_seed(seed)
    input_shape, weight_shape = shapes
    if int16:
        input_ = torch.randint(-32768, 32768, input_shape, generator=gen).to(torch.int16)
    else:
        input_ = torch.randint(-128, 128, input_shape, generator=gen, dtype=torch.int8)
    return {
        "input": input_,
        "weight": torch.randint(weight_low, 128, weight_shape, generator=gen, dtype=torch.int8),
        "bias": torch.tensor(bias, dtype=torch.int64 if int16 else torch.int32),
        "multipliers": torch.tensor(multipliers, dtype=torch.int32),
        "shifts": torch.tensor(shifts, dtype=torch.int32),
    }


def _fixed_offsets(input_offset: int, output_offset: int, low: int, high: int) -> Case:
    """The arguments every convolution ends with, in the schema's order."""
    return {
        "input_offset": input_offset,
        "output_offset": output_offset,
        "activation_min": low,
        "activation_max": high,
    }


#: Per-channel multipliers of the fixed cases: 0.5, 1/sqrt(2), just under 1, 0.5.
MULTIPLIERS = [2**30, 1518500250, 2**31 - 1, 2**30]


def conv_fixed() -> Case:
    shapes = ((1, 6, 5, 3), (4, 3, 3, 3))
    tensors = _fixed_tensors(0, shapes, [0, 100, -100, 2**20], MULTIPLIERS, [-9, -8, -12, 1])
    geometry = {"stride": [2, 1], "padding": [1, 1], "dilation": [1, 1]}
    return tensors | geometry | _fixed_offsets(5, -3, -100, 90)


def depthwise_fixed() -> Case:
    shapes = ((1, 5, 7, 2), (1, 3, 3, 4))
    tensors = _fixed_tensors(1, shapes, [0, 10, -10, 2**22], MULTIPLIERS, [-7, -8, -9, 2])
    geometry = {"stride": [1, 2], "padding": [1, 1], "dilation": [1, 1], "depth_multiplier": 2}
    return tensors | geometry | _fixed_offsets(-3, 4, -128, 127)


def rows_fixed() -> Case:
    """A 1x1 convolution, stride 2 across: what path 1 (arm_convolve_1x1_s8) computes."""
    shapes = ((1, 3, 6, 3), (4, 1, 1, 3))
    tensors = _fixed_tensors(8, shapes, [0, 100, -100, 2**20], MULTIPLIERS, [-9, -8, -12, 1])
    geometry = {"stride": [1, 2], "padding": [0, 0], "dilation": [1, 1]}
    return tensors | geometry | _fixed_offsets(5, -3, -100, 90)


def three_by_three_fixed() -> Case:
    """A 3x3 depthwise call of multiplier 1 padded (1, 0, 0, 1): path 1's shape."""
    shapes = ((1, 5, 6, 4), (1, 3, 3, 4))
    tensors = _fixed_tensors(9, shapes, [0, 10, -10, 2**22], MULTIPLIERS, [-7, -8, -9, 2])
    geometry = {"stride": [1, 1], "padding": [1, 0, 0, 1], "dilation": [1, 1]}
    return tensors | geometry | {"depth_multiplier": 1} | _fixed_offsets(-3, 4, -128, 127)


def lanes_fixed() -> Case:
    """A 3x3 depthwise call of multiplier 1, stride 2 across, padded (2, 1, 0, 2) and two
    images: path 2's shape, with pads the other paths do not take."""
    shapes = ((2, 5, 6, 4), (1, 3, 3, 4))
    tensors = _fixed_tensors(10, shapes, [0, 10, -10, 2**22], MULTIPLIERS, [-7, -8, -9, 2])
    geometry = {"stride": [1, 2], "padding": [2, 1, 0, 2], "dilation": [1, 1]}
    return tensors | geometry | {"depth_multiplier": 1} | _fixed_offsets(-3, 4, -128, 127)


def conv_s16_fixed() -> Case:
    """conv_fixed's geometry in int16: an input at full scale, a bias near 2^40."""
    shapes, bias, shifts = ((1, 6, 5, 3), (4, 3, 3, 3)), [0, 100, -100, 2**40], [-9, -8, -12, 1]
    tensors = _fixed_tensors(4, shapes, bias, MULTIPLIERS, shifts, weight_low=-127, int16=True)
    geometry = {"stride": [2, 1], "padding": [1, 1], "dilation": [1, 1]}
    return tensors | geometry | _fixed_offsets(0, 0, -30000, 32767)


def depthwise_s16_fixed() -> Case:
    """depthwise_fixed's geometry in int16 (a 3x3 end padded by 2, which only the s8 3x3 path
    cannot compute)."""
    shapes, bias, shifts = ((1, 5, 7, 4), (1, 3, 3, 4)), [0, 10, -10, 2**40], [-7, -8, -9, 2]
    tensors = _fixed_tensors(5, shapes, bias, MULTIPLIERS, shifts, int16=True)
    geometry = {"stride": [1, 2], "padding": [1, 1, 2, 2], "dilation": [1, 1]}
    return tensors | geometry | {"depth_multiplier": 1} | _fixed_offsets(0, 0, -32768, 32767)


def conv_s4_fixed() -> Case:
    """conv_fixed's geometry with 4 input channels (KW * Cin even) and int4 weights, the
    range's two ends among them."""
    case = conv_fixed()
    gen = torch.Generator().manual_seed(6)
    values = torch.randint(-8, 8, (4, 3, 3, 4), generator=gen, dtype=torch.int8)
    values[0, 0, 0, :2] = torch.tensor([-8, 7], dtype=torch.int8)
    input_ = torch.randint(-128, 128, (1, 6, 5, 4), generator=gen, dtype=torch.int8)
    return case | {"input": input_, "weight": _packed_by_hand(values).reshape(4, 3, 6)}


def depthwise_s4_fixed() -> Case:
    """depthwise_fixed with int4 weights (Cin 2, multiplier 2)."""
    case = depthwise_fixed()
    gen = torch.Generator().manual_seed(7)
    values = torch.randint(-8, 8, (1, 3, 3, 4), generator=gen, dtype=torch.int8)
    return case | {"weight": _packed_by_hand(values).reshape(1, 3, 3, 2)}


def transpose_fixed(**changes: object) -> Case:
    shapes = ((1, 3, 4, 2), (3, 3, 3, 2))
    bias, shifts = [0, 5000, -(2**20)], [-8, -9, 0]
    tensors = _fixed_tensors(3, shapes, bias, MULTIPLIERS[:3], shifts, weight_low=-127)
    geometry = {"stride": [2, 2], "padding": [1, 1], "output_padding": [1, 1]}
    return tensors | geometry | _fixed_offsets(4, -2, -128, 127) | changes


def conv_call(case: Case, rounding: Rounding = Rounding.DOUBLE) -> torch.Tensor:
    return conv2d(*case.values(), rounding=rounding)


def depthwise_call(case: Case, rounding: Rounding = Rounding.DOUBLE) -> torch.Tensor:
    return depthwise_conv2d(*case.values(), rounding=rounding)


def rows_call(case: Case, rounding: Rounding = Rounding.DOUBLE) -> torch.Tensor:
    return conv2d(*case.values(), ROWS, rounding=rounding)


def three_by_three_call(case: Case, rounding: Rounding = Rounding.DOUBLE) -> torch.Tensor:
    return depthwise_conv2d(*case.values(), THREE_BY_THREE, rounding=rounding)


def lanes_call(case: Case, rounding: Rounding = Rounding.DOUBLE) -> torch.Tensor:
    return depthwise_conv2d(*case.values(), LANES, rounding=rounding)


def transpose_call(case: Case, rounding: Rounding = Rounding.DOUBLE) -> torch.Tensor:
    return transpose_conv2d(*case.values(), 4, rounding=rounding)


@dataclass(frozen=True)
class Conv:
    """One operator of the family: how to draw, call and independently compute it."""

    name: str
    cases: Callable[[], st.SearchStrategy[Case]]
    #: the reference on a case, with the rounding given (CMSIS-NN's default: double)
    call: Callable[..., torch.Tensor]
    accumulators: Callable[[Case], list]
    fixed: Callable[[], Case]
    #: the functional form's arguments after the case's (scratch sizes, reverse-conv offset)
    extra: tuple[int, ...]
    supported: Callable[[Case], bool] = lambda case: True

    @property
    def op(self) -> torch._ops.OpOverloadPacket:
        return getattr(torch.ops.cortex_m_nn, self.name)

    def expected(self, case: Case, single: bool = False) -> torch.Tensor:
        return requantized(case, self.accumulators(case), single)


CONV = Conv(
    "conv2d", conv_cases, conv_call, conv_accumulators, conv_fixed,
    (WRAPPER, 96),
)  # fmt: skip
DEPTHWISE = Conv(
    "depthwise_conv2d", lambda: conv_cases(depthwise=True),
    depthwise_call, depthwise_accumulators, depthwise_fixed, (WRAPPER, 40),
)  # fmt: skip
CONV_ROWS = Conv(
    "conv2d", rows_cases, rows_call, conv_accumulators, rows_fixed, (ROWS, 0),
)  # fmt: skip
DEPTHWISE_3X3 = Conv(
    "depthwise_conv2d", three_by_three_cases, three_by_three_call, depthwise_accumulators,
    three_by_three_fixed, (THREE_BY_THREE, 0),
)  # fmt: skip
DEPTHWISE_LANES = Conv(
    "depthwise_conv2d", lanes_cases, lanes_call, depthwise_accumulators, lanes_fixed,
    (LANES, 0),
)  # fmt: skip
TRANSPOSE = Conv(
    "transpose_conv2d", transpose_cases, transpose_call, scatter_add, transpose_fixed, (8, 40),
    transpose_supported,
)  # fmt: skip
CONV_S16 = Conv(
    "conv2d", conv_s16_cases, conv_call, conv_accumulators,
    conv_s16_fixed, (WRAPPER, 320),
)  # fmt: skip
DEPTHWISE_S16 = Conv(
    "depthwise_conv2d", lambda: conv_s16_cases(depthwise=True),
    depthwise_call, depthwise_accumulators, depthwise_s16_fixed,
    (WRAPPER, 40),
)  # fmt: skip
CONV_S4 = Conv(
    "conv2d", conv_s4_cases, conv_call,
    lambda case: conv_accumulators(_unpacked(case, False)), lambda: conv_s4_fixed(),
    (WRAPPER, 96),
)  # fmt: skip
DEPTHWISE_S4 = Conv(
    "depthwise_conv2d", lambda: conv_s4_cases(depthwise=True),
    depthwise_call,
    lambda case: depthwise_accumulators(_unpacked(case, True)), lambda: depthwise_s4_fixed(),
    (WRAPPER, 40),
)  # fmt: skip
FAMILY = [CONV, DEPTHWISE, TRANSPOSE, CONV_S16, DEPTHWISE_S16, CONV_S4, DEPTHWISE_S4]
FAMILY += [CONV_ROWS, DEPTHWISE_3X3, DEPTHWISE_LANES]

#: (operator, rounding, examples)
RANDOM = [
    (conv, rounding, 60 if rounding is Rounding.DOUBLE else 20)
    for conv in FAMILY
    for rounding in (Rounding.DOUBLE, Rounding.SINGLE)
]


def _id(conv: Conv) -> str:
    if conv in (CONV_ROWS, DEPTHWISE_3X3, DEPTHWISE_LANES):
        return f"{conv.name}-path{conv.extra[0]}"
    if conv in (CONV_S16, DEPTHWISE_S16):
        return f"{conv.name}-int16"
    return f"{conv.name}-int4" if conv in (CONV_S4, DEPTHWISE_S4) else conv.name


@pytest.mark.parametrize(
    ("conv", "rounding", "examples"), RANDOM, ids=[f"{_id(c)}-{r.value}" for c, r, _ in RANDOM]
)
def test_matches_independent(conv: Conv, rounding: Rounding, examples: int) -> None:
    @settings(max_examples=examples, deadline=None)
    @given(conv.cases())
    def check(case: Case) -> None:
        assume(conv.supported(case))
        got = conv.call(case, rounding=rounding)
        assert torch.equal(got, conv.expected(case, single=rounding is Rounding.SINGLE))

    check()


#: (operator, output shape, a channel that saturates and the value it saturates to)
SATURATION = [(CONV, (1, 3, 5, 4), 3, 90), (DEPTHWISE, (1, 5, 4, 4), 3, 127)]
SATURATION += [(TRANSPOSE, (1, 6, 8, 3), 2, -128)]  # transposed: with padding rows


@pytest.mark.parametrize(
    ("conv", "shape", "channel", "value"), SATURATION, ids=[c.name for c, *_ in SATURATION]
)
def test_fixed_case_saturates_and_clamps(
    conv: Conv, shape: tuple, channel: int, value: int
) -> None:
    case = conv.fixed()
    out = conv.call(case)
    assert out.shape == shape
    assert torch.equal(out, conv.expected(case))
    assert (out[..., channel] == value).all()  # a shift > 0 or a large bias saturates
    assert out.min() >= case["activation_min"] and out.max() <= case["activation_max"]


def _bias_only(conv: Conv, input_shape: tuple[int, ...]) -> Case:
    case = conv.fixed()
    channels = len(case["bias"])
    case["input"] = torch.full(input_shape, -case["input_offset"], dtype=torch.int8)
    case["shifts"] = torch.zeros(channels, dtype=torch.int32)
    case["multipliers"] = torch.full((channels,), 2**30, dtype=torch.int32)  # x 0.5
    case["bias"] = torch.tensor([20, -40, 60, 0][:channels], dtype=torch.int32)
    case["output_offset"] = 0
    return case


ZERO_POINT = [(CONV, (1, 4, 4, 3), [[10, -20, 30, 0]]), (TRANSPOSE, (1, 3, 4, 2), [[10, -20, 30]])]


@pytest.mark.parametrize(("conv", "input_shape", "rows"), ZERO_POINT, ids=["conv2d", "transpose"])
def test_zero_point_input_gives_bias_only(conv: Conv, input_shape: tuple, rows: list) -> None:
    """A padded element is the input zero point: an all-zero-point input gives only bias."""
    out = conv.call(_bias_only(conv, input_shape))
    assert out.reshape(-1, len(rows[0])).unique(dim=0).tolist() == rows


@pytest.mark.parametrize("conv", FAMILY, ids=_id)
def test_functional_out_and_scratch(conv: Conv) -> None:
    case = conv.fixed()
    args, scratch_bytes = list(case.values()), conv.extra[-1]
    out, scratch = conv.op(*args, *conv.extra)
    assert torch.equal(out, conv.expected(case))
    assert scratch.dtype == torch.int8 and scratch.shape == (scratch_bytes,)
    buffer, scratch_buffer = torch.empty_like(out), torch.empty(scratch_bytes, dtype=torch.int8)
    result = conv.op.out(*args, *conv.extra, out=buffer, scratch=scratch_buffer)
    assert result[0] is buffer and result[1] is scratch_buffer
    assert torch.equal(buffer, out)


#: (operator, changes to the fixed case, scratch bytes, the output shape worked out by hand)
FAKE = [
    (CONV, {"input": (2, 17, 9, 3), "dilation": [2, 1]}, 320, (2, 8, 9, 4)),
    (DEPTHWISE, {}, 40, (1, 5, 4, 4)),
    (TRANSPOSE, {"input": (2, 5, 7, 2)}, 40, (2, 10, 14, 3)),
]


@pytest.mark.parametrize(
    ("conv", "changes", "scratch_bytes", "shape"), FAKE, ids=[c.name for c, *_ in FAKE]
)
def test_fake_shapes(conv: Conv, changes: dict, scratch_bytes: int, shape: tuple) -> None:
    case = conv.fixed()
    with FakeTensorMode():
        fake = {
            k: torch.empty(v.shape, dtype=v.dtype) if isinstance(v, torch.Tensor) else v
            for k, v in case.items()
        }
        fake.update(changes)
        if "input" in changes:
            fake["input"] = torch.empty(changes["input"], dtype=torch.int8)
        out, scratch = conv.op(*fake.values(), *conv.extra[:-1], scratch_bytes)
    assert out.shape == shape and out.dtype == torch.int8
    assert scratch.shape == (scratch_bytes,) and scratch.dtype == torch.int8


#: (operator, changes to the fixed case, what the error says)
REFUSALS = [
    (CONV, {"input": torch.zeros((1, 4, 4, 2), dtype=torch.int8)}, None),
    (CONV, {"input": torch.zeros((1, 4, 4, 9), dtype=torch.int8)}, "whole groups"),  # 4 % 3
    (DEPTHWISE, {"depth_multiplier": 3}, None),  # the weight's channels are not Cin * 3
    (TRANSPOSE, {"input": torch.zeros((1, 3, 4, 5), dtype=torch.int8)}, "channels"),
    # asymmetric padding no output window of CMSIS-NN's reaches: an end unlike its start as
    # large as the kernel's extent or more (3x3 kernels: 2 at most), three entries
    (CONV, {"padding": [1, 1, 3, 1]}, "kernel's extent"),
    (CONV, {"padding": [0, 1, 1, 3]}, "kernel's extent"),
    (DEPTHWISE, {"padding": [2, 1, 3, 1]}, "kernel's extent"),
    (  # the 3x3 path (multiplier 1, no dilation) reads one pad past the end at most
        DEPTHWISE,
        {
            "input": torch.zeros((1, 5, 7, 4), dtype=torch.int8),
            "depth_multiplier": 1,
            "padding": [1, 1, 2, 1],
        },
        "at most 1",
    ),
    (CONV, {"padding": [1, 1, 1]}, "four"),
    # the int16 case: zero offsets, int64 bias, shifts up to 14, no groups, the int32 bound
    (CONV_S16, {"input_offset": 3}, "zero points"),
    (CONV_S16, {"bias": torch.zeros(4, dtype=torch.int32)}, "int64"),
    (CONV_S16, {"shifts": torch.tensor([0, 0, 0, 15], dtype=torch.int32)}, "at most 14"),
    (CONV_S16, {"weight": torch.ones((4, 3, 3, 1), dtype=torch.int8)}, "whole groups|no groups"),
    (
        CONV_S16,
        {
            "input": torch.zeros((1, 6, 5, 60), dtype=torch.int16),
            "weight": torch.full((4, 3, 3, 60), 127, dtype=torch.int8),  # 540 * 127 * 2^15
        },
        "could wrap",
    ),
    (CONV_S16, {"activation_max": 40000}, "int16"),
    (DEPTHWISE_S16, {"bias": torch.zeros(4, dtype=torch.int32)}, "int64"),
    (DEPTHWISE_S16, {"output_offset": -1}, "zero points"),
    # a path takes only the shapes its function computes
    (CONV_ROWS, {"padding": [1, 0]}, "path 1"),
    (CONV_ROWS, {"dilation": [2, 1]}, "path 1"),
    (CONV_ROWS, {"weight": torch.zeros((4, 3, 3, 3), dtype=torch.int8)}, "path 1"),
    (
        CONV_ROWS,
        {  # two groups
            "input": torch.zeros((1, 3, 6, 4), dtype=torch.int8),
            "weight": torch.zeros((4, 1, 1, 2), dtype=torch.int8),
        },
        "path 1",
    ),
    (DEPTHWISE_3X3, {"padding": [2, 1]}, "path 1"),
    (DEPTHWISE_3X3, {"input": torch.zeros((2, 5, 6, 4), dtype=torch.int8)}, "path 1"),
    (DEPTHWISE_3X3, {"weight": torch.zeros((1, 1, 3, 4), dtype=torch.int8)}, "path 1"),
    (DEPTHWISE_LANES, {"stride": [1, 3]}, "path 2"),
    (DEPTHWISE_LANES, {"dilation": [1, 2]}, "path 2"),
    (DEPTHWISE_LANES, {"weight": torch.zeros((1, 5, 5, 4), dtype=torch.int8)}, "path 2"),
    (
        DEPTHWISE_LANES,
        {  # 6 channels: not a multiple of 4
            "input": torch.zeros((1, 5, 6, 6), dtype=torch.int8),
            "weight": torch.zeros((1, 3, 3, 6), dtype=torch.int8),
            "bias": torch.zeros(6, dtype=torch.int32),
            "multipliers": torch.full((6,), 2**30, dtype=torch.int32),
            "shifts": torch.zeros(6, dtype=torch.int32),
        },
        "path 2",
    ),
    (
        DEPTHWISE_LANES,
        {  # multiplier 2
            "input": torch.zeros((1, 5, 6, 2), dtype=torch.int8),
            "depth_multiplier": 2,
        },
        "path 2",
    ),
]


@pytest.mark.parametrize(("conv", "changes", "words"), REFUSALS, ids=[_id(c) for c, *_ in REFUSALS])
def test_rejects_channel_mismatch(conv: Conv, changes: dict, words: str | None) -> None:
    case = conv.fixed() | changes
    with pytest.raises(ValueError, match=words):
        conv.call(case)


def test_depthwise_channel_mapping() -> None:
    """Output channel c reads input channel c // depth_multiplier."""
    case = depthwise_fixed()
    case["weight"] = torch.zeros((1, 1, 1, 4), dtype=torch.int8)
    case["weight"][0, 0, 0] = torch.tensor([1, 2, 3, 4], dtype=torch.int8)
    case.update(padding=[0, 0], stride=[1, 1], input_offset=0, output_offset=0)
    case["bias"] = torch.zeros(4, dtype=torch.int32)
    case["multipliers"] = torch.full((4,), 2**30, dtype=torch.int32)
    case["shifts"] = torch.ones(4, dtype=torch.int32)  # x 1.0
    case["input"] = torch.tensor([[[[10, -20]]]], dtype=torch.int8)
    assert DEPTHWISE.call(case).tolist() == [[[[10, 20, -60, -80]]]]


def test_grouped_channel_mapping() -> None:
    """Two groups: output channels 0-1 read input channels 0-1, 2-3 read 2-3."""
    case = conv_fixed()
    case["weight"] = torch.ones((4, 1, 1, 2), dtype=torch.int8)
    case["weight"][1] = 2
    case["weight"][3, 0, 0] = torch.tensor([1, -1], dtype=torch.int8)
    case.update(padding=[0, 0], stride=[1, 1], input_offset=0, output_offset=0)
    case.update(activation_min=-128, activation_max=127)
    case["bias"] = torch.zeros(4, dtype=torch.int32)
    case["multipliers"] = torch.full((4,), 2**30, dtype=torch.int32)
    case["shifts"] = torch.ones(4, dtype=torch.int32)  # x 1.0
    case["input"] = torch.tensor([[[[1, 2, 10, 30]]]], dtype=torch.int8)
    assert CONV.call(case).tolist() == [[[[3, 6, 40, -20]]]]
