"""cortex_m_nn::gru on the host runtime (CMSIS-NN's LSTM building blocks composed into a GRU)
against its reference: batch- and time-major sequences, without a state, from an initial
state or from a kept one (whose state the call leaves is compared too), parameters prepared
from random float layers."""

from __future__ import annotations

import torch
from hypothesis import given
from hypothesis import strategies as st

from cortex_m_nn.check.host_kernels import KernelAbi
from cortex_m_nn.ops import gru as op

from .harness import Call, check_calls
from .strategies import KERNEL_SETTINGS, draw_calls, generator


@st.composite
def gru_calls(draw: st.DrawFn) -> Call:
    gen = generator(draw)
    batch, steps = draw(st.integers(1, 3)), draw(st.integers(1, 6))
    features, units = draw(st.integers(1, 20)), draw(st.integers(1, 20))
    spread = draw(st.floats(0.05, 1.5))
    weights = (
        torch.randn(3 * units, features, generator=gen) * spread,
        torch.randn(3 * units, units, generator=gen) * spread,
        torch.randn(3 * units, generator=gen, dtype=torch.float64),
        torch.randn(3 * units, generator=gen, dtype=torch.float64),
    )
    zp_in, zp_h = draw(st.integers(-128, 127)), draw(st.integers(-128, 127))
    s_in = 10 ** draw(st.floats(-2.5, -0.5))
    s_h = 10 ** draw(st.floats(-2.5, -1.0))
    p = op.parameters(weights, (s_in, zp_in), (s_h, zp_h))
    time_major = draw(st.booleans())
    shape = (steps, batch, features) if time_major else (batch, steps, features)
    x = torch.randint(-128, 128, shape, generator=gen).to(torch.int8)
    hidden = state = None
    given = draw(st.sampled_from(["none", "initial", "kept"]))
    if given != "none":  # an initial state, or a kept one (read, then written: nn.Streaming)
        start = torch.randint(-128, 128, (batch, units), generator=gen).to(torch.int8)
        hidden, state = (start, None) if given == "initial" else (None, start)
    args = (x, hidden, state, p["input_weights"], p["hidden_weights"], p["input_biases"])
    args += (p["hidden_biases"], p["gate_parameters"], int(time_major), *p["state"], zp_h)
    # a kept state is passed at run time, as a copy the kernel writes (a constant would be a
    # buffer of the program, planned without its values); the program returns it
    kept = (2,) if state is not None else ()
    return Call("gru", (*args, op.scratch_bytes(units)), (0, *kept), kept)


@KERNEL_SETTINGS
@given(data=st.data())
def test_gru_bit_exact(kernels: KernelAbi, data: st.DataObject) -> None:
    check_calls(draw_calls(data, gru_calls()), kernels)
