"""``cortex_m_nn.nn.SVDF``: the float layer against an independent transcription of TFLite's
SVDF step, its gradients, and its lowering onto ``cortex_m_nn::svdf`` (no fallback, per
operator within 1 LSB of the PT2E reference over a sequence of frames), the states in the
memory plan, and what is refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from cortex_m_nn.check.harness import check_dialect
from cortex_m_nn.check.vector import c_header
from cortex_m_nn.core.errors import CompileError
from cortex_m_nn.core.target import Target
from cortex_m_nn.frontend.calibration import synthetic
from cortex_m_nn.frontend.model_source import ModelSource
from cortex_m_nn.frontend.states import fresh, reset_states, state_buffers
from cortex_m_nn.lower.macs import fp32_macs
from cortex_m_nn.nn import SVDF, svdf_memory, svdf_time
from cortex_m_nn.pipeline import compile_model


def tflite_steps(layer: SVDF, frames: np.ndarray) -> np.ndarray:
    """TFLite's SVDF (reference/svdf.h, float): per frame, per batch item and filter, the
    state row shifted left, the feature dot product appended, the time dot product; units
    sum their ``rank`` filters and add the bias. Plain loops over float64 numbers."""
    wf = layer.weights_feature.detach().double().numpy()
    wt = layer.weights_time.detach().double().numpy()
    bias = None if layer.bias is None else layer.bias.detach().double().numpy()
    filters, memory = wt.shape
    batch = frames.shape[0]
    state = [[[0.0] * memory for _ in range(filters)] for _ in range(batch)]
    outputs = []
    for t in range(frames.shape[1]):
        step = np.zeros((batch, filters // layer.rank))
        for b in range(batch):
            for f in range(filters):
                row = state[b][f][1:] + [float(np.dot(frames[b, t], wf[f]))]
                state[b][f] = row
                step[b, f // layer.rank] += sum(s * w for s, w in zip(row, wt[f], strict=True))
            if bias is not None:
                step[b] += bias
        outputs.append(step)
    return np.stack(outputs, axis=1)


@pytest.mark.parametrize("rank, bias, batch", [(1, True, 1), (2, False, 1), (3, True, 2)])
def test_float_layer_is_tflite_svdf(rank: int, bias: bool, batch: int) -> None:
    torch.manual_seed(1)
    layer = SVDF(5, 3, memory_size=4, rank=rank, bias=bias, batch_size=batch).double()
    if bias:
        nn.init.uniform_(layer.bias, -1, 1)
    frames = torch.randn(batch, 7, 5, dtype=torch.float64)
    want = tflite_steps(layer, frames.numpy())
    stepped = torch.stack([layer(frames[:, t]) for t in range(7)], dim=1)
    np.testing.assert_allclose(stepped.detach().numpy(), want, rtol=1e-12, atol=1e-12)
    layer.reset_state()
    np.testing.assert_allclose(layer(frames).detach().numpy(), want, rtol=1e-12, atol=1e-12)
    assert torch.equal(layer.state[..., -1], (frames[:, -1] @ layer.weights_feature.T).detach())


def test_gradients_are_exact() -> None:
    """The custom operators' backward against finite differences (torch.autograd.gradcheck)."""
    gen = torch.Generator().manual_seed(2)
    x, state = torch.randn(2, 3, generator=gen), torch.randn(2, 4, 5, generator=gen)
    wf, wt, bias = torch.randn(4, 3, generator=gen), torch.randn(4, 5), torch.randn(2)
    inputs = [t.double().requires_grad_() for t in (x, state, wf, wt, bias)]
    assert torch.autograd.gradcheck(lambda a, s, w: svdf_memory(a, s, w, 16), inputs[:3])
    assert torch.autograd.gradcheck(lambda s, w, b: svdf_time(s, w, b, 2), inputs[1:2] + inputs[3:])


def test_trains_through_the_state() -> None:
    """On sequences the loss falls: the gradient reaches old frames through the state."""
    torch.manual_seed(0)
    layer = SVDF(4, 2, memory_size=6, rank=2)
    frames = torch.randn(1, 12, 4)
    target = torch.roll(frames[..., :2], 3, dims=1)  # the input of three frames ago
    optimizer = torch.optim.Adam(layer.parameters(), lr=0.05)
    losses = []
    for _ in range(60):
        layer.reset_state()
        loss = ((layer(frames) - target) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss))
    assert losses[-1] < 0.5 * losses[0]


class Stream(nn.Module):
    """SVDF → relu → linear, one frame per call."""

    def __init__(self, bits: int = 16, rank: int = 2, bias: bool = True, batch: int = 1) -> None:
        super().__init__()
        self.svdf = SVDF(10, 4, 6, rank=rank, bias=bias, batch_size=batch, state_bits=bits)
        self.fc = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.relu(self.svdf(x)))


def _stream(seed: int = 0, **options: object) -> tuple[nn.Module, tuple[torch.Tensor]]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        module = Stream(**options).eval()
        return module, (torch.randn(module.svdf.state.shape[0], 10),)


CASES = {
    "int16-state": {},
    "int8-state": {"bits": 8},
    "rank-1-no-bias": {"rank": 1, "bias": False},
    "batch-2": {"batch": 2},
}


@pytest.mark.parametrize("target", ["cortex-m55", "cortex-m33", "cortex-m0plus"])
@pytest.mark.parametrize("case", CASES)
def test_lowers_without_fallback_and_verifies(case: str, target: str) -> None:
    module, inputs = _stream(**CASES[case])
    after = {"cortex_m_nn.svdf": 1, "cortex_m_nn.linear": 1}
    compiled, verification = check_dialect(module, inputs, target=Target.parse(target), after=after)
    assert not [r for r in compiled.records if not r.lowered]
    assert verification.max_lsb <= 1
    (state,) = [t for t in compiled.memory.tensors if t.kind == "state"]
    bytes_per = 1 if CASES[case].get("bits") == 8 else 2
    assert state.nbytes == module.svdf.state.numel() * bytes_per
    assert (state.first, state.last) == (0, len(compiled.memory.operators) - 1)
    assert not compiled.memory.conflicts()
    (row,) = [r for r in compiled.records if r.kernel == "cortex_m_nn::svdf"]
    batch, filters, memory = module.svdf.state.shape
    assert row.macs == batch * filters * (10 + memory)  # projection, then time filter


def test_float_macs_are_the_kernels() -> None:
    """A fallback's two float operators count what the lowered operator counts."""
    x, state = (2, 40), (2, 64, 8)
    memory = fp32_macs("svdf_memory", [x, state, (64, 40)], state)
    time = fp32_macs("svdf_time", [state, (64, 8)], (2, 32))
    assert (memory, time) == (2 * 64 * 40, 2 * 64 * 8)


def test_states_stay_zero_in_the_compiled_graphs() -> None:
    """Verifying runs copies: the graphs the .pte is written from keep zero states."""
    module, inputs = _stream()
    compiled, _ = check_dialect(module, inputs)
    assert all(not b.any() for b in state_buffers(compiled.lowered))
    graph = fresh(compiled.lowered)
    assert graph is not compiled.lowered and state_buffers(graph)
    reset_states(module)
    assert not module.svdf.state.any()


def _compile(module: nn.Module, inputs: tuple[torch.Tensor, ...]) -> None:
    source = ModelSource("m", module, inputs)
    compile_model(source, Target.parse("cortex-m55"), synthetic(inputs, count=4), progress=False)


def test_refuses_time_sums_that_could_wrap() -> None:
    """An int16 state with 400 taps of 10-bit weights (Σ|w| ≈ 10^5, × 2^15 ≥ 2^31) could
    wrap CMSIS-NN's sums."""
    torch.manual_seed(0)
    module = nn.Sequential(SVDF(8, 2, memory_size=400)).eval()
    with pytest.raises(CompileError, match=r"time-filter sums .* shorten the SVDF"):
        _compile(module, (torch.randn(1, 8),))


class Twice(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.svdf = SVDF(6, 2, memory_size=3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.svdf(self.svdf(x).repeat(1, 3))


def test_refuses_a_layer_called_twice_per_forward() -> None:
    with pytest.raises(
        CompileError, match="SVDF state svdf.state more than one step on.*one frame"
    ):
        _compile(Twice().eval(), (torch.randn(1, 6),))


def test_refuses_a_sequence_in_one_forward() -> None:
    """A sequence [B, T, I] trains, but a compiled forward takes one frame."""
    torch.manual_seed(0)
    module = nn.Sequential(SVDF(6, 2, memory_size=3)).eval()
    with pytest.raises(CompileError, match="more than one step on; rewrite: call the SVDF"):
        _compile(module, (torch.randn(1, 5, 6),))


def test_test_vector_carries_the_second_inference() -> None:
    header = c_header([torch.zeros(2)], [torch.ones(3)], [torch.full((3,), 2.0)])
    assert "#define CORTEX_M_NN_TEST_NEXT_OUTPUTS 1" in header
    assert "cortex_m_nn_test_next_output_0[3]" in header
    assert "NEXT_OUTPUTS" not in c_header([torch.zeros(2)], [torch.ones(3)])


class WithFallback(nn.Module):
    """An SVDF layer and an operator the compiler keeps in float (cumsum)."""

    def __init__(self) -> None:
        super().__init__()
        self.svdf = SVDF(6, 4, memory_size=3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumsum(self.svdf(x), dim=1)


def test_states_need_a_fully_lowered_program() -> None:
    """With a float fallback the program would go through ExecuTorch's own passes, which do
    not plan the states with their initial value: refused in one line."""
    module, x = WithFallback().eval(), torch.randn(1, 6)
    source = ModelSource("m", module, (x,))
    compiled = compile_model(
        source, Target.parse("cortex-m55"), synthetic((x,), count=4), progress=False,
        allow_fallback=True, serialise=False,
    )  # fmt: skip
    assert [r.source_op for r in compiled.records if not r.lowered] == ["aten.cumsum"]
    with pytest.raises(CompileError, match="keeps SVDF states, which only a fully lowered"):
        compiled.pte  # noqa: B018
