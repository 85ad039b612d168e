"""``nn.GRU`` as one ``cortex_m_nn_float::gru`` node per layer, quantized as our kernel runs it.

As for the LSTM (``quantize/recurrent.py``): ``torch.export`` keeps an ``nn.GRU`` as one
``aten.gru.input`` for all its layers; before annotation :func:`split_grus` rewrites each our
kernel can run (unidirectional, eval mode) as one node per layer, whose output is that layer's
hidden-state sequence, and ``h_n`` as the last step of each layer's output. A zero initial
state (what ``nn.GRU`` builds without one) is no state at all.

The op computes the float GRU while the model calibrates (``hidden_bits`` 0). After
``convert_pt2e``, :func:`quantize_grus` gives it the quantization its lowering uses, and from
then on it computes the GRU as the device does, in float: int8 weights per gate, each gate's
products on the Q3.12 grid (saturated where the kernel saturates them), the gates on the Q0.15
grid and every step's hidden state on the output's grid, which the next step reads (the
arithmetic of ``ops/gru.py``, with exact sigmoid and tanh and one rounding per product). That
is the PT2E reference ``--verify`` holds the kernel to (``lower/rules/gru.py``).
"""

from __future__ import annotations

import torch
from torch.fx import GraphModule, Node

from cortex_m_nn.core.float_ops import GRU, LIB
from cortex_m_nn.core.graph import gru_refusal
from cortex_m_nn.ops.gru import gate_weights
from cortex_m_nn.ops.lstm import gate_biases
from cortex_m_nn.quantize.recurrent import (
    add_node,
    is_zeros,
    quantized_layers,
    split_layers,
    split_recurrent,
)

aten = torch.ops.aten
#: The gate grids: products Q3.12 (int16), gates Q0.15.
PRODUCT, GATE = 2.0**-12, 2.0**-15


def _grid(value: torch.Tensor, scale: float, low: float, high: float) -> torch.Tensor:
    return (value / scale).round().clamp(low, high) * scale


def _sat16(value: torch.Tensor) -> torch.Tensor:
    return _grid(value, PRODUCT, -32768, 32767)


def _dequantized(weight: torch.Tensor, bias: torch.Tensor, scale: float) -> tuple[list, list]:
    """Each gate's int8 weight and int32 bias as the kernel holds them, in float."""
    q, scales = gate_weights(weight)
    biases = gate_biases(bias, scale, scales)
    return (
        [g.double() * s for g, s in zip(q, scales, strict=True)],
        [b.double() * scale * s for b, s in zip(biases, scales, strict=True)],
    )


def _emulated(x, h, wx, wh, bx, bh, args) -> torch.Tensor:  # noqa: ANN001
    """The quantized GRU in float on [T, B, ·] values (see the module docstring)."""
    s_in, s_h, zp, bits = args
    wx, bx = _dequantized(wx, bx, s_in)
    wh, bh = _dequantized(wh, bh, s_h)
    low, high = -(2 ** (bits - 1)) - zp, 2 ** (bits - 1) - 1 - zp
    h = torch.zeros(x.shape[1], wh[0].shape[0], dtype=torch.float64) if h is None else h
    outputs = []
    for step in x:
        inputs = [_sat16(step @ wx[k].T + bx[k]) for k in range(3)]
        hidden = [_grid(h @ wh[k].T + bh[k], PRODUCT, -(2**40), 2**40) for k in range(3)]
        r, z = (_grid(torch.sigmoid(_sat16(inputs[k] + hidden[k])), GATE, 0, 32767) for k in (0, 1))
        reset = _grid(r * _sat16(hidden[2]), PRODUCT, -(2**40), 2**40)
        n = _grid(torch.tanh(_sat16(inputs[2] + reset)), GATE, -32768, 32767)
        h = _grid((1 - z) * n + z * h, s_h, low, high)
        outputs.append(h)
    return torch.stack(outputs)


def _float(seq, h, wx, wh, bx, bh) -> torch.Tensor:  # noqa: ANN001
    """The float GRU on [T, B, ·]: every step's hidden state."""
    h_t = torch.zeros(seq.shape[1], wh.shape[1], dtype=seq.dtype) if h is None else h
    outputs = []
    for step in seq:
        xr, xz, xn = (step @ wx.T + bx).chunk(3, dim=-1)
        hr, hz, hn = (h_t @ wh.T + bh).chunk(3, dim=-1)
        r, z = torch.sigmoid(xr + hr), torch.sigmoid(xz + hz)
        n = torch.tanh(xn + r * hn)
        h_t = (1 - z) * n + z * h_t
        outputs.append(h_t)
    return torch.stack(outputs)


def _gru(x, h, wx, wh, bx, bh, batch_first, s_in, s_h, zp, bits):  # noqa: ANN001
    """The op: float GRU while calibrating (``bits`` 0), the quantized one after."""
    seq = x.transpose(0, 1) if batch_first else x
    zeros = torch.zeros(wx.shape[0], dtype=x.dtype)
    bx, bh = (zeros if b is None else b for b in (bx, bh))
    if bits == 0:
        out = _float(seq, h, wx, wh, bx, bh)
    else:
        h0 = None if h is None else h.double()
        out = _emulated(seq.double(), h0, wx, wh, bx, bh, (s_in, s_h, zp, bits))
    out = out.to(x.dtype)
    return (out.transpose(0, 1) if batch_first else out).contiguous()


LIB.impl("gru", _gru, "CompositeExplicitAutograd")


def _split(graph: torch.fx.Graph, node: Node) -> None:
    h0, batch_first = node.args[1], bool(node.args[8])
    stateful = not is_zeros(h0)

    def layer_args(layer: int, source: Node, weights: list) -> tuple:
        h = add_node(graph, node, aten.select.int, (h0, 0, layer)) if stateful else None
        return (source, h, *weights, batch_first, 0.0, 0.0, 0, 0)

    split_layers(graph, node, GRU, layer_args)


def split_grus(model: GraphModule) -> GraphModule:
    """Each ``aten.gru.input`` our kernel can run as one :data:`GRU` node per layer."""
    return split_recurrent(model, aten.gru.input, gru_refusal, _split)


def quantize_grus(converted: GraphModule) -> None:
    """After ``convert_pt2e``: each :data:`GRU` between a ``dequantize`` and a ``quantize``
    computes as it will be lowered (its scales and its hidden dtype)."""
    for node, quantization in quantized_layers(converted, GRU):
        node.args = (*node.args[:7], *quantization)
    converted.recompile()
