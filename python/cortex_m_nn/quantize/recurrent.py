"""``nn.LSTM`` as one ``cortex_m_nn_float::lstm`` node per layer, quantized as CMSIS-NN runs it.

``torch.export`` keeps an ``nn.LSTM`` as one ``aten.lstm.input`` for all its layers, so the
sequence between two layers has no quantization of its own. Before annotation,
:func:`split_lstms` rewrites each LSTM CMSIS-NN can run (unidirectional, ``proj_size = 0``,
eval mode, the final cell state read only as a streaming state) as one node per layer of the
op below, whose output is that layer's hidden-state sequence; ``h_n`` becomes the last step of
each layer's output, and ``c_n`` (which ``nn.Streaming`` keeps for the next call) the
:data:`~cortex_m_nn.core.float_ops.LSTM_CELL` of each layer, the same computation's final
cell state. A zero initial state (``aten.zeros``, what ``nn.LSTM`` builds without one) is no
state at all.

The op computes the float LSTM while the model calibrates (``hidden_bits`` 0). After
``convert_pt2e``, :func:`quantize_lstms` gives it the quantization its lowering uses (input
and hidden scales from the graph, ``hidden_bits`` 8 or 16), and from then on it computes the
LSTM as the device does, in float: int8 weights per gate, gate pre-activations on the Q3.12
grid and saturated, gates on the Q0.15 grid, the cell state on the 2^p grid of int16, and
every step's hidden state on the output's grid, which the next step reads. That is the PT2E
reference ``--verify`` holds the integer kernel to (within 2 LSB: ``lower/rules/lstm.py``);
sigmoid and tanh there are exact, so the two differ only by CMSIS-NN's table interpolation and
its requantization roundings, carried from step to step by the cell state.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator

import torch
from torch.fx import GraphModule, Node

from cortex_m_nn.core.families import DEQUANTIZE, QUANTIZE
from cortex_m_nn.core.float_ops import LIB, LSTM, LSTM_CELL
from cortex_m_nn.core.graph import getitem_users, lstm_refusal
from cortex_m_nn.ops.lstm import gate_biases, gate_weights
from cortex_m_nn.quantize.decompose import LOCATION

aten = torch.ops.aten
#: Initial cell states are held in int16 at the cell's scale 2^p, chosen so that a state of at
#: most this magnitude plus one per step never saturates (|c_t| < |c_0| + t).
INITIAL_CELL_BOUND = 8.0


#: Room the cell scale leaves above the largest |c| calibration saw.
CELL_HEADROOM = 2.0


def cell_scale_power(steps: int, stateful: bool, peak: float | None = None) -> int:
    """p of the cell scale 2^p (at least -15: Q0.15). The bound |c| < steps (+ the initial
    bound) fits int16, so the cell never clips; a calibrated ``peak`` (with
    :data:`CELL_HEADROOM`) gives a finer scale where it is smaller."""
    bound = steps + (INITIAL_CELL_BOUND if stateful else 0.0)
    if peak is not None and peak > 0:
        bound = min(bound, CELL_HEADROOM * peak)
    return max(0, math.ceil(math.log2(bound))) - 15


def _grid(value: torch.Tensor, scale: float, low: int, high: int) -> torch.Tensor:
    return (value / scale).round().clamp(low, high) * scale


def _emulated(x, h, c, wx, wh, bias, args) -> tuple[torch.Tensor, torch.Tensor]:  # noqa: ANN001
    """The quantized LSTM in float on [T, B, ·] values (see the module docstring): every
    step's hidden state, and the final cell state."""
    power, s_in, s_h, zp, bits = args
    qx, sx = gate_weights(wx)
    qh, sh = gate_weights(wh)
    wx = [q.double() * s for q, s in zip(qx, sx, strict=True)]
    wh = [q.double() * s for q, s in zip(qh, sh, strict=True)]
    b = [q.double() * s_in * s for q, s in zip(gate_biases(bias, s_in, sx), sx, strict=True)]
    low, high = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    cell = 2.0**power
    c = torch.zeros(x.shape[1], wx[0].shape[0], dtype=torch.float64) if c is None else c
    outputs = []
    for t in range(x.shape[0]):
        gates = []
        for k in range(4):
            pre = _grid(x[t] @ wx[k].T + b[k], 2.0**-12, -32768, 32767)
            if h is not None:
                pre = (pre + _grid(h @ wh[k].T, 2.0**-12, -(2**40), 2**40)).clamp(-8, 8 - 2**-12)
            f = torch.tanh(pre) if k == 2 else torch.sigmoid(pre)
            gates.append(_grid(f, 2.0**-15, -32767, 32767))
        i, f, g, o = gates
        c = _grid(f * c, cell, -32768, 32767)
        c = _grid(c + i * g, cell, -32768, 32767)
        h = _grid(o * torch.tanh(c), s_h, low - zp, high - zp)
        outputs.append(h)
    return torch.stack(outputs), c


def _float(seq, h, c, wx, wh, bias) -> tuple[torch.Tensor, float, torch.Tensor]:  # noqa: ANN001
    """The float LSTM on [T, B, ·]: every step's hidden state, the largest |c| reached and the
    final cell state."""
    h_t = torch.zeros(seq.shape[1], wh.shape[1]) if h is None else h
    c_t = torch.zeros(seq.shape[1], wh.shape[1]) if c is None else c
    outputs, peak = [], 0.0
    for step in seq:
        i, f, g, o = (step @ wx.T + h_t @ wh.T + bias).chunk(4, dim=-1)
        c_t = torch.sigmoid(f) * c_t + torch.sigmoid(i) * torch.tanh(g)
        h_t = torch.sigmoid(o) * torch.tanh(c_t)
        outputs.append(h_t)
        peak = max(peak, float(c_t.abs().max()))
    return torch.stack(outputs), peak, c_t


def _run(x, h, c, wx, wh, bx, bh, batch_first, power, s_in, s_h, zp, bits):  # noqa: ANN001
    """Float LSTM while calibrating (``bits`` 0), the quantized one after: every step's hidden
    state ``[T, B, H]`` and the final cell state ``[B, H]``, in ``x``'s dtype."""
    seq = x.transpose(0, 1) if batch_first else x
    units = wh.shape[1]
    bias = torch.zeros(4 * units, dtype=x.dtype) if bx is None else bx
    bias = bias + (0 if bh is None else bh)
    if bits == 0:
        out, _, cell = _float(seq, h, c, wx, wh, bias)
    else:
        h0 = None if h is None else h.double()
        c0 = None if c is None else c.double()
        out, cell = _emulated(seq.double(), h0, c0, wx, wh, bias, (power, s_in, s_h, zp, bits))
    return out.to(x.dtype), cell.to(x.dtype)


def _lstm(x, *args):  # noqa: ANN001, ANN002
    """The op: every step's hidden state, in ``x``'s layout."""
    out = _run(x, *args)[0]
    return (out.transpose(0, 1) if args[6] else out).contiguous()


def _lstm_cell(x, *args):  # noqa: ANN001, ANN002
    """The final cell state of the :data:`LSTM` with the same arguments."""
    return _run(x, *args)[1].contiguous()


LIB.impl("lstm", _lstm, "CompositeExplicitAutograd")
LIB.impl("lstm_cell", _lstm_cell, "CompositeExplicitAutograd")


def is_zeros(node: object) -> bool:
    """A zero initial state: what ``nn.LSTM``/``nn.GRU`` build without one."""
    return isinstance(node, Node) and node.target in (aten.zeros.default, aten.zeros_like.default)


def add_node(graph: torch.fx.Graph, like: Node, target: object, args: tuple) -> Node:
    """``target(*args)`` before ``like``, with ``like``'s source location and its own value."""
    with graph.inserting_before(like):
        node = graph.call_function(target, args)
    node.meta.update({k: like.meta[k] for k in LOCATION if k in like.meta})
    node.meta["val"] = target(*torch.fx.node.map_arg(args, lambda n: n.meta["val"]))
    return node


#: (layer index, that layer's input, its weights and biases) → the args of its node.
LayerArgs = Callable[[int, Node, list], tuple]


def split_layers(graph: torch.fx.Graph, node: Node, op: object, layer_args: LayerArgs) -> None:
    """A recurrent ``aten.<rnn>.input`` as one ``op`` node per layer, each reading the one
    before; the node's output becomes the last layer's, its ``h_n`` the last step of each."""
    x, params = node.args[0], node.args[2]
    has_biases, layers, batch_first = bool(node.args[3]), int(node.args[4]), bool(node.args[8])
    per_layer = 4 if has_biases else 2
    outputs, last = [], []
    for layer in range(layers):
        weights = list(params[layer * per_layer : (layer + 1) * per_layer]) + [None, None]
        x = add_node(graph, node, op, layer_args(layer, x, weights[:4]))
        outputs.append(x)
        step = add_node(graph, node, aten.select.int, (x, 1 if batch_first else 0, -1))
        last.append(add_node(graph, node, aten.unsqueeze.default, (step, 0)))
    users = getitem_users(node)
    if 0 in users:
        users[0].replace_all_uses_with(outputs[-1])
    if 1 in users:
        h_n = last[0] if layers == 1 else add_node(graph, node, aten.cat.default, (last, 0))
        users[1].replace_all_uses_with(h_n)


def split_recurrent(
    model: GraphModule, target: object, refusal: Callable[[Node], str | None], split: Callable
) -> GraphModule:
    """Each call of ``target`` that ``refusal`` lets through, ``split`` into layers."""
    graph = model.graph
    for node in list(graph.nodes):
        if node.target is target and refusal(node) is None:
            split(graph, node)
            for user in list(node.users):
                graph.erase_node(user)
            graph.erase_node(node)
    graph.eliminate_dead_code()
    model.recompile()
    return model


def _split(graph: torch.fx.Graph, node: Node) -> None:
    x, (h0, c0) = node.args[:2]
    batch_first = bool(node.args[8])
    stateful = not (is_zeros(h0) and is_zeros(c0))
    power = cell_scale_power(int(x.meta["val"].shape[1 if batch_first else 0]), stateful)
    layers: list[tuple] = []

    def layer_args(layer: int, source: Node, weights: list) -> tuple:
        h = add_node(graph, node, aten.select.int, (h0, 0, layer)) if stateful else None
        c = add_node(graph, node, aten.select.int, (c0, 0, layer)) if stateful else None
        layers.append((source, h, c, *weights, batch_first, power, 0.0, 0.0, 0, 0))
        return layers[-1]

    split_layers(graph, node, LSTM, layer_args)
    c_n = getitem_users(node).get(2)
    if c_n is not None and c_n.users:  # read only as a streaming state (lstm_refusal)
        cells = [add_node(graph, node, LSTM_CELL, args) for args in layers]
        cells = [add_node(graph, node, aten.unsqueeze.default, (c, 0)) for c in cells]
        c_n.replace_all_uses_with(
            cells[0] if len(cells) == 1 else add_node(graph, node, aten.cat.default, (cells, 0))
        )


def split_lstms(model: GraphModule) -> GraphModule:
    """Each ``aten.lstm.input`` CMSIS-NN can run as one :data:`LSTM` node per layer."""
    return split_recurrent(model, aten.lstm.input, lstm_refusal, _split)


class _CellPeaks(torch.fx.Interpreter):
    """Runs the converted graph with float LSTMs, keeping each one's largest |c|."""

    def __init__(self, module: GraphModule) -> None:
        super().__init__(module)
        self.peaks: dict[str, tuple[int, float]] = {}

    def run_node(self, node: Node) -> object:
        if node.target is not LSTM:
            return super().run_node(node)
        x, h, c, wx, wh, bx, bh, batch_first = self.fetch_args_kwargs_from_env(node)[0][:8]
        seq = x.transpose(0, 1) if batch_first else x
        bias = (0 if bx is None else bx) + (0 if bh is None else bh)
        out, peak, _ = _float(seq, h, c, wx, wh, bias)
        before = self.peaks.get(node.name, (0, 0.0))[1]
        self.peaks[node.name] = (seq.shape[0], max(before, peak))
        return (out.transpose(0, 1) if batch_first else out).contiguous()


def cell_peaks(
    converted: GraphModule, samples: list[tuple[torch.Tensor, ...]]
) -> dict[str, tuple[int, float]]:
    """(steps, largest |c|) of each :data:`LSTM` over ``samples``, on the quantized graph's
    inputs."""
    recorder = _CellPeaks(converted)
    with torch.no_grad():
        for sample in samples:
            recorder.run(*sample)
    return recorder.peaks


def quantize_lstms(converted: GraphModule, samples: list[tuple[torch.Tensor, ...]]) -> None:
    """After ``convert_pt2e``: each :data:`LSTM` between a ``dequantize`` and a ``quantize``
    computes as it will be lowered (its scales, its hidden dtype, and, without an initial
    state, the cell scale the calibration samples call for)."""
    peaks = (
        cell_peaks(converted, samples)
        if any(n.target is LSTM for n in converted.graph.nodes)
        else {}
    )
    for node, quantization in quantized_layers(converted, LSTM):
        power = int(node.args[8])
        if node.args[2] is None and node.name in peaks:  # (else c0 has the bound's scale)
            steps, peak = peaks[node.name]
            power = cell_scale_power(steps, False, peak)
        node.args = (*node.args[:8], power, *quantization)
        for cell in converted.graph.nodes:  # its final cell state, computed alike
            if cell.target is LSTM_CELL and cell.args[3] is node.args[3]:
                cell.args = (*cell.args[:8], *node.args[8:])
    converted.recompile()


def quantized_layers(
    converted: GraphModule, target: object
) -> Iterator[tuple[Node, tuple[float, float, int, int]]]:
    """Each ``target`` layer between a ``dequantize`` and one ``quantize``, with (input scale,
    hidden scale, hidden zero point, hidden bits) from them."""
    for node in converted.graph.nodes:
        if node.target is not target:
            continue
        source, users = node.args[0], list(node.users)
        quantizes = [u for u in users if u.target in QUANTIZE]
        if getattr(source, "target", None) not in DEQUANTIZE or len(quantizes) != 1:
            continue
        scale, zero_point, dtype = quantizes[0].args[1], quantizes[0].args[2], quantizes[0].args[5]
        bits = 16 if dtype is torch.int16 else 8
        yield node, (float(source.args[1]), float(scale), int(zero_point), bits)
