"""Which CMSIS-NN function computes each int8 convolution (its ``path`` argument,
``core.cmsis_nn``), chosen for the ``small`` schedule where another function than the
wrapper's lets the planner use less RAM, with the same numbers:

- **A 1x1 convolution off MVE** (no padding, dilation or groups) runs ``arm_convolve_1x1_s8``
  (``ROWS``): one output row at a time, so its output may take the bytes of input rows it has
  read (``plan.overlap``). The DSP and scalar wrapper's ``arm_convolve_1x1_s8_fast`` walks the
  whole image once per pair of output channels, so its output needs bytes of its own. Both
  call the same ``arm_nn_mat_mult_nt_t_s8``, a row per call instead of the image.
- **A 3x3 depthwise strip call on MVE** (multiplier 1, no dilation, in a patch-based stage,
  ``plan.strips``) runs ``arm_depthwise_conv_3x3_s8`` (``THREE_BY_THREE``): no scratch, where
  MVE's wrapper takes ``arm_depthwise_conv_s8_opt`` and its 4 x 124 x 9 = 4,464-byte buffer,
  which would otherwise sit on top of the stage's strip buffers at its peak.

The ``fast`` schedule keeps the wrapper's choice everywhere.
"""

from __future__ import annotations

import torch
from torch.fx import GraphModule, Node

from cortex_m_nn.core.cmsis_nn import ROWS, THREE_BY_THREE, WRAPPER
from cortex_m_nn.core.target import Isa, Target
from cortex_m_nn.lower.scratch import conv2d_scratch_bytes
from cortex_m_nn.plan.liveness import sweep
from cortex_m_nn.plan.memory_plan import aligned
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


def three_by_three_path(call: Node, padding: list[int]) -> bool:
    """Whether ``arm_depthwise_conv_3x3_s8`` computes this depthwise call with ``padding``:
    int8, 3x3, multiplier 1, no dilation, pads of at most 1, one image."""
    _, kernel_h, kernel_w, _ = _value(call.args[1]).shape
    shape = (kernel_h, kernel_w) == (3, 3) and int(call.args[8]) == 1
    shape = shape and list(call.args[7]) == [1, 1] and max(padding) <= 1
    return shape and _int8(call) and _value(call.args[0]).shape[0] == 1


def strip_path(call: Node, padding: list[int], target: Target) -> int:
    """The path of a stage's strip call of ``call`` padded by ``padding``."""
    depthwise = call.target is OPS.depthwise_conv2d.default
    if depthwise and target.isa is Isa.MVE and three_by_three_path(call, padding):
        return THREE_BY_THREE
    return WRAPPER


def _wrapper_scratch(call: Node, target: Target) -> int:
    """The scratch ``arm_convolve_wrapper_s8`` needs for conv2d ``call``."""
    shapes = [tuple(_value(a).shape) for a in call.args[:2]]
    out = tuple(call.meta["val"][0].shape)
    return conv2d_scratch_bytes(target, *shapes, out, call.args[5], call.args[6], call.args[7])


def set_path(call: Node, path: int, target: Target) -> None:
    """Give conv2d ``call`` ``path`` (``WRAPPER`` or ``ROWS``), in place, with the scratch
    that path's function takes (the row-by-row one none)."""
    out, _ = call.meta["val"]
    need = _wrapper_scratch(call, target) if path == WRAPPER else 0
    call.args = (*call.args[:-2], path, need)
    call.meta["val"] = (out, out.new_empty((need,), dtype=torch.int8))


def rows_calls(graph_module: GraphModule) -> list[Node]:
    """The conv2d calls on the ``ROWS`` path."""
    return [
        n for n in graph_module.graph.nodes if n.target is OPS.conv2d.default and n.args[-2] == ROWS
    ]


def choose(graph_module: GraphModule, target: Target) -> None:
    """Give the ``small`` schedule's 1x1 convolutions off MVE ``arm_convolve_1x1_s8``, in
    place, in a fully lowered graph whose values ``execution_graph.propagate_values`` has
    set."""
    if target.isa is Isa.MVE:
        return
    for call in graph_module.graph.nodes:
        if call.target is OPS.conv2d.default and call.args[-2] == WRAPPER and rows_path(call):
            set_path(call, ROWS, target)


def relaxable(graph_module: GraphModule, target: Target, arena: int) -> list[Node]:
    """The ``ROWS`` calls that need not be: their live bytes with the wrapper's scratch and no
    overlap stay within ``arena`` (the row-by-row function costs instructions: its matrix
    product sums each output channel's weights again for every row)."""
    swept = sweep(graph_module)
    found = []
    for index, call in enumerate(swept.calls):
        if call.target is OPS.conv2d.default and call.args[-2] == ROWS:
            if swept.live[index] + aligned(_wrapper_scratch(call, target)) <= arena:
                found.append(call)
    return found
