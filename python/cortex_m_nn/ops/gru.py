"""``cortex_m_nn::gru``: one unidirectional GRU layer on CMSIS-NN's building blocks (int8
input and hidden state, int8 weights, int16 gates). CMSIS-NN has no GRU: the kernel composes
the functions its LSTM is made of, with the same Q-formats.

The input is ``[batch, time, features]`` (``time_major = 0``) or ``[time, batch, features]``;
the output, every step's hidden state, has the input's layout with ``hidden`` features and
the hidden state's quantization (scale ``s_h``, zero point ``output_offset``). Gates are in
PyTorch's order (reset, update, new): ``input_weights [3, H, I]``, ``hidden_weights [3, H, H]``,
``input_biases``/``hidden_biases [3, H]`` int32, ``gate_parameters [3, 4]`` int32 rows (input
multiplier, input shift, hidden multiplier, hidden shift). Per step, with ``x`` and ``h`` the
raw stored values (``h`` starts as the initial state ``hidden``, the kept ``state``, or
``output_offset``: zero)::

    X_k  = sat16(rq(bx_k + Wx_k·x, mx_k, sx_k))                    Q3.12
    H_k  = sat16(rq(bh_k + Wh_k·h, mh_k, sh_k))                    Q3.12
    r    = sigmoid(sat16(X_r + H_r)),  z = sigmoid(sat16(X_z + H_z))      Q0.15
    n    = tanh(sat16(X_n + rq(r · H_n, 2^30, -14)))                      Q0.15
    h    = clamp(offset + rq((2^15 − z) · n, state) + rq(z · (h − offset), 2^30, -14), int8)

(``h = (1 − z)·n + z·h``; ``rq(·, 2^30, -14)`` is a multiply by 2^-15.) ``bx`` folds the input
zero point into the bias (``b_ih − zp_in · Σ Wx``), ``bh`` the hidden one (``b_hh − zp_h ·
Σ Wh``: the reset gate multiplies ``b_hn`` too, so the biases stay apart). In CMSIS-NN terms:
``arm_nn_vec_mat_mul_result_acc_s8_s16`` for each product (accumulated onto a zeroed buffer,
then onto ``X``), ``arm_elementwise_mul_acc_s16`` for ``r · H_n``, ``arm_nn_activation_s16``
for sigmoid and tanh, ``arm_nn_requantize`` for the new state. ``rq`` is
``arm_nn_requantize`` in the kernels' rounding. With a ``state`` (int8 ``[B, H]``, a buffer
of the program: ``nn.Streaming``), the layer starts from it and leaves its last step's hidden
state in it, so calls on consecutive pieces of a sequence give the outputs of one call on it.
"""

from __future__ import annotations

import torch

from cortex_m_nn.core.abi import Rounding
from cortex_m_nn.ops.arithmetic import quantize_multiplier, requantize, wrap_int32
from cortex_m_nn.ops.library import define_operator
from cortex_m_nn.ops.lstm import GATE_INPUT_SCALE, GATE_OUTPUT_SCALE, activation_s16
from cortex_m_nn.ops.lstm import gate_biases as _gate_biases
from cortex_m_nn.ops.lstm import gate_weights as _gate_weights

#: Gate rows of the weights, biases and ``gate_parameters``: PyTorch's order.
GATES = ("reset", "update", "new")
#: ``rq(·, HALF)``: a multiply by 2^-15 (a Q0.15 gate times a value, back to the value's grid).
HALF = (1 << 30, -14)


def gate_weights(weight: torch.Tensor) -> tuple[torch.Tensor, list[float]]:
    """A ``[3H, K]`` float weight as int8 ``[3, H, K]``, symmetric per gate, and the scales."""
    return _gate_weights(weight, len(GATES))


def parameters(
    weights: tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor],
    input_qparams: tuple[float, int],
    hidden_qparams: tuple[float, int],
) -> dict[str, object]:
    """The integer arguments of one layer from its float ``weight_ih``, ``weight_hh``,
    ``bias_ih`` and ``bias_hh`` (zeros where the layer has none)."""
    (s_in, zp_in), (s_h, zp_h) = input_qparams, hidden_qparams
    qx, sx = gate_weights(weights[0])
    qh, sh = gate_weights(weights[1])
    bx = _gate_biases(weights[2], s_in, sx) - zp_in * qx.to(torch.int64).sum(-1)
    bh = _gate_biases(weights[3], s_h, sh) - zp_h * qh.to(torch.int64).sum(-1)
    if max(int(bx.abs().max()), int(bh.abs().max())) >= 1 << 31:
        raise ValueError("an effective bias beyond int32: the bias is large for its scale")
    gates = [
        [*quantize_multiplier(s_in * sx[k] / GATE_INPUT_SCALE),
         *quantize_multiplier(s_h * sh[k] / GATE_INPUT_SCALE)]
        for k in range(len(GATES))
    ]  # fmt: skip
    return {
        "input_weights": qx,
        "hidden_weights": qh,
        "input_biases": bx.to(torch.int32),
        "hidden_biases": bh.to(torch.int32),
        "gate_parameters": torch.tensor(gates, dtype=torch.int32),
        "state": quantize_multiplier(GATE_OUTPUT_SCALE**2 / s_h),
    }


def scratch_bytes(units: int) -> int:
    """The kernel's buffers: four int16 gate buffers of ``units`` (r, z, n, H_n) and the
    initial hidden state (int8); one batch item runs at a time."""
    return units * (4 * 2 + 1)


def _fake(input: torch.Tensor, hidden: object, state: object, input_weights: torch.Tensor,
          *args: object) -> torch.Tensor:  # fmt: skip
    return input.new_empty((*input.shape[:-1], input_weights.shape[1]))


def _sat16(value: torch.Tensor) -> torch.Tensor:
    return value.clamp(-(1 << 15), (1 << 15) - 1)


class _Products:
    """Each gate's two requantized products of one call."""

    def __init__(self, arguments: tuple, rounding: Rounding) -> None:
        wx, wh, bx, bh, gates = arguments
        self.wx, self.wh = wx.to(torch.int64), wh.to(torch.int64)
        self.bx, self.bh = bx.to(torch.int64), bh.to(torch.int64)
        self.gates = [[int(v) for v in row] for row in gates]
        self.rounding = rounding

    def input(self, k: int, x: torch.Tensor) -> torch.Tensor:
        multiplier, shift = self.gates[k][:2]
        acc = wrap_int32(self.bx[k] + x @ self.wx[k].T)
        return _sat16(requantize(acc, multiplier, shift, self.rounding))

    def hidden(self, k: int, h: torch.Tensor) -> torch.Tensor:
        multiplier, shift = self.gates[k][2:]
        acc = wrap_int32(self.bh[k] + h @ self.wh[k].T)
        return requantize(acc, multiplier, shift, self.rounding)


@define_operator(
    "gru",
    "Tensor input, Tensor? hidden, Tensor(s!)? state, Tensor input_weights,"
    " Tensor hidden_weights, Tensor input_biases, Tensor hidden_biases, Tensor gate_parameters,"
    " int time_major, int state_multiplier, int state_shift, int output_offset,"
    " int scratch_bytes",
    _fake,
    scratch=True,
)
def gru(
    input: torch.Tensor,
    hidden: torch.Tensor | None,
    state: torch.Tensor | None,
    input_weights: torch.Tensor,
    hidden_weights: torch.Tensor,
    input_biases: torch.Tensor,
    hidden_biases: torch.Tensor,
    gate_parameters: torch.Tensor,
    *arguments: int,
    rounding: Rounding,
) -> torch.Tensor:
    """Reference: every step of the kernel, in order (see the module docstring)."""
    time_major, state_multiplier, state_shift, offset = arguments
    if input.dtype is not torch.int8 or input.dim() != 3:
        raise ValueError(f"gru: an int8 [B, T, I] input, got {input.dtype} {input.shape}")
    products = _Products(
        (input_weights, hidden_weights, input_biases, hidden_biases, gate_parameters), rounding
    )
    x = input.to(torch.int64)
    x = x if time_major else x.transpose(0, 1)  # [T, B, I]
    batch, units = x.shape[1], input_weights.shape[1]
    if hidden is not None and state is not None:
        raise ValueError("gru: an initial state or a kept state, not both")
    h = torch.full((batch, units), offset, dtype=torch.int64)
    for given in (hidden, state):
        if given is not None:
            h = given.to(torch.int64).reshape(batch, units)
    outputs = []
    for t in range(x.shape[0]):
        r = activation_s16(_sat16(products.input(0, x[t]) + products.hidden(0, h)), 0, True)
        z = activation_s16(_sat16(products.input(1, x[t]) + products.hidden(1, h)), 0, True)
        reset = requantize(r * _sat16(products.hidden(2, h)), *HALF, rounding)
        n = activation_s16(_sat16(products.input(2, x[t]) + reset), 0, False)
        new = requantize(((1 << 15) - z) * n, state_multiplier, state_shift, rounding)
        kept = requantize(z * (h - offset), *HALF, rounding)
        h = (offset + new + kept).clamp(-128, 127)
        outputs.append(h)
    if state is not None:  # the last step's hidden state, kept for the next call
        state.copy_(h.reshape(state.shape).to(torch.int8))
    out = torch.stack(outputs)
    out = out if time_major else out.transpose(0, 1)
    return out.to(torch.int8).contiguous()
