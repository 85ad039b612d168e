"""One ``nn.GRU`` layer (``cortex_m_nn_float::gru``, see ``quantize/gru.py``) →
``cortex_m_nn::gru`` (our kernel on CMSIS-NN's LSTM building blocks, ``ops/gru.py``).

The input is read in its logical ``[B, T, I]`` (``batch_first``) or ``[T, B, I]`` order; the
weights are quantized per gate exactly as the PT2E graph's GRU computes them
(``ops.gru.gate_weights``), the biases at each gate's input scale with the zero points folded
in (``ops.gru.parameters``). An initial state, when the model gives one, must be quantized as
the output (the kernel reads it as a step's output). A streaming layer's state
(``nn.Streaming``) becomes a zero state buffer of the program, per layer, which the kernel
starts from and leaves its last step in; the model's write-back of it is then dropped.

``--verify`` allows this operator :data:`ALLOWED_LSB`: the PT2E graph's GRU rounds each product
once, with exact sigmoid and tanh; the kernel rounds twice in CMSIS-NN's requantization and
interpolates its tables, and the update gate carries a step's difference into the next.
"""

from __future__ import annotations

import torch
from torch.fx import Node

from cortex_m_nn.core.cmsis_nn import Case, cmsis_function
from cortex_m_nn.core.families import aten
from cortex_m_nn.core.float_ops import GRU
from cortex_m_nn.core.graph import gru_refusal
from cortex_m_nn.core.refusals import LoweringRefused, Refusal
from cortex_m_nn.frontend.states import kept_state
from cortex_m_nn.lower.context import LoweringContext
from cortex_m_nn.lower.graph_values import QValue
from cortex_m_nn.lower.layout import census, noting_transposes, relayout
from cortex_m_nn.lower.registry import Lowered, Pattern, explains, rule
from cortex_m_nn.ops import gru as op

#: What ``--verify`` allows the recurrence (see the module docstring).
ALLOWED_LSB = 2


def _weights(context: LoweringContext, gru: Node) -> tuple[torch.Tensor, ...]:
    """Float ``weight_ih``, ``weight_hh``, ``bias_ih`` and ``bias_hh`` (zeros if none)."""
    wx, wh = context.attribute(gru.args[2]), context.attribute(gru.args[3])
    biases = [
        torch.zeros(wx.shape[0], dtype=torch.float64)
        if node is None
        else context.attribute(node).detach().to(torch.float64)
        for node in gru.args[4:6]
    ]
    return wx, wh, *biases


def _kept(
    context: LoweringContext, gru: Node, pattern: Pattern, shape: tuple[int, int]
) -> Node | None:
    """A streaming layer's state (``nn.Streaming``: its initial state a buffer the model
    writes back), as a zero state buffer of the program the kernel reads and writes; None for
    any other layer."""
    buffer = kept_state(gru.args[1])
    if buffer is None:
        return None
    if pattern.zero_point != 0:
        raise LoweringRefused(
            Refusal.GRU_RANGE, "a kept state needs the output's zero point 0 (its zero bytes)"
        )
    layer = int(gru.args[1].args[2])  # the layer's slice of the buffer
    return context.keep_state(buffer, layer, shape, torch.int8, pattern.scale)


@explains(aten.gru.input)
def why_float(node: Node) -> str | None:
    """An ``nn.GRU`` the quantizer did not split (``core/graph.gru_refusal``)."""
    reason = gru_refusal(node)
    return None if reason is None else f"{reason}: not lowered"


@rule(GRU)
def lower_gru(context: LoweringContext, pattern: Pattern) -> Lowered:
    gru = pattern.op
    before = census(context)
    x = context.input_value(gru.args[0])
    if x.dtype is not torch.int8 or pattern.dtype is not torch.int8:
        raise LoweringRefused(Refusal.GRU_RANGE, "an int16 GRU (the kernel runs int8)")
    if not x.layout_free:
        x = relayout(context, x, nhwc=False)
    batch_first = bool(gru.args[6])
    batch = x.shape[0] if batch_first else x.shape[1]
    units = context.attribute(gru.args[3]).shape[1]
    hidden, state = None, _kept(context, gru, pattern, (batch, units))
    if gru.args[1] is not None and state is None:
        initial = context.input_value(gru.args[1])
        if (initial.scale, initial.zero_point) != (pattern.scale, pattern.zero_point):
            raise LoweringRefused(
                Refusal.GRU_RANGE,
                f"initial hidden state quantized at ({initial.scale}, {initial.zero_point}), "
                f"the kernel reads it at the output's ({pattern.scale}, {pattern.zero_point})",
            )
        hidden = initial.node
    weights = _weights(context, gru)
    try:
        p = op.parameters(weights, (x.scale, x.zero_point), (pattern.scale, pattern.zero_point))
    except ValueError as error:
        raise LoweringRefused(Refusal.GRU_RANGE, str(error)) from error
    steps = x.shape[1] if batch_first else x.shape[0]
    names = ("input_weights", "hidden_weights", "input_biases", "hidden_biases")
    constants = context.constants(gru.name, **{k: p[k] for k in (*names, "gate_parameters")})
    out = context.call(
        "gru", x.node, hidden, state, *constants, 0 if batch_first else 1, *p["state"],
        pattern.zero_point, op.scratch_bytes(units),
    )  # fmt: skip
    value = QValue(out, pattern.scale, pattern.zero_point, (*x.shape[:-1], units))
    macs = batch * steps * 3 * units * (weights[0].shape[1] + units)
    weight_bytes = sum(p[k].numel() * p[k].element_size() for k in names)
    function = noting_transposes(context, before, cmsis_function("gru", Case.S8))
    return Lowered(value, "gru", function, macs, weight_bytes, allowed_lsb=ALLOWED_LSB)
