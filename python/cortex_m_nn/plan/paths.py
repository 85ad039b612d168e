"""Which CMSIS-NN function computes each int8 convolution (its ``path`` argument,
``core.cmsis_nn``), chosen for the ``small`` schedule where another function than the
wrapper's lets the planner use less RAM, with the same numbers:

- **A 1x1 convolution off MVE** (no padding, dilation or groups) runs ``arm_convolve_1x1_s8``
  (``ROWS``): one output row at a time, so its output may take the bytes of input rows it has
  read (``plan.overlap``). The DSP and scalar wrapper's ``arm_convolve_1x1_s8_fast`` walks the
  whole image once per pair of output channels, so its output needs bytes of its own. Both
  call the same ``arm_nn_mat_mult_nt_t_s8``, a row per call instead of the image.
- **A 3x3 depthwise strip call on MVE** (multiplier 1, no dilation, in a patch-based stage,
  ``plan.strips``) runs our ``depthwise_conv_lanes_s8`` (``LANES``, ``core.compute``) with no
  buffer (each window gathered on the stack), else ``arm_depthwise_conv_3x3_s8``
  (``THREE_BY_THREE``): no scratch either, where MVE's wrapper takes
  ``arm_depthwise_conv_s8_opt`` and its 4 x 124 x 9 = 4,464-byte buffer, which would otherwise
  sit on top of the stage's strip buffers at its peak. ``plan.patch.relax`` then gives a call
  the wrapper's path where the cost model expects it faster (:func:`faster_paths`) and the
  stage's peak leaves room for its buffer.

Both schedules also give a depthwise call our ``depthwise_conv_lanes_s8`` where the kernel
cost model (``plan.costs``, measured under QEMU per ISA) expects fewer instructions than
CMSIS-NN's wrapper (:func:`fastest`), with the tile the model expects fastest among those whose
buffer fits the call's room: the wrapper's scratch, or, given the arena of a plan of the same
graph, what that arena leaves at the call (``plan.schedule.fastest_program`` plans twice).
On DSP the wrapper's ``arm_depthwise_conv_3x3_s8`` takes no buffer, so ours takes the room the
arena leaves there or computes with none (a strip on the stack). The same way, on DSP and MVE, a
1x1 convolution of stride 1 runs our ``pointwise_conv_s8`` (``POINTWISE``) where the cost model
expects it faster than the wrapper's ``arm_convolve_1x1_s8_fast`` and its buffer (a pair of
pixels' inputs widened to int16, or on MVE a quad's gathered) fits the call's room, any other
convolution the wrapper runs through ``arm_convolve_s8`` (no groups, off MVE a multiple of 4
input channels) our ``window_conv_s8`` (``WINDOW``), whose buffer is the size of
``arm_convolve_s8``'s, and an int8 linear layer our ``fully_connected_quads_s8`` (``QUADS``, no
buffer).
"""

from __future__ import annotations

from operator import getitem as operator_getitem

import torch
from torch.fx import GraphModule, Node

from cortex_m_nn.core import compute
from cortex_m_nn.core.cmsis_nn import (
    LANES,
    POINTWISE,
    QUADS,
    ROWS,
    THREE_BY_THREE,
    WINDOW,
    WRAPPER,
    Case,
    cmsis_function,
)
from cortex_m_nn.core.target import Isa, Target
from cortex_m_nn.lower.scratch import conv2d_scratch_bytes, depthwise_conv2d_scratch_bytes
from cortex_m_nn.plan import costs
from cortex_m_nn.plan.liveness import scratch_bytes, sweep
from cortex_m_nn.plan.memory_plan import aligned
from cortex_m_nn.plan.product_costs import product_faster, product_instructions, product_modelled
from cortex_m_nn.plan.stage import OPS


def _value(node: Node) -> torch.Tensor:
    return node.meta["val"]  # execution_graph.propagate_values has run


def _int8(call: Node) -> bool:
    return all(_value(call.args[k]).dtype is torch.int8 for k in (0, 1))


def rows_path(call: Node) -> bool:
    """Whether ``arm_convolve_1x1_s8`` computes this conv2d call: int8, 1x1, no padding,
    dilation or groups."""
    _, kernel_h, kernel_w, per_group = _value(call.args[1]).shape
    one_by_one = (kernel_h, kernel_w) == (1, 1) and not any(call.args[6])
    one_by_one = one_by_one and list(call.args[7]) == [1, 1]
    return one_by_one and _int8(call) and per_group == _value(call.args[0]).shape[3]


def pointwise_path(call: Node, target: Target) -> bool:
    """Whether our ``pointwise_conv_s8`` computes this conv2d call and the cost model measures
    it on ``target``: int8, 1x1, stride 1, no padding, dilation or groups, off MVE a depth that
    is a multiple of four (the DSP model's shapes)."""
    inputs, weight = (_value(call.args[k]).shape for k in (0, 1))
    window = (call.args[5], call.args[6], call.args[7])
    computes = _int8(call) and compute.pointwise_computes(inputs, weight, *window)
    modelled = product_modelled(target.isa, "pointwise")
    depth = target.isa is Isa.MVE or inputs[3] % compute.GROUP == 0
    return computes and depth and modelled


def window_path(call: Node, target: Target) -> bool:
    """Whether our ``window_conv_s8`` computes this conv2d call where the wrapper runs
    ``arm_convolve_s8`` (what the cost model measures): int8, no groups (off MVE a multiple of
    4 input channels), not an unpadded 1x1 (the wrapper's 1x1 functions) nor, on MVE, a
    convolution the wrapper gives ``arm_convolve_1_x_n_s8``."""
    inputs, weight = (_value(call.args[k]).shape for k in (0, 1))
    one_by_one = tuple(weight[1:3]) == (1, 1) and not any(call.args[6])
    one_by_n = target.isa is Isa.MVE and inputs[1] == 1 and weight[1] == 1
    computes = _int8(call) and compute.window_computes(target.isa, inputs, weight)
    modelled = product_modelled(target.isa, "window")
    return computes and not one_by_one and not one_by_n and modelled


def three_by_three_path(call: Node, padding: list[int]) -> bool:
    """Whether ``arm_depthwise_conv_3x3_s8`` computes this depthwise call with ``padding``:
    int8, 3x3, multiplier 1, no dilation, pads of at most 1, one image."""
    _, kernel_h, kernel_w, _ = _value(call.args[1]).shape
    shape = (kernel_h, kernel_w) == (3, 3) and int(call.args[8]) == 1
    shape = shape and list(call.args[7]) == [1, 1] and max(padding) <= 1
    return shape and _int8(call) and _value(call.args[0]).shape[0] == 1


def lanes_path(call: Node) -> bool:
    """Whether our ``depthwise_conv_lanes_s8`` computes this depthwise call: int8, 3x3,
    multiplier 1, no dilation, stride 1 or 2 across, a multiple of 4 channels."""
    kernel = _value(call.args[1]).shape[1:3]
    shape = _value(call.args[0]).shape
    window = (call.args[5], call.args[7], int(call.args[8]))
    return _int8(call) and compute.lanes_computes(shape, kernel, window[0], window[1], window[2])


def strip_path(call: Node, padding: list[int], target: Target) -> int:
    """The path of a stage's strip call of ``call`` padded by ``padding``: a 3x3 depthwise
    strip on MVE runs our lanes kernel (no buffer: windows gathered on the stack) where it
    computes the strip, else ``arm_depthwise_conv_3x3_s8`` (no scratch either); the wrapper's
    otherwise."""
    depthwise = call.target is OPS.depthwise_conv2d.default
    if depthwise and target.isa is Isa.MVE and lanes_path(call):
        return LANES
    if depthwise and target.isa is Isa.MVE and three_by_three_path(call, padding):
        return THREE_BY_THREE
    return WRAPPER


def faster_paths(call: Node, target: Target) -> list[int]:
    """The paths a depthwise strip of ``call`` may take instead of :func:`strip_path`'s, if
    the cost model expects them faster (on the whole call's shapes): the wrapper's."""
    if call.target is not OPS.depthwise_conv2d.default or target.isa is not Isa.MVE:
        return []
    if not lanes_path(call):
        return [WRAPPER]
    return [] if costs.lanes_faster(target.isa, *_window(call), 0) else [WRAPPER]


def _window(call: Node) -> tuple[tuple[int, ...], tuple[int, ...], list[int], list[int]]:
    """A depthwise call's input and output shapes, stride and padding (the cost model's)."""
    inputs, out = tuple(_value(call.args[0]).shape), tuple(call.meta["val"][0].shape)
    return inputs, out, list(call.args[5]), list(call.args[6])


def _wrapper_scratch(call: Node, target: Target) -> int:
    """The scratch ``arm_convolve_wrapper_s8`` needs for conv2d ``call``."""
    shapes = [tuple(_value(a).shape) for a in call.args[:2]]
    out = tuple(call.meta["val"][0].shape)
    return conv2d_scratch_bytes(target, *shapes, out, call.args[5], call.args[6], call.args[7])


def set_path(call: Node, path: int, target: Target, scratch: int | None = None) -> None:
    """Give conv2d ``call`` ``path`` (``WRAPPER`` or ``ROWS``), in place, with the scratch
    that path's function takes (the row-by-row one none), or ``scratch`` bytes (a depthwise
    call's)."""
    out, _ = call.meta["val"]
    if scratch is None:
        scratch = _wrapper_scratch(call, target) if path == WRAPPER else 0
    call.args = (*call.args[:-2], path, scratch)
    call.meta["val"] = (out, out.new_empty((scratch,), dtype=torch.int8))


def depthwise_wrapper_scratch(call: Node, target: Target) -> int:
    """The scratch ``arm_depthwise_conv_wrapper_s8`` needs for depthwise ``call``."""
    shapes = [tuple(_value(a).shape) for a in call.args[:2]]
    out = tuple(call.meta["val"][0].shape)
    window = (call.args[5], call.args[6], call.args[7])
    return depthwise_conv2d_scratch_bytes(
        target, *shapes, out, *window, depth_multiplier=int(call.args[8])
    )


def fastest(graph_module: GraphModule, target: Target, arena: int | None = None) -> list[Node]:
    """Give each depthwise call our lanes kernel where it computes the call and the cost model
    expects fewer instructions than the wrapper's, in place, with the tile it expects fastest
    among those whose buffer fits the call's room (:func:`rooms`); each convolution and linear
    call our matrix products the same way where their models (``plan.product_costs``) expect
    them faster and their one buffer fits the room; the calls given them. On DSP only
    depthwise calls the wrapper computes with ``arm_depthwise_conv_3x3_s8`` (what
    the model measures). A graph whose values ``execution_graph.propagate_values`` has set."""
    if not costs.modelled(target.isa):
        return []
    room = rooms(graph_module, target, arena)
    given = []
    for call in graph_module.graph.nodes:
        if call.target is OPS.linear.default:
            if _give_quads(call, target):
                given.append(call)
            continue
        if call.target is OPS.conv2d.default and call.args[-2] == WRAPPER:
            if _give_pointwise(call, target, room[call]) or _give_window(call, target, room[call]):
                given.append(call)
            continue
        depthwise = call.target is OPS.depthwise_conv2d.default
        if not depthwise or call.args[-2] != WRAPPER or not lanes_path(call):
            continue
        if target.isa is not Isa.MVE and not three_by_three_path(call, list(call.args[6])):
            continue
        inputs, out, stride, padding = _window(call)
        tile = lanes_tile(call, target, room[call])
        if costs.lanes_faster(target.isa, inputs, out, stride, padding, tile):
            set_path(call, LANES, target, compute.lanes_buffer_bytes(target.isa, out, stride, tile))
            given.append(call)
    return given


def _shape(call: Node, product: str) -> tuple:
    """The shape arguments of our ``product``'s cost model (``plan.product_costs.PRODUCTS``) for
    ``call``: pointwise (input NHWC, output channels), window (weight OHWI, output NHWC), quads
    (input, weight, per channel)."""
    if product == "pointwise":
        return _value(call.args[0]).shape, int(_value(call.args[1]).shape[0])
    if product == "window":
        return _value(call.args[1]).shape, call.meta["val"][0].shape
    return _value(call.args[0]).shape, _value(call.args[1]).shape, call.args[4] is not None


def _give_pointwise(call: Node, target: Target, room: int) -> bool:
    """Give conv2d ``call`` our pointwise kernel, in place, if it computes the call, its buffer
    fits ``room`` and the cost model expects it faster; whether it did."""
    if not pointwise_path(call, target):
        return False
    need = compute.pointwise_buffer_bytes(target.isa, int(_value(call.args[0]).shape[3]))
    if need > room or not product_faster(target.isa, "pointwise", *_shape(call, "pointwise")):
        return False
    set_path(call, POINTWISE, target, need)
    return True


def _give_quads(call: Node, target: Target) -> bool:
    """Give linear ``call`` our fully_connected_quads_s8, in place, if it computes the call
    (int8 activations and weights) and the cost model expects it faster; whether it did."""
    if call.args[-1] != WRAPPER or not _int8(call):
        return False
    if not product_faster(target.isa, "quads", *_shape(call, "quads")):
        return False
    call.args = (*call.args[:-1], QUADS)
    return True


def quads_calls(graph_module: GraphModule) -> list[Node]:
    """The linear calls on the ``QUADS`` path."""
    linear = OPS.linear.default
    return [n for n in graph_module.graph.nodes if n.target is linear and n.args[-1] == QUADS]


def _give_window(call: Node, target: Target, room: int) -> bool:
    """Give conv2d ``call`` our window kernel, in place, if it computes the call, its buffer
    fits ``room`` and the cost model expects it faster; whether it did."""
    if not window_path(call, target):
        return False
    need = compute.window_buffer_bytes(target.isa, _value(call.args[1]).shape)
    if need > room or not product_faster(target.isa, "window", *_shape(call, "window")):
        return False
    set_path(call, WINDOW, target, need)
    return True


def rooms(graph_module: GraphModule, target: Target, arena: int | None) -> dict[Node, int]:
    """Each convolution's room for our kernel's buffer: its wrapper's scratch (a reset graph's),
    or, given ``arena`` (bytes of a plan of the same graph), that arena less the bytes live at
    the call besides its scratch, if more (live bytes without overlaps: at most what the call
    needs)."""
    room = {}
    for call in graph_module.graph.nodes:
        if call.target is OPS.depthwise_conv2d.default:
            room[call] = depthwise_wrapper_scratch(call, target)
        elif call.target is OPS.conv2d.default:  # any case's: its scratch as lowered
            room[call] = int(call.args[-1])
    if arena is not None:
        swept = sweep(graph_module)
        for call, live in zip(swept.calls, swept.live, strict=True):
            if call in room:
                room[call] = max(room[call], arena - live + aligned(scratch_bytes(call)))
    return room


def lanes_tile(call: Node, target: Target, room: int) -> int:
    """The tile of the lanes kernel the cost model expects fastest among those whose buffer
    takes at most ``room`` bytes (0: no buffer)."""
    inputs, out, stride, _ = _window(call)
    tiles = [0] + [
        t
        for t in range(1, out[1] + 1)
        if compute.lanes_buffer_bytes(target.isa, out, stride, t) <= room
    ]
    return min(
        tiles, key=lambda t: (costs.lanes_instructions(target.isa, inputs, out, stride, t), -t)
    )


#: conv2d's paths other than the wrapper's
CONV2D_PATHS = (ROWS, POINTWISE, WINDOW)
#: linear's QUADS path runs this function (CMSIS-NN's per-channel one is the case's second)
QUADS_FUNCTION = cmsis_function("linear", Case.S8, 2)


def conv2d_calls(graph_module: GraphModule, path: int) -> list[Node]:
    """The conv2d calls on ``path``."""
    return [
        n for n in graph_module.graph.nodes if n.target is OPS.conv2d.default and n.args[-2] == path
    ]


def choose(graph_module: GraphModule, target: Target, lanes: bool = True) -> None:
    """Give the ``small`` schedule's calls the paths that save RAM, in place, in a fully
    lowered graph whose values ``execution_graph.propagate_values`` has set: on MVE (with
    ``lanes``) each 3x3 depthwise call our lanes kernel with no buffer (the wrapper's takes
    4,464 bytes; ours writes an output row at a time, a lead of one row), off MVE each 1x1
    convolution ``arm_convolve_1x1_s8``."""
    for call in graph_module.graph.nodes:
        if call.target is OPS.depthwise_conv2d.default and target.isa is Isa.MVE and lanes:
            if call.args[-2] == WRAPPER and lanes_path(call):
                set_path(call, LANES, target, 0)
        elif call.target is OPS.conv2d.default and target.isa is not Isa.MVE:
            if call.args[-2] == WRAPPER and rows_path(call):
                set_path(call, ROWS, target)


def set_wrapper(call: Node, target: Target) -> None:
    """Give a convolution the wrapper's path and scratch, in place."""
    if call.target is OPS.depthwise_conv2d.default:
        set_path(call, WRAPPER, target, depthwise_wrapper_scratch(call, target))
    else:
        set_path(call, WRAPPER, target)


def relaxable(graph_module: GraphModule, target: Target, arena: int) -> list[Node]:
    """The calls whose RAM-saving path need not be, where the wrapper's is faster: their live
    bytes with the wrapper's scratch and no overlap stay within ``arena``. The row-by-row 1x1
    convolution costs instructions (its matrix product sums each output channel's weights
    again for every row); our depthwise kernel without a buffer does where the cost model
    says so."""
    swept = sweep(graph_module)
    found = []
    for index, call in enumerate(swept.calls):
        rows = call.target is OPS.conv2d.default and call.args[-2] == ROWS
        lanes = call.target is OPS.depthwise_conv2d.default and call.args[-2] == LANES
        if lanes:
            inputs, out, stride, padding = _window(call)
            tile = compute.lanes_tile(target.isa, out, stride, int(call.args[-1]))
            lanes = not costs.lanes_faster(target.isa, inputs, out, stride, padding, tile)
        if rows or lanes:
            scratch = (
                depthwise_wrapper_scratch(call, target) if lanes else _wrapper_scratch(call, target)
            )
            if swept.live[index] + aligned(scratch) <= arena:
                found.append(call)
    return found


def follow(graph_module: GraphModule, kept: GraphModule, target: Target) -> None:
    """Give the graph's convolutions the paths ``kept`` (the program chosen, a stage aside)
    gives the calls of the same name, the wrapper's to those it does not have."""
    convolutions = (OPS.conv2d.default, OPS.depthwise_conv2d.default)
    paths = {c.name: c.args[-2:] for c in kept.graph.nodes if c.target in convolutions}
    for call in graph_module.graph.nodes:
        if call.target in convolutions and tuple(call.args[-2:]) != tuple(paths.get(call.name, ())):
            if call.name in paths:
                set_path(call, int(paths[call.name][0]), target, int(paths[call.name][1]))
            else:
                set_wrapper(call, target)


def lanes_calls(graph_module: GraphModule) -> list[Node]:
    """The depthwise calls on the ``LANES`` path."""
    depthwise = OPS.depthwise_conv2d.default
    return [n for n in graph_module.graph.nodes if n.target is depthwise and n.args[-2] == LANES]


def summary(graph_module: GraphModule) -> dict[str, int]:
    """Function → calls of the graph (stage aside) that run it instead of the wrapper's
    choice (the report's kernel paths)."""
    found = {
        **{
            cmsis_function("conv2d", Case.S8, path): len(conv2d_calls(graph_module, path))
            for path in CONV2D_PATHS
        },
        QUADS_FUNCTION: len(quads_calls(graph_module)),
        cmsis_function("depthwise_conv2d", Case.S8, LANES): len(lanes_calls(graph_module)),
    }
    return {function: count for function, count in found.items() if count}


def _output_name(call: Node) -> str:
    """The name of a scratch call's output (``getitem`` 0 of it; the report row's
    ``output_node``)."""
    outputs = (u.name for u in call.users if u.target is operator_getitem and u.args[1] == 0)
    return next(outputs, "")


def call_functions(graph_module: GraphModule) -> dict[str, str]:
    """The name of each call's output (the report row's ``output_node``) on a path other than
    the wrapper's → the function that computes it."""
    found = {c.name: QUADS_FUNCTION for c in quads_calls(graph_module)}  # no scratch: its own
    for path in CONV2D_PATHS:
        for call in conv2d_calls(graph_module, path):
            found[_output_name(call)] = cmsis_function("conv2d", Case.S8, path)
    for call in lanes_calls(graph_module):
        found[_output_name(call)] = cmsis_function("depthwise_conv2d", Case.S8, LANES)
    return found


def reset(graph_module: GraphModule, target: Target) -> None:
    """Every convolution back on the wrapper's path, as the lowering leaves them (a program is
    planned again from the same graph for another schedule)."""
    ours = [c for path in CONV2D_PATHS for c in conv2d_calls(graph_module, path)]
    for call in [*ours, *lanes_calls(graph_module)]:
        set_wrapper(call, target)
    for call in quads_calls(graph_module):
        call.args = (*call.args[:-1], WRAPPER)


def call_estimates(graph_module: GraphModule, target: Target) -> dict[str, dict[str, int]]:
    """The name of each call on our kernels' output → the instructions the cost model expects
    of ours (with a lanes call's tile) and of the wrapper."""
    found = {}
    for call in lanes_calls(graph_module):
        inputs, out, stride, padding = _window(call)
        tile = compute.lanes_tile(target.isa, out, stride, int(call.args[-1]))
        ours = costs.lanes_instructions(target.isa, inputs, out, stride, tile)
        theirs = costs.wrapper_instructions(target.isa, inputs, out, stride, padding)
        found[_output_name(call)] = {"ours": round(ours), "cmsis_nn": round(theirs)}
    products = [
        ("pointwise", conv2d_calls(graph_module, POINTWISE)),
        ("window", conv2d_calls(graph_module, WINDOW)),
        ("quads", quads_calls(graph_module)),
    ]
    for product, calls in products:
        for call in calls:
            ours, theirs = product_instructions(target.isa, product, *_shape(call, product))
            name = call.name if product == "quads" else _output_name(call)  # linear: no scratch
            found[name] = {"ours": round(ours), "cmsis_nn": round(theirs)}
    return found


def state(graph_module: GraphModule) -> dict[str, tuple[int, int]]:
    """Each convolution's path and scratch, by name."""
    convolutions = (OPS.conv2d.default, OPS.depthwise_conv2d.default)
    return {
        c.name: (int(c.args[-2]), int(c.args[-1]))
        for c in graph_module.graph.nodes
        if c.target in convolutions
    }


def restore(graph_module: GraphModule, saved: dict[str, tuple[int, int]], target: Target) -> None:
    """The paths and scratch :func:`state` saved, back on the graph's convolutions."""
    convolutions = (OPS.conv2d.default, OPS.depthwise_conv2d.default)
    for call in graph_module.graph.nodes:
        if call.target in convolutions and call.name in saved:
            path, scratch = saved[call.name]
            set_path(call, path, target, scratch)


def name_functions(records: list, graph_module: GraphModule, target: Target) -> None:
    """Give the report's rows (``lower.records.OpRecord``) of the calls on a path other than
    the wrapper's their function, and those on our kernel what the cost model expects; not
    the rows of operators the call absorbed (an identity or a fused activation names the same
    output, its function in brackets)."""
    functions = call_functions(graph_module)
    estimates = call_estimates(graph_module, target)
    for record in records:
        name = record.output_node or ""
        if (record.cmsis_function or "").startswith("("):
            continue
        record.cmsis_function = functions.get(name, record.cmsis_function)
        record.expected_instructions = estimates.get(name)
