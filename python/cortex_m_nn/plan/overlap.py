"""Overlapping buffers: a kernel's output may take the bytes of the input it has already
consumed, where the CMSIS-NN code path it runs is known to read ahead of its writes.

A kernel reads its input and writes its output in an order fixed by its code path (operator,
dtype case, ISA, and for convolutions the shape, which picks the wrapper's path). Where that
order is *pixel-major* — output pixels in raster order, each group of them computed from its
input window before the next group's window is read — the input below the windows still to be
read is dead, and the output may be written over it. The order of each path is read from
CMSIS-NN's loops (:func:`conv_order`, :func:`depthwise_order`, and a call's own ``path``:
``arm_convolve_1x1_s8`` row by row, ``arm_depthwise_conv_3x3_s8`` pixel by pixel, our
``depthwise_conv_lanes_s8`` a tile of output rows at a time, ``pointwise_conv_s8`` and
``window_conv_s8`` a pixel pair at a time, ``core.compute``); a path that
writes one output channel for every pixel before the next (the DSP and scalar wrapper's 1x1
convolutions, fully connected layers, a depthwise convolution of more than 124 channels on MVE)
has no overlap.

For a call whose input dies with it, :func:`lead_bytes` gives the *lead*: the output may start
``lead`` bytes below the input's first byte, or anywhere lower (a negative lead: above it).
The planner (:func:`cortex_m_nn.plan.placement.overlapping`) may then give the two tensors
common bytes. ``tests/kernels`` and ``tests/target`` run programs planned this way on the
real kernels of every ISA; a read of a byte already overwritten changes their outputs.

Only int8 calls of conv2d, depthwise_conv2d, avg_pool2d, max_pool2d, add and mul (without
broadcasting), and stages (``ops.stage``: the lead their program gives) are considered;
anything else keeps its own bytes. A graph input may be overwritten once consumed, as any
activation (the firmware API sets every input before each run).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from executorch.exir import memory
from torch.fx import GraphModule, Node

from cortex_m_nn.core import compute
from cortex_m_nn.core.cmsis_nn import (
    LANES,
    POINTWISE,
    ROWS,
    THREE_BY_THREE,
    WINDOW,
    mve_one_by_n_inexact,
)
from cortex_m_nn.core.target import Isa
from cortex_m_nn.ops.library import NAMESPACE
from cortex_m_nn.plan.storage import operator_name, read_storage

#: The stage call's meta key of its lead (``plan.fold``).
STAGE_LEAD = "cortex_m_nn_stage_lead"
#: A rule: an int8 call's (input, lead) pairs on an ISA.
Rule = Callable[[Isa, Node], list[tuple[Node, int]]]

#: CMSIS-NN's MVE depthwise path (arm_depthwise_conv_s8_opt) walks blocks of this many channels
#: over the whole image, one block after the other (CH_IN_BLOCK_MVE).
MVE_DEPTHWISE_CHANNEL_BLOCK = 124


@dataclass(frozen=True)
class Order:
    """A pixel-major code path: output pixels in raster order, in groups of ``group``.

    After it first writes a byte of output pixel ``p`` the kernel reads only the input windows
    of pixels ``q >= p - group + 1``; ``strict``: every read of a group comes before the
    group's first write, so only windows of pixels ``q > p`` are read after it.
    """

    group: int
    strict: bool = False

    def still_read(self, pixel: int) -> int:
        """The first pixel whose window may still be read once ``pixel`` is written."""
        return pixel + 1 if self.strict else max(0, pixel - self.group + 1)


@dataclass(frozen=True)
class Window:
    """A window operator's geometry on NHWC tensors (batch 1)."""

    input: tuple[int, int, int, int]
    output: tuple[int, int, int, int]
    stride: tuple[int, int]
    padding: tuple[int, int]


def conv_order(
    isa: Isa, window: Window, weight: Sequence[int], dilation: Sequence[int]
) -> Order | None:
    """The order of ``arm_convolve_wrapper_s8``'s path for this convolution (or of
    ``arm_convolve_s8``, which op_conv2d.cpp calls directly for an inexact MVE 1xN)."""
    _, height, _, channels = window.input
    _, kernel_h, kernel_w, weight_channels = weight
    if weight_channels != channels:
        return None  # grouped: arm_convolve_s8 walks one group over the image at a time
    one_by_one = window.padding == (0, 0) and (kernel_h, kernel_w) == (1, 1)
    if one_by_one and tuple(dilation) == (1, 1):
        if isa is Isa.MVE:
            return Order(4)  # arm_nn_mat_mult_nt_t_s8 on the input, four rows at a time
        if window.stride == (1, 1):
            return None  # arm_nn_mat_mult_nt_t_s8 (DSP, scalar): channel-major over the image
        return Order(window.output[2])  # arm_convolve_1x1_s8: channel-major within each row
    one_by_n = height == 1 and kernel_h == 1 and dilation[1] == 1
    one_by_n = one_by_n and (window.stride[1] * channels) % 4 == 0
    if isa is Isa.MVE and one_by_n:
        shapes = (window.input, tuple(weight), window.output, window.stride, window.padding)
        if not mve_one_by_n_inexact(*shapes, tuple(dilation)):
            return Order(4)  # arm_convolve_1_x_n_s8: nt_t_s8 on the input between its edges
    return Order(1, strict=True)  # arm_convolve_s8: each group's windows copied to scratch first


def depthwise_order(
    isa: Isa, window: Window, multiplier: int, dilation: Sequence[int]
) -> Order | None:
    """The order of ``arm_depthwise_conv_wrapper_s8``'s path for this call."""
    channels = window.input[3]
    if isa is Isa.MVE and channels == 1 and window.output[3] > 1:
        return None  # converted to a convolution, through the 1xN path unchecked here
    if isa is Isa.MVE and multiplier == 1 and tuple(dilation) == (1, 1):
        if channels > MVE_DEPTHWISE_CHANNEL_BLOCK:
            return None  # arm_depthwise_conv_s8_opt: one channel block over the image at a time
    # _opt (MVE, DSP), _3x3 (DSP, scalar) and arm_depthwise_conv_s8: pixel by pixel, each
    # pixel's channels written in chunks between reads of the same window
    return Order(1)


def lead_bytes(order: Order, window: Window) -> int:
    """How far below the input's first byte the output may start (int8 NHWC, batch 1), rounded
    up to the planner's 16-byte alignment: output pixel ``p``'s bytes must end at or below the
    lowest byte of every window still to be read once ``p`` is written."""
    _, in_h, in_w, in_c = window.input
    _, out_h, out_w, out_c = window.output
    pixels = out_h * out_w
    lowest = []  # the lowest input byte of each output pixel's window
    for y in range(out_h):
        row = max(0, y * window.stride[0] - window.padding[0])
        for x in range(out_w):
            column = max(0, x * window.stride[1] - window.padding[1])
            lowest.append(min(row, in_h - 1) * in_w * in_c + min(column, in_w - 1) * in_c)
    return _lead(order, pixels, out_c, lowest)


def elementwise_lead(elements: int) -> int:
    """arm_elementwise_add_s8 / _mul_s8 read each block of (up to) four elements of both inputs
    before writing it: the output may start at the input's first byte (lead 0)."""
    return _lead(Order(4, strict=True), elements, 1, list(range(elements)))


def _lead(order: Order, pixels: int, pixel_bytes: int, lowest: list[int]) -> int:
    suffix = [math.inf] * (pixels + 1)  # suffix[q]: lowest byte of the windows of q, q+1, …
    for q in range(pixels - 1, -1, -1):
        suffix[q] = min(lowest[q], suffix[q + 1])
    lead = -math.inf
    for p in range(pixels):
        still = suffix[order.still_read(p)] if order.still_read(p) < pixels else math.inf
        if still != math.inf:
            lead = max(lead, (p + 1) * pixel_bytes - still)
    if lead == -math.inf:
        return 0
    return -(-int(lead) // 16) * 16


# --- the calls of an execution-dialect graph ---------------------------------------------------


@dataclass(frozen=True)
class Overlap:
    """``output`` (an ``alloc`` node) may start ``lead`` bytes below ``input`` (the storage it
    reads, dead after ``call``) or lower."""

    call: Node
    input: Node
    output: Node
    lead: int


def _alloc(node: Node) -> tuple[tuple[int, ...], torch.dtype] | None:
    """An ``alloc`` node's (shape, dtype); None for an alloc of several tensors."""
    spec = node.args[0]
    if len(spec) != 2 or not isinstance(spec[1], torch.dtype):
        return None
    return tuple(int(d) for d in spec[0]), spec[1]


def _shape(node: Node) -> tuple[int, ...]:
    if node.target is memory.alloc:
        return _alloc(node)[0]
    return tuple(int(d) for d in node.meta["val"].shape)


def _dtype(node: Node) -> torch.dtype | None:
    if node.target is memory.alloc:
        allocated = _alloc(node)
        return allocated[1] if allocated else None
    return getattr(node.meta.get("val"), "dtype", None)


def _window(call: Node, stride_arg: int) -> Window:
    """The call's window: its stride and padding are arguments ``stride_arg`` and the next."""
    stride, padding = call.args[stride_arg], call.args[stride_arg + 1]
    return Window(_shape(call.args[0]), _shape(call.kwargs["out"]), tuple(stride), tuple(padding))


def _convolution(order_of: Callable[[Isa, Window, Node], Order | None]) -> Rule:
    """The rule of a convolution whose int8 case's ``order_of`` its path (weight 4-D int8:
    an int4 case packs two weights a byte, as uint8)."""

    def rule(isa: Isa, call: Node) -> list[tuple[Node, int]]:
        weight = call.args[1]
        if len(_shape(weight)) != 4 or _dtype(weight) is not torch.int8:
            return []
        window = _window(call, 5)
        order = order_of(isa, window, call)
        return [] if order is None else [(call.args[0], lead_bytes(order, window))]

    return rule


def _pool(isa: Isa, call: Node) -> list[tuple[Node, int]]:
    # the kernel size does not move a window's lowest byte, which is all a lead reads
    return [(call.args[0], lead_bytes(Order(1), _window(call, 2)))]


def _elementwise(isa: Isa, call: Node) -> list[tuple[Node, int]]:
    elements = math.prod(_shape(call.kwargs["out"]))
    inputs = [a for a in call.args[:2] if isinstance(a, Node)]
    if any(math.prod(_shape(a)) != elements for a in inputs):
        return []  # broadcast: the kernel walks rows of the larger input, not checked here
    return [(a, elementwise_lead(elements)) for a in inputs]


def _stage(isa: Isa, call: Node) -> list[tuple[Node, int]]:
    """A stage's lead, read from its program by ``plan.fold`` (``ops.stage.lead``)."""
    found = call.meta.get(STAGE_LEAD)
    return [] if found is None else [(call.args[0], -(-found // 16) * 16)]


def _conv2d_order(isa: Isa, window: Window, call: Node) -> Order | None:
    if call.args[-2] == ROWS:  # path, before scratch_bytes: arm_convolve_1x1_s8 on any ISA
        return Order(window.output[2])
    if call.args[-2] in (POINTWISE, WINDOW) and isa is not Isa.MVE:  # ours: a pixel pair read,
        return Order(2, strict=True)  # then written
    if call.args[-2] in (POINTWISE, WINDOW):  # on MVE a quad, a block of channels at a time
        return Order(4, strict=True) if window.output[3] <= compute.QUAD_BLOCK else None
    return conv_order(isa, window, _shape(call.args[1]), call.args[7])


def _depthwise_order(isa: Isa, window: Window, call: Node) -> Order | None:
    if call.args[-2] == THREE_BY_THREE:  # arm_depthwise_conv_3x3_s8 on any ISA
        return Order(1)
    if call.args[-2] == LANES:  # every block of a tile's rows, reading them again per block
        tile = compute.lanes_tile(isa, window.output, window.stride, int(call.args[-1]))
        return Order(max(tile, 1) * window.output[2])
    return depthwise_order(isa, window, int(call.args[8]), call.args[7])


#: operator → the (input, lead) pairs of an int8 call.
RULES: dict[str, Rule] = {
    "conv2d": _convolution(_conv2d_order),
    "depthwise_conv2d": _convolution(_depthwise_order),
    "avg_pool2d": _pool,
    "max_pool2d": _pool,
    "add": _elementwise,
    "mul": _elementwise,
    "stage": _stage,
}


def overlaps(graph_module: GraphModule, isa: Isa) -> list[Overlap]:
    """Every (input, output) pair of the graph's calls that may share bytes: an int8 call of
    a pixel-major path whose input is an activation or a graph input (not a state) that
    nothing reads after the call, through any alias of it either."""
    nodes = list(graph_module.graph.nodes)
    position = {node: index for index, node in enumerate(nodes)}
    storage = read_storage(graph_module)
    last_read: dict[object, int] = {}
    for node in nodes:
        for owned in storage.of(node):
            for user in node.users:
                last_read[owned] = max(last_read.get(owned, -1), position[user])
    found = []
    for call in storage.calls:
        name = operator_name(call).removeprefix(f"{NAMESPACE}::")
        out = call.kwargs.get("out") if name in RULES else None
        if out is None or _dtype(call.args[0]) is not torch.int8 or _dtype(out) is not torch.int8:
            continue
        for source, lead in RULES[name](isa, call):
            alloc = storage.owner.get(source)
            if storage.kind.get(alloc) not in ("activation", "input"):
                continue  # a state, one part of an alloc of several
            if not isinstance(alloc, Node):
                continue
            if last_read[alloc] <= position[call]:
                found.append(Overlap(call, alloc, out, lead))
    return found
