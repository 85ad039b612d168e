"""Where the error enters: the SNR of every quantized activation against the float model.

At each point where the PT2E-quantized graph quantizes an activation (a ``quantize_per_tensor``
node), its dequantized value is compared with the float graph's value of the same node (PT2E
keeps the node names of the graph it quantized) over the calibration samples:
``SNR = 10·log10(Σ float² / Σ (float − dequantized)²)``. The SNR is cumulative — it includes
the error of every layer upstream — so the drop from a layer's input to its output is what
that layer adds. A convolution whose batch norm PT2E folded is compared with the batch norm's
output. Points without a float counterpart (data movement the quantizer decomposed) are left
out.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass

import torch
from torch.fx import GraphModule, Interpreter, Node

from cortex_m_nn.core.families import DEQUANTIZE, QUANTIZE
from cortex_m_nn.core.graph import base_name, module_of, op_name
from cortex_m_nn.frontend.states import fresh

#: Activations the quantizer fuses onto the convolution or linear layer before them.
_FUSED = {"relu", "relu6", "hardtanh", "clamp"}

_BATCH_NORMS = {
    torch.ops.aten.batch_norm.default,
    torch.ops.aten._native_batch_norm_legit_no_training.default,
}


@dataclass
class LayerSnr:
    """One quantized activation: the node that produced it, its op, its SNR in dB, and the
    lowest SNR of the quantized activations it was computed from (None for a model input)."""

    name: str
    op: str
    #: the innermost module the value was computed in, ``blocks.2 (ReLU)``
    module: str
    snr_db: float
    input_snr_db: float | None

    @property
    def drop_db(self) -> float | None:
        """dB this layer loses on its input (positive: worse)."""
        if self.input_snr_db is None or math.isinf(self.snr_db):
            return None
        return self.input_snr_db - self.snr_db


class _Values(Interpreter):
    """Runs a graph and keeps the values of the nodes named in ``keep``."""

    def __init__(self, module: GraphModule, keep: set[str]) -> None:
        super().__init__(module)
        self.keep, self.values = keep, {}

    def run_node(self, node: Node) -> object:
        result = super().run_node(node)
        if node.name in self.keep:
            self.values[node.name] = result
        return result


def _float_counterpart(name: str, float_nodes: dict[str, Node], quantized: set[str]) -> str:
    """The float node whose value ``name`` holds in the quantized graph: past a batch norm
    that PT2E folded into it (absent from the quantized graph)."""
    node = float_nodes[name]
    users = list(node.users)
    if len(users) == 1 and users[0].target in _BATCH_NORMS and users[0].name not in quantized:
        norm = users[0]
        outputs = [u for u in norm.users if u.target is operator.getitem and u.args[1] == 0]
        return outputs[0].name if outputs else norm.name
    return name


def _points(float_graph: GraphModule, quantized: GraphModule) -> list[tuple[Node, str]]:
    """(quantize node, float node name) for every quantized activation with a float twin."""
    float_nodes = {n.name: n for n in float_graph.graph.nodes}
    names = {n.name for n in quantized.graph.nodes}
    points = []
    for node in quantized.graph.nodes:
        source = node.args[0] if node.target in QUANTIZE else None
        if isinstance(source, Node) and source.name in float_nodes:
            points.append((node, _float_counterpart(source.name, float_nodes, names)))
    return points


def _inputs(node: Node, points: set[str]) -> set[str]:
    """The quantized activations (quantize node names) ``node``'s producer computes from:
    the nearest ones upstream along every path."""
    found: set[str] = set()
    frontier = list(node.args[0].all_input_nodes) if isinstance(node.args[0], Node) else []
    seen: set[str] = set()
    while frontier:
        current = frontier.pop()
        if current.name in seen:
            continue
        seen.add(current.name)
        source = current.args[0] if current.target in DEQUANTIZE else None
        if isinstance(source, Node) and source.name in points:
            found.add(source.name)
        else:
            frontier.extend(current.all_input_nodes)
    return found


def layer_snr(
    float_graph: GraphModule, quantized: GraphModule, samples: list[tuple[torch.Tensor, ...]]
) -> list[LayerSnr]:
    """Per quantized activation, in graph order: its SNR against the float graph."""
    points = _points(float_graph, quantized)
    if not points or not samples:
        return []
    quantize_names = {q.name for q, _ in points}
    signal = dict.fromkeys(quantize_names, 0.0)
    noise = dict.fromkeys(quantize_names, 0.0)
    dequantized = {u.name for q, _ in points for u in q.users if u.target in DEQUANTIZE}
    float_graph, quantized = fresh(float_graph), fresh(quantized)  # states: one sequence
    with torch.no_grad():
        for sample in samples:
            real = _Values(float_graph, {f for _, f in points})
            real.run(*sample)
            ours = _Values(quantized, dequantized)
            ours.run(*sample)
            for q, f in points:
                users = [u.name for u in q.users if u.name in ours.values]
                if not users or f not in real.values:
                    continue
                expected = real.values[f].double()
                got = ours.values[users[0]].double()
                signal[q.name] += float(expected.pow(2).sum())
                noise[q.name] += float((expected - got).pow(2).sum())
    snr = {name: _db(signal[name], noise[name]) for name in quantize_names}
    float_nodes = {n.name: n for n in float_graph.graph.nodes}
    rows = []
    for q, _ in points:
        upstream = [snr[name] for name in _inputs(q, quantize_names)]
        source = q.args[0]
        module = module_of(float_nodes.get(_layer(source).name, source))
        lowest = min(upstream, default=None)
        rows.append(LayerSnr(source.name, _op(source), module, snr[q.name], lowest))
    return rows


def _name(node: Node) -> str:
    """``conv2d`` for ``aten.conv2d.default``; an in-place op by its functional name
    (``hardtanh_`` → ``hardtanh``: a graph exported from in-place modules holds those)."""
    return base_name(op_name(node.target)) if node.op == "call_function" else ""


def _fused_into(node: Node) -> Node | None:
    """The producer an activation is fused onto, if ``node`` is such an activation."""
    producer = node.args[0] if node.op == "call_function" and node.args else None
    name = _name(node)
    if name in _FUSED and isinstance(producer, Node) and producer.op == "call_function":
        return producer
    return None


def _layer(node: Node) -> Node:
    """The layer that computed ``node``: past activations fused onto it."""
    while (producer := _fused_into(node)) is not None:
        node = producer
    return node


def _op(node: Node) -> str:
    """``conv2d``; an activation fused onto its producer as ``conv2d+relu``."""
    if node.op != "call_function":
        return node.op
    name = _name(node)
    producer = _fused_into(node)
    return name if producer is None else f"{_op(producer)}+{name}"


def _db(signal: float, noise: float) -> float:
    if noise == 0:
        return math.inf
    return 10 * math.log10(signal / noise) if signal else -math.inf
