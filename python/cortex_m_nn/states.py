"""The states a model keeps between inferences (SVDF layers), in each of its forms.

The float model keeps them in its :class:`~cortex_m_nn.nn.SVDF` layers' ``state`` buffers,
the PT2E graph in the buffers its state write-backs (``passes.state``) update, the lowered
graph in its ``mutable_state_*`` buffers (which ``cortex_m_nn::svdf`` updates in place, and
the program keeps in its arena). Running a form on a sequence of inputs gives the sequence's
outputs only from zero states; :func:`reset_states` makes them zero.
"""

from __future__ import annotations

import copy

import torch
from torch.fx import GraphModule

from cortex_m_nn.nn import SVDF
from cortex_m_nn.ops.svdf import STATE_PREFIX
from cortex_m_nn.passes.state import is_state_write


def state_buffers(module: torch.nn.Module) -> list[torch.Tensor]:
    """Every state buffer of ``module`` (any of the three forms)."""
    found = [m.state for m in module.modules() if isinstance(m, SVDF)]
    found += [b for name, b in module.named_buffers() if name.startswith(STATE_PREFIX)]
    if isinstance(module, GraphModule):
        for node in module.graph.nodes:
            if is_state_write(node):
                found.append(module.get_buffer(str(node.args[0].target)))
    unique: dict[int, torch.Tensor] = {id(b): b for b in found}
    return list(unique.values())


def has_states(module: torch.nn.Module) -> bool:
    return bool(state_buffers(module))


def reset_states(module: torch.nn.Module) -> None:
    """Every state of ``module`` back to zero (in place)."""
    with torch.no_grad():
        for buffer in state_buffers(module):
            buffer.zero_()


def fresh(module: GraphModule) -> GraphModule:
    """A copy of ``module`` with zero states of its own, or ``module`` when it keeps none."""
    if not has_states(module):
        return module
    copied = copy.deepcopy(module)
    reset_states(copied)
    return copied
