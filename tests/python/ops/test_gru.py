"""``cortex_m_nn::gru``: one case table of ``nn.GRU`` layers feeding the lowering check (no
fallback, ``--verify`` within the 2 LSB it allows the recurrence, on three cores) and the
implementation check (the reference against the kernel's step written again in plain Python
ints, element by element, from CMSIS-NN's building blocks); what it cannot run is refused
with the reason and the nearest rewrite."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

import cortex_m_nn.ops  # noqa: F401
from cortex_m_nn.check.harness import check_dialect
from cortex_m_nn.core.errors import CompileError
from cortex_m_nn.core.target import Target
from cortex_m_nn.lower.rules.gru import ALLOWED_LSB
from cortex_m_nn.nn import Streaming
from cortex_m_nn.ops import gru as op

from .independent import ref_requantize
from .test_lstm import Streamed, ref_activation, sat


class Sequence(nn.Module):
    """A GRU read as every step's output, the last layer's h_n, or both; optionally started
    from a given state."""

    def __init__(self, gru: nn.GRU, read: str = "output", state: bool = False) -> None:
        super().__init__()
        self.gru, self.read, self.state = gru, read, state

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.state:
            batch = x.shape[0 if self.gru.batch_first else 1]
            h0 = torch.full((self.gru.num_layers, batch, self.gru.hidden_size), 0.25)
            out, h = self.gru(x, h0)
        else:
            out, h = self.gru(x)
        return {"output": out, "h_n": h, "both": out.sum(-1, keepdim=True) + h[-1:].mean()}[
            self.read
        ]


@dataclass(frozen=True)
class Row:
    """``nn.GRU(**gru)`` read as ``read``, on an input of ``shape``."""

    gru: dict
    shape: tuple[int, ...]
    read: str = "output"
    state: bool = False
    #: the layer in ``cortex_m_nn.nn.Streaming``: its state kept from call to call
    stream: bool = False

    def build(self, seed: int = 0) -> nn.Module:
        torch.manual_seed(seed)
        layer = nn.GRU(**self.gru)
        if self.stream:
            batch = self.shape[0 if layer.batch_first else 1]
            return Streamed(Streaming(layer, batch)).eval()
        return Sequence(layer, self.read, self.state).eval()

    @property
    def layers(self) -> int:
        return self.gru.get("num_layers", 1)


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


@pytest.mark.parametrize("target", ["cortex-m55", "cortex-m33", "cortex-m0plus"])
@pytest.mark.parametrize("name", CASES)
def test_lowers_without_fallback_and_verifies(name: str, target: str) -> None:
    row = CASES[name]
    example = torch.randn(*row.shape, generator=torch.Generator().manual_seed(3))
    after = {"cortex_m_nn.gru": row.layers, "cortex_m_nn_float.gru": 0, "aten.gru": 0}
    compiled, verification = check_dialect(
        row.build(), (example,), target=Target.parse(target), after=after
    )
    assert not [r for r in compiled.records if not r.lowered]
    assert verification.max_lsb <= ALLOWED_LSB


class Recurrent(nn.Module):
    def __init__(self, layer: nn.Module) -> None:
        super().__init__()
        self.layer = layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)[0]


def test_bidirectional_is_refused_with_the_rewrite() -> None:
    torch.manual_seed(0)
    model = Recurrent(nn.GRU(4, 6, batch_first=True, bidirectional=True)).eval()
    with pytest.raises(CompileError, match="bidirectional GRU.*two nn.GRU"):
        check_dialect(model, (torch.randn(1, 5, 4),))


# -- implementation: the kernel's step in plain Python ints ----------------------------------


def _dot(bias: int, vector: list[int], row: list[int]) -> int:
    return bias + sum(a * w for a, w in zip(vector, row, strict=True))


def ref_gru(args: tuple) -> list[list[list[int]]]:
    """The layer on time-major int lists: [T][B][H]."""
    x, h, wx, wh, bx, bh, gates, state_m, state_s, zp = args
    batch, units = len(x[0]), len(wx[0])
    h = [[zp] * units for _ in range(batch)] if h is None else h
    outputs = []
    for step in x:
        new_h = []
        for b in range(batch):
            row = []
            for j in range(units):
                pre = []
                for k in range(3):
                    mx, sx, mh, sh = gates[k]
                    xk = sat(ref_requantize(_dot(bx[k][j], step[b], wx[k][j]), mx, sx))
                    pre.append((xk, ref_requantize(_dot(bh[k][j], h[b], wh[k][j]), mh, sh)))
                r = ref_activation(sat(pre[0][0] + pre[0][1]), 0, True)
                z = ref_activation(sat(pre[1][0] + pre[1][1]), 0, True)
                reset = ref_requantize(r * sat(pre[2][1]), 1 << 30, -14)
                n = ref_activation(sat(pre[2][0] + reset), 0, False)
                fresh = ref_requantize((32768 - z) * n, state_m, state_s)
                kept = ref_requantize(z * (h[b][j] - zp), 1 << 30, -14)
                row.append(sat(zp + fresh + kept, -128, 127))
            new_h.append(row)
        outputs.append(new_h)
        h = new_h
    return outputs


@st.composite
def layers(draw: st.DrawFn) -> tuple:
    """A call with parameters as the rule prepares them from random float weights and scales."""
    batch, steps = draw(st.integers(1, 2)), draw(st.integers(1, 4))
    features, units = draw(st.integers(1, 6)), draw(st.integers(1, 5))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31)))
    spread = draw(st.floats(0.1, 2.0))
    weights = (
        torch.randn(3 * units, features, generator=gen) * spread,
        torch.randn(3 * units, units, generator=gen) * spread,
        torch.randn(3 * units, generator=gen, dtype=torch.float64),
        torch.randn(3 * units, generator=gen, dtype=torch.float64),
    )
    zp_in, zp_h = draw(st.integers(-128, 127)), draw(st.integers(-100, 100))
    s_in, s_h = 10 ** draw(st.floats(-2.5, -1.0)), 10 ** draw(st.floats(-2.5, -1.0))
    p = op.parameters(weights, (s_in, zp_in), (s_h, zp_h))
    x = torch.randint(-128, 128, (steps, batch, features), generator=gen).to(torch.int8)
    h = None
    if draw(st.booleans()):
        h = torch.randint(-128, 128, (batch, units), generator=gen).to(torch.int8)
    args = (x, h, None, p["input_weights"], p["hidden_weights"], p["input_biases"])
    return (*args, p["hidden_biases"], p["gate_parameters"], 1, *p["state"], zp_h)


@settings(max_examples=250, deadline=None)
@given(args=layers())
def test_reference_equals_the_step_in_python_ints(args: tuple) -> None:
    got = op.gru(*args)
    as_lists = [a.tolist() if isinstance(a, torch.Tensor) else a for a in args]
    del as_lists[8]  # time_major
    del as_lists[2]  # no kept state
    assert got.tolist() == ref_gru(tuple(as_lists))


def test_batch_major_is_time_major_transposed() -> None:
    gen = torch.Generator().manual_seed(1)
    weights = (torch.randn(6, 3, generator=gen), torch.randn(6, 2, generator=gen))
    p = op.parameters((*weights, torch.zeros(6), torch.ones(6)), (0.05, 3), (0.01, -5))
    x = torch.randint(-128, 128, (4, 3, 3), generator=gen).to(torch.int8)
    names = ("input_weights", "hidden_weights", "input_biases", "hidden_biases")
    tensors = [p[k] for k in (*names, "gate_parameters")]
    time_major = op.gru(x, None, None, *tensors, 1, *p["state"], -5)
    batch_major = op.gru(x.transpose(0, 1).contiguous(), None, None, *tensors, 0, *p["state"], -5)
    assert torch.equal(batch_major, time_major.transpose(0, 1))


@settings(max_examples=60, deadline=None)
@given(args=layers(), cut=st.integers(0, 4))
def test_a_kept_state_continues_the_sequence(args: tuple, cut: int) -> None:
    """Two calls on the pieces of a sequence, the state kept between them, give one call's
    outputs on the whole of it; the state ends as its last step."""
    x, initial, _, *rest = args
    units, zero = args[4].shape[1], rest[-1]  # no initial state: the output's zero point
    start = torch.full((x.shape[1], units), zero) if initial is None else initial
    state = start.to(torch.int8).clone()
    whole = op.gru(x, None if initial is None else initial, None, *rest)
    cut = min(cut, x.shape[0])
    pieces = [op.gru(x[a:b], None, state, *rest) for a, b in ((0, cut), (cut, x.shape[0])) if b > a]
    assert torch.equal(torch.cat(pieces), whole)
    assert torch.equal(state, whole[-1])


def test_float_gru_is_pytorchs() -> None:
    """The float op the quantizer calibrates on computes nn.GRU."""
    from cortex_m_nn.core.float_ops import GRU

    torch.manual_seed(2)
    gru = nn.GRU(5, 7, batch_first=True).eval()
    x, h0 = torch.randn(2, 6, 5), torch.randn(1, 2, 7)
    want, _ = gru(x, h0)
    weights = (gru.weight_ih_l0, gru.weight_hh_l0, gru.bias_ih_l0, gru.bias_hh_l0)
    got = GRU(x, h0[0], *weights, True, 0.0, 0.0, 0, 0)
    assert torch.allclose(got, want, atol=1e-6)
