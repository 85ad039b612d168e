"""``cortex_m_nn::lstm``: one unidirectional LSTM layer, ``arm_lstm_unidirectional_s8`` and
``_s16`` (int8 or int16 input and hidden state, int8 weights, int16 gates and cell state).

The input is ``[batch, time, features]`` (``time_major = 0``) or ``[time, batch, features]``;
the output, every step's hidden state, has the input's layout with ``hidden`` features. Gates
are stored in PyTorch's order (input, forget, cell, output): ``input_weights [4, H, I]``,
``hidden_weights [4, H, H]``, ``input_biases``/``hidden_biases [4, H]`` (int32 for int8, int64
for int16 activations), ``gate_parameters [4, 4]`` int32 rows (input multiplier, input shift,
hidden multiplier, hidden shift). Per step, with ``x`` and ``h`` the raw stored values::

    pre  = sat16(sat16(rq(bx + Wx·x, mx, sx)) + rq(bh + Wh·h, mh, sh))    Q3.12, per gate
    i, f, o = sigmoid(pre), g = tanh(pre)                                  Q0.15 (activation_s16)
    c = sat16(rq(f·c, forget))                                             cell, scale 2^p
    c = clamp(rq(i·g, update) + c, ±clip)                                  (clip 0: int16)
    h = clamp(rq(o · tanh(c · 2^(p + 12)), output) + output_offset, dtype)

``bx`` folds the input zero point into the bias (``bias − zp_in · Σ Wx``), ``bh`` the hidden
one (``−zp_h · Σ Wh``); ``rq`` is ``arm_nn_requantize`` (``arm_nn_requantize_s64`` with the
multiplier reduced to Q15 for the int16 case's matrix products). Without an initial state
(``hidden`` and ``cell`` None) the cell starts at 0 and the first step has no recurrent term,
as CMSIS-NN computes with no hidden-state buffer; with one, both are copied into the scratch
buffer the kernel runs on, so the program's tensors are never written. A kept state
(``state`` and ``cell_state``: buffers of the program, ``nn.Streaming``) is read the same way
and is the one thing written: the last step's hidden and cell states, for the next call.

``sigmoid``/``tanh`` are ``arm_nn_activation_s16``: a 256-entry table of sigmoid(i/24) in
0.16, linearly interpolated (9 fraction bits for sigmoid, 8 for tanh = 2·sigmoid(2x) − 1).
"""

from __future__ import annotations

import math

import torch

from cortex_m_nn.core.abi import Rounding
from cortex_m_nn.ops.arithmetic import (
    quantize_multiplier,
    reduce_multiplier,
    requantize,
    requantize_s64,
    wrap_int32,
)
from cortex_m_nn.ops.library import define_operator

#: Gate rows of the weights, biases and ``gate_parameters``: PyTorch's order.
GATES = ("input", "forget", "cell", "output")
#: Fixed scales: gate pre-activations Q3.12, gate outputs Q0.15.
GATE_INPUT_SCALE = 2.0**-12
GATE_OUTPUT_SCALE = 2.0**-15

#: Where ``arm_nn_activation_s16``'s table (CMSIS-NN's ``sigmoid_table_uint16``, the same as
#: TFLite's) is one above ``round(65536 · sigmoid(i / 24))``; the kernel tests hold all 256
#: entries to CMSIS-NN's own results through the LSTM they feed.
_TABLE_ONE_ABOVE = frozenset(
    (4, 8, 12, 14, 15, 16, 17, 19, 20, 21, 22, 25, 27, 28, 29, 30, 31, 33, 34, 35, 37, 39, 40)
    + (41, 43, 44, 45, 46, 49, 50, 54, 62, 63, 64, 66, 82, 86, 93, 100, 103, 112, 116, 135, 255)
)


def _sigmoid_table() -> torch.Tensor:
    values = [
        min(65535, round(65536 / (1 + math.exp(-i / 24))) + (i in _TABLE_ONE_ABOVE))
        for i in range(256)
    ]
    return torch.tensor(values, dtype=torch.int64)


SIGMOID_TABLE = _sigmoid_table()


def activation_s16(x: torch.Tensor, left_shift: int, sigmoid: bool) -> torch.Tensor:
    """``arm_nn_activation_s16`` on int64-held int16 values: real input ``x · 2^(ls − 12)``,
    output Q0.15."""
    bits = 9 if sigmoid else 8
    multiplier = 3 if left_shift < 0 else 3 << left_shift
    right = -left_shift if left_shift < 0 else 0
    rounding = 1 << (right - 1) if right > 0 else 0
    data = (x * multiplier + rounding) >> right
    magnitude = data.abs()
    index = magnitude >> bits
    low = SIGMOID_TABLE[index.clamp(max=254)]
    high = SIGMOID_TABLE[(index + 1).clamp(max=255)]
    fraction = magnitude & ((1 << bits) - 1)
    result = (low << bits) + fraction * (high - low)
    saturated = (0x7FFF << 10) if sigmoid else (0xFFFF << 8)
    result = torch.where(index >= 255, torch.full_like(result, saturated), result)
    positive = data >= 0
    if sigmoid:
        result = torch.where(positive, result + (1 << 9), (1 << 25) - result + (1 << 9) - 1)
        result = (result & 0xFFFFFFFF) >> 10
    else:
        result = torch.where(positive, result - (1 << 23) + (1 << 7), (1 << 23) - result + 127)
        result = (result & 0xFFFFFFFF) >> 8
    low16 = result & 0xFFFF
    return torch.where(low16 >= 1 << 15, low16 - (1 << 16), low16)


def gate_weights(weight: torch.Tensor, count: int = 4) -> tuple[torch.Tensor, list[float]]:
    """A ``[count·H, K]`` float weight as int8 ``[count, H, K]``, symmetric per gate (CMSIS-NN
    has one multiplier per gate), and the ``count`` scales (4 gates: LSTM; 3: GRU)."""
    gates = weight.detach().to(torch.float64).reshape(count, weight.shape[0] // count, -1)
    scales = [max(float(g.abs().max()), 1e-12) / 127.0 for g in gates]
    q = torch.stack([(g / s).round().clamp(-127, 127) for g, s in zip(gates, scales, strict=True)])
    return q.to(torch.int8), scales


def gate_biases(bias: torch.Tensor, input_scale: float, scales: list[float]) -> torch.Tensor:
    """The float ``[G·H]`` bias (an LSTM's ``b_ih + b_hh``) as int64 ``[G, H]``, each of the
    G gates at the scale of its input product (``s_in · s_w``)."""
    gates = bias.detach().to(torch.float64).reshape(len(scales), -1)
    return torch.stack(
        [(g / (input_scale * s)).round() for g, s in zip(gates, scales, strict=True)]
    ).to(torch.int64)


def parameters(
    weights: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    input_qparams: tuple[float, int],
    hidden_qparams: tuple[float, int],
    cell_scale_power: int,
    int16: bool,
) -> dict[str, object]:
    """The integer arguments of one layer (TFLite Micro's *prepare*, at compile time) from
    its float ``weight_ih``, ``weight_hh`` and summed bias."""
    (s_in, zp_in), (s_h, zp_h) = input_qparams, hidden_qparams
    qx, sx = gate_weights(weights[0])
    qh, sh = gate_weights(weights[1])
    bx = gate_biases(weights[2], s_in, sx) - zp_in * qx.to(torch.int64).sum(-1)
    bh = -zp_h * qh.to(torch.int64).sum(-1)
    gates = [
        [*quantize_multiplier(s_in * sx[k] / GATE_INPUT_SCALE),
         *quantize_multiplier(s_h * sh[k] / GATE_INPUT_SCALE)]
        for k in range(4)
    ]  # fmt: skip
    cell = 2.0**cell_scale_power
    return {
        "input_weights": qx,
        "hidden_weights": qh,
        "input_biases": bx if int16 else bx.to(torch.int32),
        "hidden_biases": bh if int16 else bh.to(torch.int32),
        "gate_parameters": torch.tensor(gates, dtype=torch.int32),
        "forget": quantize_multiplier(GATE_OUTPUT_SCALE),
        "update": quantize_multiplier(GATE_OUTPUT_SCALE**2 / cell),
        "output": quantize_multiplier(GATE_OUTPUT_SCALE**2 / s_h),
    }


def scratch_bytes(batch: int, hidden: int, dtype: torch.dtype) -> int:
    """The kernel's buffers: two int16 gate buffers, the int16 cell state and the hidden
    state (the input's dtype), each ``batch × hidden``."""
    return batch * hidden * (3 * 2 + (2 if dtype is torch.int16 else 1))


def _fake(input: torch.Tensor, hidden: object, cell: object, state: object, cell_state: object,
          input_weights: torch.Tensor, *args: object) -> torch.Tensor:  # fmt: skip
    return input.new_empty((*input.shape[:-1], input_weights.shape[1]))


def _sat16(value: torch.Tensor) -> torch.Tensor:
    return value.clamp(-(1 << 15), (1 << 15) - 1)


class _Step:
    """One step's arithmetic: the gates' products and requantizations of one call."""

    def __init__(self, arguments: tuple, int16: bool, rounding: Rounding) -> None:
        (wx, wh, bx, bh, gates) = arguments
        self.wx, self.wh = wx.to(torch.int64), wh.to(torch.int64)
        self.bx, self.bh = bx.to(torch.int64), bh.to(torch.int64)
        self.gates = gates.to(torch.int64)
        self.int16, self.rounding = int16, rounding

    def _product(self, acc: torch.Tensor, multiplier: int, shift: int) -> torch.Tensor:
        if self.int16:
            return requantize_s64(acc, reduce_multiplier(multiplier), shift)
        return requantize(wrap_int32(acc), multiplier, shift, self.rounding)

    def gate(self, k: int, x: torch.Tensor, h: torch.Tensor | None, sigmoid: bool) -> torch.Tensor:
        mx, sx, mh, sh = (int(v) for v in self.gates[k])
        pre = _sat16(self._product(self.bx[k] + x @ self.wx[k].T, mx, sx))
        if h is not None:
            pre = _sat16(pre + self._product(self.bh[k] + h @ self.wh[k].T, mh, sh))
        return activation_s16(pre, 0, sigmoid)


@define_operator(
    "lstm",
    "Tensor input, Tensor? hidden, Tensor? cell, Tensor(s!)? state, Tensor(c!)? cell_state,"
    " Tensor input_weights, Tensor hidden_weights,"
    " Tensor input_biases, Tensor hidden_biases, Tensor gate_parameters, int time_major,"
    " int cell_scale_power, int cell_clip, int forget_multiplier, int forget_shift,"
    " int update_multiplier, int update_shift, int output_multiplier, int output_shift,"
    " int output_offset, int scratch_bytes",
    _fake,
    scratch=True,
)
def lstm(
    input: torch.Tensor,
    hidden: torch.Tensor | None,
    cell: torch.Tensor | None,
    state: torch.Tensor | None,
    cell_state: torch.Tensor | None,
    input_weights: torch.Tensor,
    hidden_weights: torch.Tensor,
    input_biases: torch.Tensor,
    hidden_biases: torch.Tensor,
    gate_parameters: torch.Tensor,
    *arguments: int,
    rounding: Rounding,
) -> torch.Tensor:
    """Reference: every step of ``arm_nn_lstm_step_s8`` / ``_s16`` in order."""
    time_major, power, clip, fm, fs, um, us, om, os_, offset = arguments
    if input.dtype not in (torch.int8, torch.int16) or input.dim() != 3:
        raise ValueError(f"lstm: int8 or int16 [B, T, I] input, got {input.dtype} {input.shape}")
    int16 = input.dtype is torch.int16
    step = _Step((input_weights, hidden_weights, input_biases, hidden_biases, gate_parameters),
                 int16, rounding)  # fmt: skip
    x = input.to(torch.int64)
    x = x if time_major else x.transpose(0, 1)  # [T, B, I]
    batch, units = x.shape[1], input_weights.shape[1]
    if (state is None) != (cell_state is None) or (hidden is not None and state is not None):
        raise ValueError("lstm: an initial state or a kept one (hidden and cell), not both")
    if state is not None:
        hidden, cell = state, cell_state
    h = None if hidden is None else hidden.to(torch.int64).reshape(batch, units)
    c = torch.zeros(batch, units, dtype=torch.int64)
    if cell is not None:
        c = cell.to(torch.int64).reshape(batch, units)
    low, high = (-(1 << 15), (1 << 15) - 1) if clip <= 0 else (-clip, clip)
    info = torch.iinfo(input.dtype)
    outputs = []
    for t in range(x.shape[0]):
        f = step.gate(1, x[t], h, True)
        c = _sat16(requantize(f * c, fm, fs, rounding))
        i, g = step.gate(0, x[t], h, True), step.gate(2, x[t], h, False)
        c = (requantize(i * g, um, us, rounding) + c).clamp(low, high)
        o = step.gate(3, x[t], h, True)
        squashed = activation_s16(c, power + 12, False)
        h = (requantize(o * squashed, om, os_, rounding) + offset).clamp(info.min, info.max)
        outputs.append(h)
    if state is not None and cell_state is not None:  # kept for the next call
        state.copy_(h.reshape(state.shape).to(state.dtype))
        cell_state.copy_(c.reshape(cell_state.shape).to(torch.int16))
    out = torch.stack(outputs)
    out = out if time_major else out.transpose(0, 1)
    return out.to(input.dtype).contiguous()
