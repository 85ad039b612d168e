"""cortex_m_nn::conv2d, ::depthwise_conv2d and ::transpose_conv2d on the host runtime
(arm_convolve_wrapper_s8, arm_depthwise_conv_wrapper_s8, arm_transpose_conv_wrapper_s8; the
int16 rows: arm_convolve_wrapper_s16, arm_depthwise_conv_wrapper_s16; the int4 rows:
arm_convolve_wrapper_s4 or arm_convolve_s4, arm_depthwise_conv_wrapper_s4; the path rows:
arm_convolve_1x1_s8, arm_depthwise_conv_3x3_s8) against their references: one table, a row per
operator and case."""

from __future__ import annotations

import itertools

import torch
from hypothesis import assume
from hypothesis import strategies as st

from cortex_m_nn.core import compute
from cortex_m_nn.core.cmsis_nn import LANES, POINTWISE, ROWS, THREE_BY_THREE, WINDOW, WRAPPER
from cortex_m_nn.lower import scratch
from cortex_m_nn.ops import int4 as packing
from cortex_m_nn.ops import transpose_conv2d as transposed
from cortex_m_nn.ops.conv2d import dsp_tail_defect, output_size
from cortex_m_nn.ops.params import int16_sums_fit, sides
from cortex_m_nn.ops.transpose_conv2d import unsupported_reason

from .harness import Call, CallTable, bit_exact_test
from .strategies import (
    activation_range,
    conv_geometry,
    generator,
    host_target,
    int8,
    per_channel,
)


def _path_geometry(draw: st.DrawFn, g: dict, path: int, depthwise: bool) -> None:
    """``g`` made one the path's function computes: a 1x1 convolution without padding or
    dilation (``ROWS``; ``POINTWISE``: of stride 1), a 3x3 depthwise one without dilation,
    pads of at most 1 (``THREE_BY_THREE``), or stride 1 or 2 across and pads up to 2
    (``LANES``)."""
    if path == WRAPPER or (path == WINDOW and not depthwise):
        return  # any window (of a multiple of 4 input channels, drawn below)
    g["dilation"] = [1, 1]
    if not depthwise:
        g["kernel"], g["padding"] = (1, 1), [0, 0]
        if path == POINTWISE:
            g["stride"] = [1, 1]
        return
    most = 2 if path == LANES else 1
    top, left, bottom, right = (draw(st.integers(0, most)) for _ in range(4))
    if path == LANES:
        g["stride"] = [draw(st.integers(1, 3)), draw(st.integers(1, 2))]
    g["kernel"], g["padding"] = (3, 3), [top, left, bottom, right]
    h = draw(st.integers(max(1, 3 - top - bottom), 11))
    g["size"] = (h, draw(st.integers(max(1, 3 - left - right), 11)))


def conv_calls(
    isa: str, depthwise: bool = False, int16: bool = False, int4: bool = False, path: int = 0
) -> st.SearchStrategy[Call]:
    """conv2d (grouped in one call of three: weight ``[Cout, KH, KW, Cin / groups]``), or
    depthwise_conv2d (weight ``[1, KH, KW, Cin * multiplier]``); ``int16``: conv2d's int16
    case (arm_convolve_wrapper_s16: no groups, zero offsets, int64 bias, sometimes more than
    512 columns, where CMSIS-NN's sums go on in int64); ``int4``: packed weights in [-8, 7]
    (conv2d ``[Cout, KH, KW * Cin / 2]``, KW * Cin even, no groups, one call in three a 1xN
    convolution of height 1; depthwise an even Cin); ``path``: the function of
    ``core.cmsis_nn``'s path (int8, one image, no groups, multiplier 1, no scratch)."""

    @st.composite
    def calls(draw: st.DrawFn) -> Call:
        g = conv_geometry(draw)
        _path_geometry(draw, g, path, depthwise)
        if int4 and not depthwise and draw(st.sampled_from([False, False, True])):
            g["kernel"], g["size"] = (1, g["kernel"][1]), (1, g["size"][1])  # 1xN
            g["dilation"][0] = 1
            pad = g["padding"]
            g["padding"] = [0, pad[1], 0, pad[3]] if len(pad) == 4 else [0, pad[1]]
        gen = generator(draw)
        n, c_in = (
            draw(st.integers(1, 1 if path not in (WRAPPER, LANES, POINTWISE, WINDOW) else 2)),
            draw(st.integers(2 if depthwise else 1, 12)),
        )
        if path == LANES and depthwise:
            c_in = 4 * draw(st.integers(1, 4))
        if path == POINTWISE and not depthwise and draw(st.booleans()):
            c_in = draw(st.integers(13, 70))  # several groups of four inputs, and a tail
        if path == WINDOW:
            c_in = 4 * draw(st.integers(1, 6))
        if int4 and depthwise:
            c_in = 2 * draw(st.integers(1, 6))  # the generic s4 kernel's odd-channel defect
        elif int4 and (g["kernel"][1] * c_in) % 2:
            c_in += 1  # packed rows of KW * Cin hold whole bytes
        if int16 and not depthwise and draw(st.booleans()):
            c_in = draw(st.integers(24, 48))
        mult = draw(st.integers(1, 1 if path else 3)) if depthwise else None
        c_out = c_in * mult if depthwise else draw(st.integers(1, 10))
        per_group = c_in
        if not (depthwise or int16 or int4 or path) and draw(st.sampled_from([False, False, True])):
            groups, per_group = draw(st.integers(2, 4)), draw(st.integers(1, 4))
            c_in, c_out = groups * per_group, groups * draw(st.integers(1, 3))
        (kh, kw), (h, w) = g["kernel"], g["size"]
        top, left, bottom, right = sides(g["padding"])
        three_by_three = depthwise and (kh, kw) == (3, 3) and mult == 1 and g["dilation"] == [1, 1]
        padded = len(g["padding"]) == 4 and max(bottom, right) > 1
        assume(not (three_by_three and padded and not int16 and not int4 and path != LANES))
        oh = output_size(h, kh, g["stride"][0], top, g["dilation"][0], bottom)
        ow = output_size(w, kw, g["stride"][1], left, g["dilation"][1], right)
        bias, multipliers, shifts = per_channel(draw, c_out, gen)
        act_min, act_max = activation_range(draw)
        weight = (1, kh, kw, c_out) if depthwise else (c_out, kh, kw, per_group)
        shapes = ((n, h, w, c_in), weight, (n, oh, ow, c_out))
        window = (g["stride"], g["padding"], g["dilation"])
        if depthwise:
            need = scratch.depthwise_conv2d_scratch_bytes(
                host_target(isa), *shapes, *window, mult, int16=int16, int4=int4
            )
        else:
            need = scratch.conv2d_scratch_bytes(
                host_target(isa), *shapes, *window, int16=int16, int4=int4
            )
        if int16:
            kernel = int8(weight, gen, low=-128 if depthwise else -127)
            if not depthwise:
                assume(int16_sums_fit(kernel))
                assume(not dsp_tail_defect(kh * kw * c_in, c_out, oh * ow))
            low = draw(st.integers(-32768, 0))
            x = torch.randint(-32768, 32768, (n, h, w, c_in), generator=gen).to(torch.int16)
            bias = torch.randint(-(2**40), 2**40, (c_out,), generator=gen, dtype=torch.int64)
            numbers = (0, 0, low, draw(st.integers(low, 32767)))  # zero offsets, int16 range
        else:
            kernel = int8(weight, gen, low=-127)
            if int4:
                values = torch.randint(-8, 8, weight, generator=gen, dtype=torch.int8)
                kernel = packing.pack(values if depthwise else values.flatten(2))
            x = int8((n, h, w, c_in), gen)
            offsets = draw(st.integers(-127, 128)), draw(st.integers(-128, 127))
            numbers = (*offsets, act_min, act_max)
        depth = (mult,) if depthwise else ()
        if path == LANES and depthwise:  # the buffer of a tile of output rows (0: none)
            tile = draw(st.integers(0, 3))
            need = compute.lanes_buffer_bytes(host_target(isa).isa, shapes[2], g["stride"], tile)
        elif path == POINTWISE:  # a pair of pixels' inputs, widened
            need = compute.pointwise_buffer_bytes(host_target(isa).isa, c_in)
        elif path == WINDOW:  # a pair of pixels' windows, widened
            need = compute.window_buffer_bytes(host_target(isa).isa, weight)
        elif path:
            need = 0  # the CMSIS-NN path functions take no buffer
        args = (x, kernel, bias, multipliers, shifts, *window, *depth, *numbers, path, need)
        return Call("depthwise_conv2d" if depthwise else "conv2d", args)

    return calls()


def _geometries() -> list[tuple]:
    """Every small layer CMSIS-NN computes exactly (both paths: the reverse-conv one needs
    more than 16 input channels), to draw from."""
    found = []
    for k, s, p, op, size, c_in in itertools.product(
        range(1, 5), range(1, 4), range(0, 4), range(0, 3), range(1, 7), (3, 17)
    ):
        kernel, stride, padding, output_padding = (k, k), [s, s], [p, p], [op, op]
        if (
            op < s
            and unsupported_reason((size, size), c_in, kernel, stride, padding, output_padding)
            is None
        ):
            found.append((k, s, p, op, size, c_in))
    return found


GEOMETRIES = _geometries()


def transpose_conv2d_calls(isa: str) -> st.SearchStrategy[Call]:
    @st.composite
    def calls(draw: st.DrawFn) -> Call:
        k, s, p, op, size, c_in = draw(st.sampled_from(GEOMETRIES))
        # vary each axis independently where the pair stays supported
        kh, kw, stride, padding, output_padding = k, k, [s, s], [p, p], [op, op]
        h, w = size, size
        if draw(st.booleans()):
            k2, s2, p2, op2, w, _ = draw(st.sampled_from(GEOMETRIES))
            trial = ((h, w), c_in, (k, k2), [s, s2], [p, p2], [op, op2])
            if unsupported_reason(*trial) is None:
                kw, stride, padding, output_padding = k2, [s, s2], [p, p2], [op, op2]
            else:
                w = size
        n = draw(st.integers(1, 2))
        if c_in == 17:
            c_in = draw(st.sampled_from([17, 24]))
        else:
            c_in = draw(st.integers(1, 16))
        c_out = draw(st.integers(1, 8))
        assert unsupported_reason((h, w), c_in, (kh, kw), stride, padding, output_padding) is None
        oh = transposed.output_size(h, kh, stride[0], padding[0], output_padding[0])
        ow = transposed.output_size(w, kw, stride[1], padding[1], output_padding[1])
        plan = scratch.transpose_conv2d_scratch(
            host_target(isa),
            (n, h, w, c_in),
            (c_out, kh, kw, c_in),
            (n, oh, ow, c_out),
            stride,
            padding,
        )
        gen = generator(draw)
        bias, multipliers, shifts = per_channel(draw, c_out, gen)
        x, kernel = int8((n, h, w, c_in), gen), int8((c_out, kh, kw, c_in), gen, low=-127)
        offsets = draw(st.integers(-127, 128)), draw(st.integers(-128, 127))
        numbers = (*offsets, *activation_range(draw), plan.reverse_conv_offset, plan.total_bytes)
        args = (x, kernel, bias, multipliers, shifts, stride, padding, output_padding, *numbers)
        return Call("transpose_conv2d", args)

    return calls()


CALLS: CallTable = {
    "conv2d": conv_calls,
    "conv2d[int16]": lambda isa: conv_calls(isa, int16=True),
    "depthwise_conv2d": lambda isa: conv_calls(isa, depthwise=True),
    "depthwise_conv2d[int16]": lambda isa: conv_calls(isa, depthwise=True, int16=True),
    "conv2d[int4]": lambda isa: conv_calls(isa, int4=True),
    "conv2d[rows]": lambda isa: conv_calls(isa, path=ROWS),
    "conv2d[pointwise]": lambda isa: conv_calls(isa, path=POINTWISE),
    "conv2d[window]": lambda isa: conv_calls(isa, path=WINDOW),
    "depthwise_conv2d[3x3]": lambda isa: conv_calls(isa, depthwise=True, path=THREE_BY_THREE),
    "depthwise_conv2d[lanes]": lambda isa: conv_calls(isa, depthwise=True, path=LANES),
    "depthwise_conv2d[int4]": lambda isa: conv_calls(isa, depthwise=True, int4=True),
    "transpose_conv2d": transpose_conv2d_calls,
}


test_bit_exact = bit_exact_test(CALLS)
