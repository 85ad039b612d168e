"""cortex_m_nn::lstm on the host runtime (arm_lstm_unidirectional_s8; the int16 case
arm_lstm_unidirectional_s16) against its reference: batch- and time-major sequences, without
a state, from an initial state or from a kept one (whose hidden and cell states the call
leaves are compared too), parameters prepared from random float layers."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from cortex_m_nn.check.host_kernels import KernelAbi
from cortex_m_nn.ops import lstm as op

from .harness import Call, check_calls
from .strategies import KERNEL_SETTINGS, draw_calls, generator


def lstm_calls(int16: bool) -> st.SearchStrategy[Call]:
    @st.composite
    def calls(draw: st.DrawFn) -> Call:
        gen = generator(draw)
        batch, steps = draw(st.integers(1, 3)), draw(st.integers(1, 6))
        features, units = draw(st.integers(1, 20)), draw(st.integers(1, 20))
        spread = draw(st.floats(0.05, 1.5))
        weights = (
            torch.randn(4 * units, features, generator=gen) * spread,
            torch.randn(4 * units, units, generator=gen) * spread,
            torch.randn(4 * units, generator=gen, dtype=torch.float64),
        )
        if int16:
            zp_in = zp_h = 0
        else:
            zp_in, zp_h = draw(st.integers(-128, 127)), draw(st.integers(-128, 127))
        s_in = 10 ** draw(st.floats(-2.5, -0.5)) / (256 if int16 else 1)
        s_h = 10 ** draw(st.floats(-2.5, -1.0)) / (256 if int16 else 1)
        power = draw(st.integers(-15, -5))
        p = op.parameters(weights, (s_in, zp_in), (s_h, zp_h), power, int16)
        dtype, bound = (torch.int16, 32768) if int16 else (torch.int8, 128)
        time_major = draw(st.booleans())
        shape = (steps, batch, features) if time_major else (batch, steps, features)
        x = torch.randint(-bound, bound, shape, generator=gen).to(dtype)
        hidden = cell = state = cell_state = None
        given = draw(st.sampled_from(["none", "initial", "kept"]))
        if given != "none":  # an initial state, or a kept one (read, then written: nn.Streaming)
            h = torch.randint(-bound, bound, (batch, units), generator=gen).to(dtype)
            c = torch.randint(-32768, 32768, (batch, units), generator=gen).to(torch.int16)
            hidden, cell, state, cell_state = (h, c, None, None) if given == "initial" else (
                None, None, h, c)  # fmt: skip
        args = (x, hidden, cell, state, cell_state, p["input_weights"], p["hidden_weights"])
        args += (p["input_biases"],)
        args += (p["hidden_biases"], p["gate_parameters"], int(time_major), power)
        args += (draw(st.sampled_from([0, 0, draw(st.integers(1, 32767))])),)
        args += (*p["forget"], *p["update"], *p["output"], zp_h)
        args += (op.scratch_bytes(batch, units, dtype),)
        # a kept state is passed at run time, as copies the kernel writes (constants would be
        # buffers of the program, planned without their values); the program returns them
        kept = (3, 4) if state is not None else ()
        return Call("lstm", args, (0, *kept), kept)

    return calls()


@pytest.mark.parametrize("int16", [False, True], ids=["s8", "s16"])
@KERNEL_SETTINGS
@given(data=st.data())
def test_lstm_bit_exact(kernels: KernelAbi, int16: bool, data: st.DataObject) -> None:
    check_calls(draw_calls(data, lstm_calls(int16)), kernels)
