"""The small schedule's overlaps (plan.overlap): each lead against a brute-force walk of the
bytes a kernel reads, the code paths' orders against CMSIS-NN's loops, and the planner.

The walk is independent of ``lead_bytes``: it lists every byte of every output pixel's input
window (rows, columns and channels, clipped at the borders) and finds the smallest lead from
which on, moving the output down one byte at a time, no output pixel covers a byte that a
window still to be read holds."""

from __future__ import annotations

import pytest
from tests.python import models

from cortex_m_nn.core.options import IoType
from cortex_m_nn.core.target import Core, Isa, Target
from cortex_m_nn.frontend.calibration import synthetic
from cortex_m_nn.frontend.model_source import ModelSource, load_model
from cortex_m_nn.pipeline import compile_model
from cortex_m_nn.plan.overlap import (
    Order,
    Window,
    conv_order,
    depthwise_order,
    elementwise_lead,
    lead_bytes,
)


def window(size: int, channels: int, out_channels: int, kernel: int, stride: int, pad: int):
    out = (size + 2 * pad - kernel) // stride + 1
    return Window(
        (1, size, size, channels), (1, out, out, out_channels), (stride, stride), (pad, pad)
    )


def window_bytes(w: Window, kernel: int, pixel: int) -> set[int]:
    """Every input byte output pixel ``pixel``'s window holds."""
    _, height, width, channels = w.input
    y, x = divmod(pixel, w.output[2])
    rows = range(
        max(0, y * w.stride[0] - w.padding[0]), min(height, y * w.stride[0] - w.padding[0] + kernel)
    )
    cols = range(
        max(0, x * w.stride[1] - w.padding[1]), min(width, x * w.stride[1] - w.padding[1] + kernel)
    )
    return {(r * width + c) * channels + ch for r in rows for c in cols for ch in range(channels)}


def smallest_safe_lead(order: Order, w: Window, kernel: int) -> int:
    pixels = w.output[1] * w.output[2]
    out_c = w.output[3]
    windows = [window_bytes(w, kernel, q) for q in range(pixels)]
    still = [set().union(*windows[order.still_read(p) :]) for p in range(pixels)]

    def safe(lead: int) -> bool:
        return all(
            not any(b in still[p] for b in range(p * out_c - lead, (p + 1) * out_c - lead))
            for p in range(pixels)
        )

    # every lead from the answer up (the output lower and lower) must be safe: the planner
    # places an output at its lead below the input or anywhere lower
    lead = pixels * out_c  # the output wholly below the input
    while safe(lead - 1):
        lead -= 1
    return lead


#: (input size, channels, output channels, kernel, stride, padding, order)
CASES = [
    (8, 4, 4, 3, 1, 1, Order(1, strict=True)),  # arm_convolve_s8
    (8, 4, 8, 3, 2, 1, Order(1, strict=True)),
    (8, 4, 4, 3, 1, 1, Order(1)),  # depthwise, pools: a window read between its own writes
    (9, 3, 3, 5, 2, 2, Order(1)),
    (8, 4, 8, 1, 1, 0, Order(4)),  # 1x1 on MVE, four rows at a time
    (8, 8, 4, 1, 2, 0, Order(4)),
    (8, 4, 4, 1, 2, 0, Order(4)),  # 1x1 strided on DSP: a row at a time (group: output width 4)
    (7, 2, 2, 3, 1, 0, Order(1)),
]


@pytest.mark.parametrize("size,channels,out_channels,kernel,stride,pad,order", CASES)
def test_lead_is_the_smallest_safe_one_rounded_to_16(
    size: int, channels: int, out_channels: int, kernel: int, stride: int, pad: int, order: Order
) -> None:
    w = window(size, channels, out_channels, kernel, stride, pad)
    exact = smallest_safe_lead(order, w, kernel)
    lead = lead_bytes(order, w)
    assert lead % 16 == 0
    assert exact <= lead < exact + 16 + _slack(w, kernel)


def _slack(w: Window, kernel: int) -> int:
    """lead_bytes reads a window's lowest byte as the bound of all it holds; a window wider
    than a pixel leaves bytes of its first row unread past its columns, which the walk may use
    and the closed form does not (never more than one input row)."""
    return w.input[2] * w.input[3] if kernel > 1 else 0


def test_elementwise_output_may_start_at_its_input() -> None:
    assert elementwise_lead(100) == 0


#: (ISA, input HWC, weight OHWI, stride, padding) → the order conv_order gives
CONV_PATHS = [
    (Isa.MVE, (8, 8, 4), (8, 1, 1, 4), (1, 1), (0, 0), Order(4)),  # 1x1_fast: nt_t_s8
    (Isa.DSP, (8, 8, 4), (8, 1, 1, 4), (1, 1), (0, 0), None),  # channel-major
    (Isa.SCALAR, (8, 8, 4), (8, 1, 1, 4), (1, 1), (0, 0), None),
    (Isa.DSP, (8, 8, 4), (8, 1, 1, 4), (2, 2), (0, 0), Order(4)),  # 1x1_s8: a row at a time
    (Isa.MVE, (8, 8, 4), (8, 3, 3, 4), (1, 1), (1, 1), Order(1, strict=True)),  # im2col
    (Isa.DSP, (8, 8, 4), (8, 3, 3, 4), (1, 1), (1, 1), Order(1, strict=True)),
    (Isa.MVE, (8, 8, 8), (8, 3, 3, 4), (1, 1), (1, 1), None),  # grouped
]


@pytest.mark.parametrize("isa,hwc,weight,stride,padding,expected", CONV_PATHS)
def test_convolution_paths(isa, hwc, weight, stride, padding, expected) -> None:
    height, width, _ = hwc
    out = ((height + 2 * padding[0] - weight[1]) // stride[0] + 1,) * 2
    w = Window((1, *hwc), (1, *out, weight[0]), stride, padding)
    assert conv_order(isa, w, weight, (1, 1)) == expected


def test_depthwise_paths() -> None:
    def w(channels: int, out_channels: int) -> Window:
        return Window((1, 8, 8, channels), (1, 8, 8, out_channels), (1, 1), (1, 1))

    assert depthwise_order(Isa.MVE, w(124, 124), 1, (1, 1)) == Order(1)
    assert depthwise_order(Isa.MVE, w(125, 125), 1, (1, 1)) is None  # channel blocks
    assert depthwise_order(Isa.DSP, w(200, 200), 1, (1, 1)) == Order(1)
    assert depthwise_order(Isa.MVE, w(1, 8), 8, (1, 1)) is None  # made a convolution


def compiled(source: ModelSource, schedule: str, isa: Isa = Isa.MVE):
    return compile_model(
        source,
        Target(Core.M55, isa),
        synthetic(source.example_inputs, count=4),
        progress=False,
        io=IoType.INT8,
        schedule=schedule,
    )


def test_small_schedule_shares_bytes_only_as_leads_allow() -> None:
    """DS-CNN on MVE: the small schedule's arena is below fast's (its peak, a depthwise call,
    takes its input's bytes), every shared byte is an overlap its lead allows, fast shares
    none. (On DSP its peak is a 1x1 convolution, which walks channels first: no overlap.)"""
    source, isa = load_model(None), Isa.MVE
    fast, small = compiled(source, "fast", isa).memory, compiled(source, "small", isa).memory
    assert fast.overlapping() == [] and fast.conflicts() == []
    assert small.conflicts() == [] and small.overlapping()
    assert small.arena_bytes < fast.arena_bytes
    tensors = {t.name: t for t in small.tensors}
    for out, source_name in small.overlapping():
        lead = small.leads[out, source_name]
        assert tensors[out].offset <= tensors[source_name].offset - lead


@pytest.mark.parametrize("isa", [Isa.MVE, Isa.DSP, Isa.SCALAR])
def test_small_schedule_never_above_fast(isa: Isa) -> None:
    for factory in (models.conv_stack, models.pools):
        source = ModelSource(factory.__name__, *factory())
        fast, small = compiled(source, "fast", isa), compiled(source, "small", isa)
        assert small.memory.conflicts() == []
        assert small.memory.arena_bytes <= fast.memory.arena_bytes
        assert small.memory.lower_bound_bytes == fast.memory.lower_bound_bytes
