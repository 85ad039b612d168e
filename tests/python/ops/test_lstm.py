"""``cortex_m_nn::lstm``: one case table of ``nn.LSTM`` layers feeding the lowering check (no
fallback, ``--verify`` within the 2 LSB it allows the recurrence, on three cores) and the
implementation check (the reference against CMSIS-NN's step written again in plain Python ints,
element by element, and its sigmoid and tanh against float64 within their interpolation
bound); what CMSIS-NN cannot run is refused with the reason and the nearest rewrite."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import cortex_m_nn.ops  # noqa: F401
from cortex_m_nn.check.harness import check_dialect
from cortex_m_nn.core.errors import CompileError
from cortex_m_nn.core.options import Activations, QuantizationOptions
from cortex_m_nn.core.target import Target
from cortex_m_nn.lower.rules.lstm import ALLOWED_LSB
from cortex_m_nn.nn import Streaming
from cortex_m_nn.ops import lstm as op
from cortex_m_nn.quantize.recurrent import cell_scale_power

from .independent import ref_requantize, ref_requantize_s64


class Sequence(nn.Module):
    """An LSTM read as every step's output, the last layer's h_n, or both; optionally started
    from a given state."""

    def __init__(self, lstm: nn.LSTM, read: str = "output", state: bool = False) -> None:
        super().__init__()
        self.lstm, self.read, self.state = lstm, read, state

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.state:
            batch = x.shape[0 if self.lstm.batch_first else 1]
            shape = (self.lstm.num_layers, batch, self.lstm.hidden_size)
            h0 = torch.full(shape, 0.25)
            out, (h, _) = self.lstm(x, (h0, -h0))
        else:
            out, (h, _) = self.lstm(x)
        return {"output": out, "h_n": h, "both": out.sum(-1, keepdim=True) + h[-1:].mean()}[
            self.read
        ]


class Streamed(nn.Module):
    """A streaming layer read as its output."""

    def __init__(self, layer: Streaming) -> None:
        super().__init__()
        self.layer = layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)


@dataclass(frozen=True)
class Row:
    """``nn.LSTM(**lstm)`` read as ``read``, on an input of ``shape``; ``layers`` lowered."""

    lstm: dict
    shape: tuple[int, ...]
    read: str = "output"
    state: bool = False
    #: the layer in ``cortex_m_nn.nn.Streaming``: its state kept from call to call
    stream: bool = False

    def build(self, seed: int = 0) -> nn.Module:
        torch.manual_seed(seed)
        layer = nn.LSTM(**self.lstm)
        if self.stream:
            batch = self.shape[0 if layer.batch_first else 1]
            return Streamed(Streaming(layer, batch)).eval()
        return Sequence(layer, self.read, self.state).eval()

    @property
    def layers(self) -> int:
        return self.lstm.get("num_layers", 1)


CASES = {
    "batch-first": Row({"input_size": 8, "hidden_size": 16, "batch_first": True}, (1, 12, 8)),
    "time-major": Row({"input_size": 5, "hidden_size": 7}, (9, 2, 5)),
    "two-layers": Row(
        {"input_size": 6, "hidden_size": 12, "num_layers": 2, "batch_first": True}, (2, 6, 6)
    ),
    "three-layers-h_n": Row(
        {"input_size": 4, "hidden_size": 8, "num_layers": 3}, (5, 1, 4), read="h_n"
    ),
    "initial-state": Row(
        {"input_size": 8, "hidden_size": 10, "batch_first": True}, (2, 7, 8), state=True
    ),
    "initial-state-two-layers": Row(
        {"input_size": 3, "hidden_size": 6, "num_layers": 2}, (4, 3, 3), state=True
    ),
    "no-bias": Row({"input_size": 8, "hidden_size": 8, "bias": False}, (6, 1, 8)),
    "output-and-h_n": Row(
        {"input_size": 10, "hidden_size": 4, "batch_first": True}, (3, 5, 10), read="both"
    ),
    "streaming": Row(
        {"input_size": 8, "hidden_size": 12, "batch_first": True}, (1, 1, 8), stream=True
    ),
    "streaming-two-layers": Row(
        {"input_size": 5, "hidden_size": 6, "num_layers": 2}, (2, 2, 5), stream=True
    ),
}


# -- lowering --------------------------------------------------------------------------------


PRECISIONS = {"int8": None, "int16": QuantizationOptions(activations=Activations.INT16)}


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("target", ["cortex-m55", "cortex-m33", "cortex-m0plus"])
@pytest.mark.parametrize("name", CASES)
def test_lowers_without_fallback_and_verifies(name: str, target: str, precision: str) -> None:
    """Every case lowers; with int16 activations an LSTM without initial state runs
    arm_lstm_unidirectional_s16, one with (or with a kept state) stays int8 (its state is
    quantized in int8)."""
    row = CASES[name]
    example = torch.randn(*row.shape, generator=torch.Generator().manual_seed(3))
    after = {"cortex_m_nn.lstm": row.layers, "cortex_m_nn_float.lstm": 0, "aten.lstm": 0}
    compiled, verification = check_dialect(
        row.build(),
        (example,),
        target=Target.parse(target),
        after=after,
        options=PRECISIONS[precision],
    )
    assert not [r for r in compiled.records if not r.lowered]
    functions = {r.cmsis_function for r in compiled.records if r.kernel == "cortex_m_nn::lstm"}
    int16 = precision == "int16" and not (row.state or row.stream)
    assert functions == {f"arm_lstm_unidirectional_s{16 if int16 else 8}"}
    if not int16:
        assert verification.max_lsb <= ALLOWED_LSB


class Recurrent(nn.Module):
    """A recurrent layer read as its output (``index`` 0) or its final cell state (``(1, 1)``)."""

    def __init__(self, layer: nn.Module, index: tuple[int, ...] = (0,)) -> None:
        super().__init__()
        self.layer, self.index = layer, index

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.layer(x)
        for i in self.index:
            out = out[i]
        return out


REFUSED = {
    "bidirectional": (
        lambda: Recurrent(nn.LSTM(4, 6, batch_first=True, bidirectional=True)),
        "bidirectional LSTM.*two nn.LSTM",
    ),
    "projection": (
        lambda: Recurrent(nn.LSTM(4, 6, batch_first=True, proj_size=3)),
        "proj_size > 0.*nn.Linear",
    ),
    "final-cell-state": (
        lambda: Recurrent(nn.LSTM(4, 6, batch_first=True), (1, 1)),
        "c_n is read.*read h_n",
    ),
}


@pytest.mark.parametrize("name", REFUSED)
def test_what_cmsis_nn_cannot_run_is_refused_with_the_rewrite(name: str) -> None:
    make, message = REFUSED[name]
    torch.manual_seed(0)
    with pytest.raises(CompileError, match=message):
        check_dialect(make().eval(), (torch.randn(1, 5, 4),))


# -- implementation: CMSIS-NN's step in plain Python ints ------------------------------------


def ref_activation(x: int, left_shift: int, sigmoid: bool) -> int:
    """arm_nn_activation_s16 for one value, from its C text: table lookup, interpolation."""
    table = op.SIGMOID_TABLE.tolist()
    bits = 9 if sigmoid else 8
    multiplier = 3 << left_shift if left_shift >= 0 else 3
    right = max(-left_shift, 0)
    data = (x * multiplier + ((1 << (right - 1)) if right else 0)) >> right
    index = abs(data) >> bits
    if index >= 255:
        result = 0x7FFF << 10 if sigmoid else 0xFFFF << 8
    else:
        a, b = table[index], table[index + 1]
        result = (a << bits) + (abs(data) & ((1 << bits) - 1)) * (b - a)
    if sigmoid:
        result = result + 512 if data >= 0 else (1 << 25) - result + 511
        result = (result % 2**32) >> 10
    else:
        result = result - (1 << 23) + 128 if data >= 0 else (1 << 23) - result + 127
        result = (result % 2**32) >> 8
    result &= 0xFFFF
    return result - 65536 if result >= 32768 else result


def sat(value: int, low: int = -32768, high: int = 32767) -> int:
    return max(low, min(high, value))


def ref_lstm(args: tuple, int16: bool) -> list[list[list[int]]]:
    """The layer on time-major int lists: [T][B][H]."""
    x, h, c, wx, wh, bx, bh, gates, power, clip, fm, fs, um, us, om, os_, zp = args
    steps, batch, units = len(x), len(x[0]), len(wx[0])
    c = [[0] * units for _ in range(batch)] if c is None else c
    low, high = (-32768, 32767) if int16 else (-128, 127)
    clip_low, clip_high = (-clip, clip) if clip > 0 else (-32768, 32767)

    def product(acc: int, m: int, s: int) -> int:
        return ref_requantize_s64(acc, m, s) if int16 else ref_requantize(acc, m, s)

    def gate(k: int, b: int, t: int, sigmoid: bool) -> list[int]:
        mx, sx, mh, sh = gates[k]
        out = []
        for r in range(units):
            pre = sat(
                product(
                    bx[k][r] + sum(a * w for a, w in zip(x[t][b], wx[k][r], strict=True)), mx, sx
                )
            )
            if h is not None:
                acc = bh[k][r] + sum(a * w for a, w in zip(h[b], wh[k][r], strict=True))
                pre = sat(pre + product(acc, mh, sh))
            out.append(ref_activation(pre, 0, sigmoid))
        return out

    outputs = []
    for t in range(steps):
        step = []
        for b in range(batch):
            i, f = gate(0, b, t, True), gate(1, b, t, True)
            g, o = gate(2, b, t, False), gate(3, b, t, True)
            for r in range(units):
                cell = sat(ref_requantize(f[r] * c[b][r], fm, fs))
                c[b][r] = sat(ref_requantize(i[r] * g[r], um, us) + cell, clip_low, clip_high)
            squashed = [ref_activation(v, power + 12, False) for v in c[b]]
            hidden = [ref_requantize(o[r] * squashed[r], om, os_) + zp for r in range(units)]
            step.append([sat(v, low, high) for v in hidden])
        outputs.append(step)
        h = step
    return outputs


@st.composite
def layers(draw: st.DrawFn) -> tuple[tuple, bool]:
    """A call with parameters as the rule prepares them from random float weights and scales."""
    int16 = draw(st.booleans())
    batch, steps = draw(st.integers(1, 2)), draw(st.integers(1, 4))
    features, units = draw(st.integers(1, 6)), draw(st.integers(1, 5))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    spread = draw(st.floats(0.1, 2.0))
    weights = (
        torch.randn(4 * units, features, generator=gen) * spread,
        torch.randn(4 * units, units, generator=gen) * spread,
        torch.randn(4 * units, generator=gen, dtype=torch.float64),
    )
    zp_in, zp_h = (0, 0) if int16 else (draw(st.integers(-128, 127)), draw(st.integers(-100, 100)))
    s_in = 10 ** draw(st.floats(-2.5, -1.0)) / (256 if int16 else 1)
    s_h = 10 ** draw(st.floats(-2.5, -1.5)) / (256 if int16 else 1)
    stateful = draw(st.booleans())
    power = cell_scale_power(steps, stateful) + draw(st.integers(-3, 0))
    p = op.parameters(weights, (s_in, zp_in), (s_h, zp_h), power, int16)
    dtype, bound = (torch.int16, 32768) if int16 else (torch.int8, 128)
    x = torch.randint(-bound, bound, (steps, batch, features), generator=gen).to(dtype)
    h = torch.randint(-bound, bound, (batch, units), generator=gen).to(dtype) if stateful else None
    c = torch.randint(-32768, 32768, (batch, units), generator=gen).to(torch.int16)
    c = c if stateful else None
    clip = draw(st.sampled_from([0, 0, draw(st.integers(1, 32767))]))
    args = (x, h, c, None, None, p["input_weights"], p["hidden_weights"], p["input_biases"])
    args += (p["hidden_biases"], p["gate_parameters"], 1, power, clip)
    args += (*p["forget"], *p["update"], *p["output"], zp_h)
    return args, int16


@settings(max_examples=250, deadline=None)
@given(case=layers())
def test_reference_equals_cmsis_nn_step_in_python_ints(case: tuple[tuple, bool]) -> None:
    args, int16 = case
    got = op.lstm(*args)
    as_lists = [a.tolist() if isinstance(a, torch.Tensor) else a for a in args]
    del as_lists[10]  # time_major
    del as_lists[3:5]  # no kept state
    want = ref_lstm(tuple(as_lists), int16)
    assert got.tolist() == want


def test_batch_major_is_time_major_transposed() -> None:
    gen = torch.Generator().manual_seed(1)
    weights = (torch.randn(8, 3, generator=gen), torch.randn(8, 2, generator=gen), torch.zeros(8))
    p = op.parameters(weights, (0.05, 3), (0.01, -5), -12, False)
    x = torch.randint(-128, 128, (4, 3, 3), generator=gen).to(torch.int8)
    tail = (*p["forget"], *p["update"], *p["output"], -5)
    tensors = [p[k] for k in ("input_weights", "hidden_weights", "input_biases")]
    tensors += [p["hidden_biases"], p["gate_parameters"]]
    time_major = op.lstm(x, None, None, None, None, *tensors, 1, -12, 0, *tail)
    batch_major = op.lstm(
        x.transpose(0, 1).contiguous(), None, None, None, None, *tensors, 0, -12, 0, *tail
    )
    assert torch.equal(batch_major, time_major.transpose(0, 1))


@settings(max_examples=80, deadline=None)
@given(case=layers(), cut=st.integers(0, 4))
def test_a_kept_state_continues_the_sequence(case: tuple[tuple, bool], cut: int) -> None:
    """Two calls on the pieces of a sequence, the hidden and cell states kept between them,
    give one call's outputs on the whole of it; the states end as its last step's."""
    (x, initial, cell, _, _, *rest), _ = case
    units, zero = rest[0].shape[1], rest[-1]  # no initial state: the output's zero point
    state = torch.full((x.shape[1], units), zero) if initial is None else initial.clone()
    state = state.to(x.dtype)
    cell_state = torch.zeros(x.shape[1], units, dtype=torch.int16) if cell is None else cell.clone()
    whole_state, whole_cell = state.clone(), cell_state.clone()
    whole = op.lstm(x, state.clone(), cell_state.clone(), None, None, *rest)
    assert torch.equal(op.lstm(x, None, None, whole_state, whole_cell, *rest), whole)
    cut = min(cut, x.shape[0])
    pieces = [
        op.lstm(x[a:b], None, None, state, cell_state, *rest)
        for a, b in ((0, cut), (cut, x.shape[0]))
        if b > a
    ]
    assert torch.equal(torch.cat(pieces), whole)
    assert torch.equal(state, whole[-1])
    assert torch.equal(cell_state, whole_cell)


@pytest.mark.parametrize("left_shift", [-3, 0, 1, 3])
@pytest.mark.parametrize("sigmoid", [True, False])
def test_activation_within_interpolation_bound_of_float(left_shift: int, sigmoid: bool) -> None:
    """Every int16 input: the table interpolation stays within 2.5 Q0.15 LSB of float64."""
    x = torch.arange(-32768, 32768, dtype=torch.int64)
    real = x.double() * 2.0 ** (left_shift - 12)
    exact = (torch.sigmoid(real) if sigmoid else torch.tanh(real)) * 32768
    got = op.activation_s16(x, left_shift, sigmoid)
    assert (got.double() - exact).abs().max() <= 2.5
    sample = range(-32768, 32768, 97)
    assert [ref_activation(v, left_shift, sigmoid) for v in sample] == got[
        torch.tensor(list(sample)) + 32768
    ].tolist()


@pytest.mark.parametrize("steps", [1, 2, 49, 100, 1000])
@pytest.mark.parametrize("stateful", [False, True])
@pytest.mark.parametrize("peak", [None, 0.01, 0.7, 3.0, 5000.0])
def test_cell_scale_is_the_finest_that_holds_the_bound(
    steps: int, stateful: bool, peak: float | None
) -> None:
    """|c_t| < t (+ the initial bound), or twice the calibrated peak where that is less, fits
    int16 at the chosen scale, and half the scale would not hold it (down to Q0.15)."""
    power = cell_scale_power(steps, stateful, peak)
    bound = steps + (8 if stateful else 0)
    if peak is not None:
        bound = min(bound, 2 * peak)
    assert bound <= 2.0 ** (power + 15) and -15 <= power <= 0
    assert bound > 2.0 ** (power + 14) or power == -15
    assert math.isclose(op.GATE_OUTPUT_SCALE, 2**-15)
