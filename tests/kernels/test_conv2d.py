"""cortex_m_nn::conv2d on the host runtime (arm_convolve_wrapper_s8) against its reference."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cortex_m_nn import scratch
from cortex_m_nn.host_kernels import KernelAbi
from cortex_m_nn.ops.conv2d import output_size

from .harness import Call, check_calls
from .strategies import (
    KERNEL_SETTINGS,
    activation_range,
    conv_geometry,
    generator,
    host_target,
    int8,
    per_channel,
)


def conv2d_calls(isa: str) -> st.SearchStrategy[Call]:
    @st.composite
    def calls(draw: st.DrawFn) -> Call:
        g = conv_geometry(draw)
        gen = generator(draw)
        n, c_in, c_out = draw(st.integers(1, 2)), draw(st.integers(1, 12)), draw(st.integers(1, 10))
        (kh, kw), (h, w) = g["kernel"], g["size"]
        oh = output_size(h, kh, g["stride"][0], g["padding"][0], g["dilation"][0])
        ow = output_size(w, kw, g["stride"][1], g["padding"][1], g["dilation"][1])
        bias, multipliers, shifts = per_channel(draw, c_out, gen)
        act_min, act_max = activation_range(draw)
        need = scratch.conv2d_scratch_bytes(
            host_target(isa),
            (n, h, w, c_in),
            (c_out, kh, kw, c_in),
            (n, oh, ow, c_out),
            g["stride"],
            g["padding"],
            g["dilation"],
        )
        args = (
            int8((n, h, w, c_in), gen),
            int8((c_out, kh, kw, c_in), gen, low=-127),
            bias,
            multipliers,
            shifts,
            g["stride"],
            g["padding"],
            g["dilation"],
            draw(st.integers(-127, 128)),
            draw(st.integers(-128, 127)),
            act_min,
            act_max,
            need,
        )
        return Call("conv2d", args)

    return calls()


@KERNEL_SETTINGS
@given(data=st.data())
def test_conv2d_bit_exact(kernels: KernelAbi, data: st.DataObject) -> None:
    calls = data.draw(st.lists(conv2d_calls(kernels.isa), min_size=25, max_size=25))
    check_calls(calls, kernels)
