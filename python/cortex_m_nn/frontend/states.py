"""The states a model keeps between inferences (SVDF layers, streaming GRUs and LSTMs), in
each of its forms.

The float model keeps them in its :class:`~cortex_m_nn.nn.SVDF` and
:class:`~cortex_m_nn.nn.Streaming` layers' ``state`` buffers,
the PT2E graph in the buffers its state write-backs update, the lowered graph in its
``mutable_state_*`` buffers (which ``cortex_m_nn::svdf`` updates in place, and the program
keeps in its arena). Running a form on a sequence of inputs gives the sequence's outputs only
from zero states; :func:`reset_states` makes them zero.

The write-back: ``cortex_m_nn.nn.SVDF`` ends each step with ``self.state.copy_(new_state)``,
an ``aten.copy_`` into the buffer its ``svdf_memory`` read, of that operator's output (through
``detach`` before the functional form, through PT2E's ``quantize``/``dequantize`` after). It
is a mutation of a buffer the compiler keeps: the functional form leaves it, and the
lowering drops it where ``cortex_m_nn::svdf`` updates its state in place (``rules/svdf``).
The other: ``Streaming`` writes its GRU's final hidden state (its LSTM's hidden and cell
states) into the buffers the layer started from; ``cortex_m_nn::gru`` (``::lstm``) then reads
and writes states of the program (``rules/gru``, ``rules/lstm``).
"""

from __future__ import annotations

import copy

import torch
from torch.fx import GraphModule, Node

from cortex_m_nn.core.families import DEQUANTIZE, QUANTIZE
from cortex_m_nn.core.float_ops import GRU, LSTM, LSTM_CELL
from cortex_m_nn.nn import SVDF, SVDF_MEMORY, Streaming
from cortex_m_nn.ops.svdf import STATE_PREFIX


def state_buffers(module: torch.nn.Module) -> list[torch.Tensor]:
    """Every state buffer of ``module`` (any of the three forms)."""
    found = [m.state for m in module.modules() if isinstance(m, SVDF | Streaming)]
    found += [m.cell for m in module.modules() if isinstance(m, Streaming) and m.cell is not None]
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


COPY = torch.ops.aten.copy_.default
aten = torch.ops.aten
#: The recurrent layers a streaming state feeds, before and after the quantizer's split.
WHOLE = (aten.gru.input, aten.lstm.input)
LAYERS = (GRU, LSTM)
#: What may stand between ``svdf_memory`` and the write-back.
_THROUGH = {torch.ops.aten.detach.default, *DEQUANTIZE, *QUANTIZE}


def state_source(node: Node) -> Node | None:
    """The ``svdf_memory`` node whose output ``node`` writes back into the buffer it read,
    or None when ``node`` is no such write-back."""
    if node.op != "call_function" or node.target is not COPY or len(node.args) != 2:
        return None
    if node.users:  # read again in this forward (a layer called twice): not a write-back
        return None
    buffer, value = node.args
    while isinstance(value, Node) and value.target in _THROUGH:
        value = value.args[0]
    if not isinstance(value, Node) or value.target is not SVDF_MEMORY:
        return None
    if not isinstance(buffer, Node) or buffer.op != "get_attr" or value.args[1] is not buffer:
        return None
    return value


def _initial(layer: Node) -> list[object]:
    """The initial states a recurrent node reads: a GRU's hidden, an LSTM's hidden and cell."""
    if layer.target in WHOLE:
        states = layer.args[1]
        return list(states) if isinstance(states, list | tuple) else [states]
    return list(layer.args[1 : 3 if layer.target is LSTM else 2])


def recurrent_state_source(node: Node) -> Node | None:
    """The GRU or LSTM that starts from the buffer ``node`` writes into (:class:`~cortex_m_nn.
    nn.Streaming`'s write-back of a final state): the ``aten.gru.input``/``aten.lstm.input``
    reading the buffer, or after the quantizer's split one layer's float op reading its
    slice; None when ``node`` is no such write-back."""
    if node.op != "call_function" or node.target is not COPY or len(node.args) != 2:
        return None
    buffer = node.args[0]
    if node.users or not isinstance(buffer, Node) or buffer.op != "get_attr":
        return None
    for reader in buffer.users:
        if reader.target in WHOLE and buffer in _initial(reader):
            return reader
        if reader.target is aten.select.int and reader.args[0] is buffer:
            layers = [u for u in reader.users if u.target in LAYERS and reader in _initial(u)]
            if layers:
                return layers[0]
    return None


def kept_state(hidden: object) -> Node | None:
    """The buffer a recurrent layer's initial state ``hidden`` (or cell state) reads
    (``select`` of it, one layer's slice) when a write-back keeps it from call to call, else
    None."""
    if not isinstance(hidden, Node) or hidden.target is not aten.select.int:
        return None
    buffer = hidden.args[0]
    if not isinstance(buffer, Node) or buffer.op != "get_attr":
        return None
    writes = [u for u in buffer.users if recurrent_state_source(u) is not None]
    return buffer if writes else None


def only_kept(node: Node, kept: set[Node]) -> bool:
    """Whether an LSTM's final cell state ``node`` (:data:`LSTM_CELL`, then the ``unsqueeze``
    and ``cat`` of its layers) reaches nothing but write-backs into the ``kept`` buffers: the
    kernel keeps it then, and the float computation is not lowered."""
    if node.target not in (LSTM_CELL, aten.unsqueeze.default, aten.cat.default) or not node.users:
        return False
    return all(
        (is_state_write(user) and user.args[0] in kept) or only_kept(user, kept)
        for user in node.users
    )


def is_cell_value(node: Node) -> bool:
    """An LSTM's final cell state, or the ``unsqueeze``/``cat`` of its layers' (``c_n``)."""
    if node.target is LSTM_CELL:
        return True
    if node.target is aten.unsqueeze.default:
        return isinstance(node.args[0], Node) and is_cell_value(node.args[0])
    if node.target is aten.cat.default and isinstance(node.args[0], list | tuple):
        return all(isinstance(a, Node) and is_cell_value(a) for a in node.args[0])
    return False


def is_state_write(node: Node) -> bool:
    return state_source(node) is not None or recurrent_state_source(node) is not None


def writes_svdf_state(node: Node) -> bool:
    """An ``aten.copy_`` of an ``svdf_memory`` output that is no state write-back: the layer
    called on a sequence, or more than once in one forward."""
    if node.op != "call_function" or node.target is not COPY or len(node.args) != 2:
        return False
    value = node.args[1]
    while isinstance(value, Node) and value.target in _THROUGH:
        value = value.args[0]
    return isinstance(value, Node) and value.target is SVDF_MEMORY
