"""cortex_m_nn::avg_pool2d on the host runtime (arm_avgpool_s8) against its reference."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cortex_m_nn import scratch
from cortex_m_nn.host_kernels import KernelAbi
from cortex_m_nn.ops.conv2d import output_size

from .harness import Call, check_calls
from .strategies import KERNEL_SETTINGS, activation_range, generator, host_target, int8


def avg_pool2d_calls(isa: str) -> st.SearchStrategy[Call]:
    @st.composite
    def calls(draw: st.DrawFn) -> Call:
        kh, kw = draw(st.integers(1, 5)), draw(st.integers(1, 5))
        stride = [draw(st.integers(1, 3)), draw(st.integers(1, 3))]
        padding = [draw(st.integers(0, kh // 2)), draw(st.integers(0, kw // 2))]
        h = draw(st.integers(max(1, kh - 2 * padding[0]), kh + 10))
        w = draw(st.integers(max(1, kw - 2 * padding[1]), kw + 10))
        n, c = draw(st.integers(1, 2)), draw(st.integers(1, 20))
        oh = output_size(h, kh, stride[0], padding[0], 1)
        ow = output_size(w, kw, stride[1], padding[1], 1)
        need = scratch.avg_pool2d_scratch_bytes(host_target(isa), (n, h, w, c), (n, oh, ow, c))
        gen = generator(draw)
        args = (int8((n, h, w, c), gen), [kh, kw], stride, padding, *activation_range(draw), need)
        return Call("avg_pool2d", args)

    return calls()


@KERNEL_SETTINGS
@given(data=st.data())
def test_avg_pool2d_bit_exact(kernels: KernelAbi, data: st.DataObject) -> None:
    calls = data.draw(st.lists(avg_pool2d_calls(kernels.isa), min_size=25, max_size=25))
    check_calls(calls, kernels)
