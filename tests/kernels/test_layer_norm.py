"""cortex_m_nn::layer_norm on the host runtime (our integer kernel) against its reference."""

from __future__ import annotations

import math

import torch
from hypothesis import given
from hypothesis import strategies as st

from cortex_m_nn.check.host_kernels import KernelAbi
from cortex_m_nn.ops.layer_norm import channel_parameters, epsilon_parameter

from .harness import Call, check_calls
from .strategies import KERNEL_SETTINGS, activation_range, generator, int8


@st.composite
def layer_norm_calls(draw: st.DrawFn) -> Call:
    """Layer norms ([outer, 1, C]) and group norms ([N, H·W, C]), constant groups included."""
    gen = generator(draw)
    groups = draw(st.integers(1, 4))
    channels = groups * draw(st.integers(1, 12))
    spatial = draw(st.sampled_from([1, 1, draw(st.integers(1, 30))]))
    outer = draw(st.integers(1, 4))
    shape = (outer, spatial, channels)
    x = int8(shape, gen, low=draw(st.integers(-128, 127)))
    if draw(st.booleans()):  # a narrow spread: small variances, where eps matters
        x = (x // draw(st.sampled_from([16, 64, 128]))).to(torch.int8)
    gamma = torch.randn(channels, generator=gen, dtype=torch.float64) * draw(st.floats(0.0, 3.0))
    beta = torch.randn(channels, generator=gen, dtype=torch.float64)
    output_scale = 10 ** draw(st.floats(-2.5, -0.5))
    m, t, b = channel_parameters(gamma, beta, output_scale, draw(st.integers(-128, 127)))
    n = spatial * channels // groups
    eps = epsilon_parameter(10 ** draw(st.floats(-8, 1)), 10 ** draw(st.floats(-3, 0)), n)
    low, high = activation_range(draw)
    view = x.reshape(draw(st.sampled_from([shape, (math.prod(shape),)])))
    return Call("layer_norm", (view, m, t, b, spatial, groups, eps, low, high))


@KERNEL_SETTINGS
@given(st.lists(layer_norm_calls(), min_size=25, max_size=25))
def test_layer_norm_bit_exact(kernels: KernelAbi, calls: list[Call]) -> None:
    check_calls(calls, kernels)
