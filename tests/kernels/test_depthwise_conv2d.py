"""cortex_m_nn::depthwise_conv2d on the host runtime (arm_depthwise_conv_wrapper_s8)."""

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


def depthwise_calls(isa: str) -> st.SearchStrategy[Call]:
    @st.composite
    def calls(draw: st.DrawFn) -> Call:
        g = conv_geometry(draw)
        gen = generator(draw)
        n, c_in, mult = draw(st.integers(1, 2)), draw(st.integers(1, 12)), draw(st.integers(1, 3))
        c_out = c_in * mult
        (kh, kw), (h, w) = g["kernel"], g["size"]
        oh = output_size(h, kh, g["stride"][0], g["padding"][0], g["dilation"][0])
        ow = output_size(w, kw, g["stride"][1], g["padding"][1], g["dilation"][1])
        bias, multipliers, shifts = per_channel(draw, c_out, gen)
        act_min, act_max = activation_range(draw)
        need = scratch.depthwise_conv2d_scratch_bytes(
            host_target(isa),
            (n, h, w, c_in),
            (1, kh, kw, c_out),
            (n, oh, ow, c_out),
            g["stride"],
            g["padding"],
            g["dilation"],
            mult,
        )
        args = (
            int8((n, h, w, c_in), gen),
            int8((1, kh, kw, c_out), gen, low=-127),
            bias,
            multipliers,
            shifts,
            g["stride"],
            g["padding"],
            g["dilation"],
            mult,
            draw(st.integers(-127, 128)),
            draw(st.integers(-128, 127)),
            act_min,
            act_max,
            need,
        )
        return Call("depthwise_conv2d", args)

    return calls()


@KERNEL_SETTINGS
@given(data=st.data())
def test_depthwise_conv2d_bit_exact(kernels: KernelAbi, data: st.DataObject) -> None:
    calls = data.draw(st.lists(depthwise_calls(kernels.isa), min_size=25, max_size=25))
    check_calls(calls, kernels)
