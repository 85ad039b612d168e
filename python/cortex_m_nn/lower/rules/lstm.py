"""One ``nn.LSTM`` layer (``cortex_m_nn_float::lstm``, see ``quantize/recurrent.py``) →
``cortex_m_nn::lstm`` (``arm_lstm_unidirectional_s8``; int16 activations:
``arm_lstm_unidirectional_s16`` with int64 biases).

The input is read in its logical ``[B, T, I]`` (``batch_first``) or ``[T, B, I]`` order; the
weights are quantized per gate exactly as the PT2E graph's LSTM computes them
(``ops.lstm.gate_weights``), the biases at each gate's input scale with the zero points
folded in (``ops.lstm.parameters``). An initial state, when the model gives one, must be
quantized as the kernel reads it: the hidden state as the output, the cell state at 2^p. A
streaming layer's states (``nn.Streaming``) become zero state buffers of the program, per
layer, which the kernel starts from and leaves its last step in; the model's write-backs of
them (and the float computation of ``c_n`` they read) are then dropped.

``--verify`` allows this operator :data:`ALLOWED_LSB`. The PT2E graph's LSTM rounds every
product once; CMSIS-NN's requantization rounds twice (the doubling high multiply, then the
shift), so a gate pre-activation can differ by one Q3.12 step. Alone that moves a hidden
state by far less than an LSB, but the cell state keeps it (the forget gate is near 1) and
every later step adds its own: over a 49-step sequence the outputs stay within 1 LSB but for
rare elements at 2, where a carried difference meets a rounding tie of their own. A wrong
multiplier, bias, zero point or layout moves outputs by tens of LSB.

With int16 activations the hidden state's LSB (about 2^-15 of its range) is finer than what
the kernel computes it from: the output gate and tanh(c) are Q0.15 values from CMSIS-NN's
interpolated tables (up to 2.5 steps from exact each), so the allowance is
:data:`HIDDEN_TOLERANCE` of the hidden state's real value, in its LSB.
"""

from __future__ import annotations

import math

import torch
from torch.fx import Node

from cortex_m_nn.core.cmsis_nn import Case, cmsis_function
from cortex_m_nn.core.families import aten
from cortex_m_nn.core.float_ops import LSTM
from cortex_m_nn.core.graph import lstm_refusal
from cortex_m_nn.core.refusals import LoweringRefused, Refusal
from cortex_m_nn.frontend.states import kept_state
from cortex_m_nn.lower.context import LoweringContext
from cortex_m_nn.lower.graph_values import QValue
from cortex_m_nn.lower.layout import census, noting_transposes, relayout
from cortex_m_nn.lower.registry import Lowered, Pattern, explains, rule
from cortex_m_nn.ops import lstm as op

#: What ``--verify`` allows the recurrence (see the module docstring) ...
ALLOWED_LSB = 2
#: ... or, where the hidden state's LSB is finer than the gates' Q0.15 (int16), this much of
#: the hidden state's real value: 16 Q0.15 steps.
HIDDEN_TOLERANCE = 2.0**-11
#: The largest |effective bias| the MVE s16 path keeps (it reads the int64 bias as int32).
MAX_BIAS = (1 << 31) - 1


def _state(
    context: LoweringContext, node: object, qparams: tuple[float, int], what: str
) -> Node | None:
    """The initial state's int8/int16 node, checked against the quantization the kernel reads."""
    if node is None:
        return None
    value = context.input_value(node, int16=True)
    if (value.scale, value.zero_point) != qparams:
        raise LoweringRefused(
            Refusal.LSTM_STATE,
            f"initial {what} quantized at ({value.scale}, {value.zero_point}), the kernel reads "
            f"it at {qparams}",
        )
    return value.node


def _weights(
    context: LoweringContext, lstm: Node
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Float ``weight_ih``, ``weight_hh`` and the summed bias of the layer."""
    wx, wh = context.attribute(lstm.args[3]), context.attribute(lstm.args[4])
    bias = torch.zeros(wx.shape[0], dtype=torch.float64)
    for node in lstm.args[5:7]:
        if node is not None:
            bias = bias + context.attribute(node).detach().to(torch.float64)
    return wx, wh, bias


def _kept(
    context: LoweringContext, lstm: Node, pattern: Pattern, shape: tuple[int, int]
) -> tuple[Node | None, Node | None]:
    """A streaming layer's states (``nn.Streaming``: its initial hidden and cell states
    buffers the model writes back), as zero state buffers of the program the kernel reads and
    writes (the hidden state as the output, the cell in int16 at 2^p); Nones for any other
    layer."""
    hidden, cell = kept_state(lstm.args[1]), kept_state(lstm.args[2])
    if hidden is None or cell is None:
        return None, None
    if pattern.zero_point != 0 or pattern.dtype is not torch.int8:
        raise LoweringRefused(
            Refusal.LSTM_STATE, "a kept state needs an int8 output of zero point 0 (zero bytes)"
        )
    layer = int(lstm.args[1].args[2])  # the layer's slice of each buffer
    return (
        context.keep_state(hidden, layer, shape, torch.int8, pattern.scale),
        context.keep_state(cell, layer, shape, torch.int16, 2.0 ** int(lstm.args[8])),
    )


@explains(aten.lstm.input)
def why_float(node: Node) -> str | None:
    """An ``nn.LSTM`` the quantizer did not split (``core/graph.lstm_refusal``)."""
    reason = lstm_refusal(node)
    return None if reason is None else f"{reason}: not lowered"


@rule(LSTM)
def lower_lstm(context: LoweringContext, pattern: Pattern) -> Lowered:
    lstm = pattern.op
    before = census(context)
    x = context.input_value(lstm.args[0], int16=True)
    int16 = x.dtype is torch.int16
    if not x.layout_free:
        x = relayout(context, x, nhwc=False)
    batch_first, power = bool(lstm.args[7]), int(lstm.args[8])
    hidden_qparams = (pattern.scale, pattern.zero_point)
    batch, steps = (x.shape[0], x.shape[1]) if batch_first else (x.shape[1], x.shape[0])
    units = context.attribute(lstm.args[4]).shape[1]
    state, cell_state = _kept(context, lstm, pattern, (batch, units))
    hidden = cell = None
    if state is None:
        hidden = _state(context, lstm.args[1], hidden_qparams, "hidden state")
        cell = _state(context, lstm.args[2], (2.0**power, 0), "cell state")
    wx, wh, bias = _weights(context, lstm)
    try:
        p = op.parameters((wx, wh, bias), (x.scale, x.zero_point), hidden_qparams, power, int16)
    except ValueError as error:
        raise LoweringRefused(Refusal.LSTM_RANGE, str(error)) from error
    if p["input_biases"].abs().max() > MAX_BIAS or pattern.dtype is not x.dtype:
        raise LoweringRefused(
            Refusal.LSTM_RANGE, "an effective bias beyond int32, or output and input dtypes differ"
        )
    constants = context.constants(
        lstm.name, **{k: p[k] for k in ("input_weights", "hidden_weights", "input_biases",
                                         "hidden_biases", "gate_parameters")}
    )  # fmt: skip
    out = context.call(
        "lstm", x.node, hidden, cell, state, cell_state, *constants, 0 if batch_first else 1,
        power, 0,
        *p["forget"], *p["update"], *p["output"], pattern.zero_point,
        op.scratch_bytes(batch, units, x.dtype),
    )  # fmt: skip
    shape = (*x.shape[:-1], units)
    value = QValue(out, pattern.scale, pattern.zero_point, shape, dtype=x.dtype)
    macs = batch * steps * 4 * units * (wx.shape[1] + units)
    weights = sum(t.numel() * t.element_size() for t in (p["input_weights"], p["hidden_weights"]))
    biases = sum(t.numel() * t.element_size() for t in (p["input_biases"], p["hidden_biases"]))
    return Lowered(
        value, "lstm",
        noting_transposes(context, before, cmsis_function("lstm", Case.S16 if int16 else Case.S8)),
        macs=macs, weight_bytes=weights + biases,
        allowed_lsb=max(ALLOWED_LSB, math.ceil(HIDDEN_TOLERANCE / pattern.scale)),
    )  # fmt: skip
