"""Activation range methods (``--calibration-method``): the histogram observers' choices
against independent computations on the raw samples, and whole models compiled with them.

Every error here is measured by quantizing the raw samples with the chosen scale and zero
point (the formula written out below, not the observer's), never by the observer's own
estimate.
"""

from __future__ import annotations

import json

import pytest
import torch
from torch import nn
from torchao.quantization.pt2e.observer import MinMaxObserver
from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e

from cortex_m_nn.check.verify import verify_program
from cortex_m_nn.core.abi import ProgramAbi
from cortex_m_nn.core.options import QuantizationOptions, RangeMethod
from cortex_m_nn.core.target import DEFAULT_TARGET
from cortex_m_nn.frontend.calibration import synthetic
from cortex_m_nn.frontend.model_source import ModelSource
from cortex_m_nn.frontend.models import ds_cnn
from cortex_m_nn.pipeline import compile_model
from cortex_m_nn.quantize import CortexMQuantizer
from cortex_m_nn.quantize.config import EPS
from cortex_m_nn.quantize.observers import BINS, MseObserver, PercentileObserver

from .models import excite, extremes, pools, probability_floor
from .test_cli import TINY_SOURCE, invoke_to
from .test_quantizer import ConvNet

LEVELS = 255  # int8: 256 levels, 255 steps


def _observer(cls=MseObserver, **kwargs):
    return cls(dtype=torch.int8, quant_min=-128, quant_max=127, eps=EPS, **kwargs)


def _observe(observer, values: torch.Tensor, batches: int = 4):
    for batch in values.split(max(1, values.numel() // batches)):
        observer(batch)
    return observer.calculate_qparams()


def _qparams(low: float, high: float) -> tuple[float, int]:
    """int8 asymmetric scale and (integral) zero point covering [low, high] ∪ {0}."""
    low, high = min(low, 0.0), max(high, 0.0)
    scale = max((high - low) / LEVELS, EPS)
    return scale, int(min(max(-128 - round(low / scale), -128), 127))


def _mse(values: torch.Tensor, scale, zero_point) -> float:
    """Mean squared error of quantizing ``values`` to int8 and back."""
    values = values.double()
    scale, zero_point = float(scale), int(zero_point)
    levels = torch.clamp(torch.round(values / scale) + zero_point, -128, 127)
    return float(((levels - zero_point) * scale - values).pow(2).mean())


def _minmax_mse(values: torch.Tensor) -> float:
    return _mse(values, *_qparams(float(values.min()), float(values.max())))


def _identity(x: torch.Tensor) -> torch.Tensor:
    return x


def _grid(
    values: torch.Tensor, lows: list[float], highs: torch.Tensor, function=_identity
) -> tuple[float, ...]:
    """(least MSE, its low, its high) over ``lows`` × ``highs``, on the raw samples, the
    error measured after ``function``."""
    best = (float("inf"), 0.0, 0.0)
    for low in lows:  # each low against every high at once
        scale = ((highs - low) / LEVELS).clamp(min=EPS)[:, None]
        zero_point = (-128 - torch.round(low / scale)).clamp(-128, 127)
        levels = torch.clamp(torch.round(values / scale) + zero_point, -128, 127)
        dequantized = (levels - zero_point) * scale
        errors = (function(dequantized) - function(values)).pow(2).mean(1)
        index = int(errors.argmin())
        best = min(best, (float(errors[index]), low, float(highs[index])))
    return best


def _brute_force(values: torch.Tensor, steps: int = 36, function=_identity) -> float:
    """The least MSE (after ``function``) over candidate ranges measured on the raw samples:
    a grid over [min, 0] × [0, max], then a grid as fine again around its best cell."""
    x = values.double()
    lowest, highest = min(float(x.min()), 0.0), max(float(x.max()), 0.0)
    low_step, high_step = -lowest / (steps - 1), highest / (steps - 1)
    lows = torch.linspace(lowest, 0.0, steps, dtype=torch.float64)
    highs = torch.linspace(0.0, highest, steps).double()
    _, low, high = _grid(x, lows.tolist(), highs, function)
    lows = torch.linspace(max(low - low_step, lowest), min(low + low_step, 0.0), steps)
    highs = torch.linspace(max(high - high_step, 0.0), min(high + high_step, highest), steps)
    return _grid(x, lows.double().tolist(), highs.double(), function)[0]


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_uniform_values_keep_their_full_range() -> None:
    # Uniform on [-1, 3]: clipping any tail costs more than the finer rounding saves.
    values = torch.rand(200_000, generator=_generator(1)) * 4 - 1
    scale, zero_point = _observe(_observer(), values)
    low = (-128 - int(zero_point)) * float(scale)
    high = (127 - int(zero_point)) * float(scale)
    assert low == pytest.approx(-1, abs=0.02) and high == pytest.approx(3, abs=0.02)
    assert _mse(values, scale, zero_point) <= 1.01 * _minmax_mse(values)


def test_rare_outliers_are_clipped_and_the_error_drops() -> None:
    # N(0, 1) with three values near 40σ among a million: keeping them would coarsen the
    # step for everything else more than clipping them costs (their squared distance).
    values = torch.randn(1_000_000, generator=_generator(2))
    values[[10, 8_000, 500_000]] = torch.tensor([40.0, 38.0, -36.0])
    scale, zero_point = _observe(_observer(), values, batches=10)
    high = (127 - int(zero_point)) * float(scale)
    low = (-128 - int(zero_point)) * float(scale)
    assert high < 38 and low > -36, (low, high)  # every outlier clipped
    chosen, minmax = _mse(values, scale, zero_point), _minmax_mse(values)
    assert chosen < 0.5 * minmax, (chosen, minmax)


DISTRIBUTIONS = {
    "gaussian": lambda g: torch.randn(8_000, generator=g),
    "laplace_skewed": lambda g: torch.distributions.Laplace(0.5, 1.0).sample((8_000,)),
    "relu": lambda g: torch.relu(torch.randn(8_000, generator=g) * 2 + 0.3),
    "heavy_tail": lambda g: torch.randn(8_000, generator=g) ** 3,
}


@pytest.mark.parametrize("name", sorted(DISTRIBUTIONS))
def test_choice_is_near_the_brute_force_optimum(name: str) -> None:
    torch.manual_seed(3)  # Laplace samples from the global generator
    values = DISTRIBUTIONS[name](_generator(3))
    scale, zero_point = _observe(_observer(), values)
    chosen, best = _mse(values, scale, zero_point), _brute_force(values)
    print(f"{name}: chosen {chosen:.4g} brute force {best:.4g}")
    assert chosen <= 1.02 * best, (chosen, best)
    assert chosen <= _minmax_mse(values) * 1.0001


#: name → (aten overload, its constant arguments and keywords, the same function written
#: with torch.nn.functional: the independent computation)
FUNCTIONS = {
    "hardswish": ("aten.hardswish.default", (), (), nn.functional.hardswish),
    "hardsigmoid": ("aten.hardsigmoid.default", (), (), nn.functional.hardsigmoid),
    "sigmoid": ("aten.sigmoid.default", (), (), torch.sigmoid),
    "leaky_relu": (
        "aten.leaky_relu.default",
        (0.1,),
        (),
        lambda x: nn.functional.leaky_relu(x, 0.1),
    ),
    "gelu_tanh": (
        "aten.gelu.default",
        (),
        (("approximate", "tanh"),),
        lambda x: nn.functional.gelu(x, approximate="tanh"),
    ),
}


def _through_mse(values: torch.Tensor, scale, zero_point, function) -> float:
    """Mean squared error after ``function`` of quantizing ``values`` to int8 and back."""
    values = values.double()
    scale, zero_point = float(scale), int(zero_point)
    levels = torch.clamp(torch.round(values / scale) + zero_point, -128, 127)
    return float((function((levels - zero_point) * scale) - function(values)).pow(2).mean())


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_range_through_a_function_is_near_its_brute_force_optimum(name: str) -> None:
    """Every consumer applies ``function``: the range chosen through it errs, after the
    function, within 2 % of the best range a grid search finds on the raw samples, and no
    more than the range chosen for the tensor's own error."""
    through, arguments, keywords, function = FUNCTIONS[name]
    values = torch.randn(8_000, generator=_generator(11)) * 3 + 0.5
    observer = _observer(through=through, arguments=arguments, keywords=keywords)
    scale, zero_point = _observe(observer, values)
    chosen = _through_mse(values, scale, zero_point, function)
    own = _through_mse(values, *_observe(_observer(), values), function)
    best = _brute_force(values, function=function)
    print(f"{name}: chosen {chosen:.4g}, brute force {best:.4g}, own range {own:.4g}")
    assert chosen <= 1.02 * best, (chosen, best)
    assert chosen <= own * 1.0001, (chosen, own)


def test_saturated_values_are_clipped_for_free() -> None:
    """hardsigmoid is constant beyond ±3 and hardswish is 0 below -3: clipping there costs
    nothing after the function, so the range stops there (within 4 of its 255 steps, where
    the error barely varies: the observed values reach ±16) and the error after the function
    falls well below that of the tensor's own best range."""
    values = torch.randn(20_000, generator=_generator(12)) * 4
    for name, low_end, high_end in (("hardsigmoid", -3.0, 3.0), ("hardswish", -3.0, None)):
        through, arguments, keywords, function = FUNCTIONS[name]
        observer = _observer(through=through, arguments=arguments, keywords=keywords)
        scale, zero_point = _observe(observer, values)
        low = (-128 - int(zero_point)) * float(scale)
        high = (127 - int(zero_point)) * float(scale)
        assert low >= low_end - 4 * float(scale), (name, low)
        if high_end is not None:
            assert high <= high_end + 4 * float(scale), (name, high)
        chosen = _through_mse(values, scale, zero_point, function)
        own = _through_mse(values, *_observe(_observer(), values), function)
        assert chosen < 0.7 * own, (name, chosen, own)


def test_growing_batches_are_rebinned_exactly() -> None:
    """Batches of ever wider ranges: every bin holds exactly the values between its edges."""
    generator = _generator(4)
    batches = [torch.randn(5_000, generator=generator) * 2**k + k for k in range(6)]
    observer = _observer()
    for batch in batches:
        observer(batch)
    values = torch.cat(batches).double()
    lower, width = float(observer.lower), float(observer.width)
    assert lower <= float(values.min()) and lower + BINS * width >= float(values.max())
    edges = lower + width * torch.arange(BINS + 1, dtype=torch.float64)
    expected = torch.histogram(values, edges).hist
    torch.testing.assert_close(observer.histogram, expected, rtol=0, atol=0)


def test_a_range_growing_over_many_batches_keeps_its_resolution() -> None:
    """Batch after batch (one image each, say), the extremes creep outwards a little at a
    time, below as above: the bins still span at most twice the observed values (integer
    re-binning may double the width), so more than BINS / 2 bins lie across them."""
    generator = _generator(13)
    observer = _observer()
    widenings = 0
    for k in range(300):
        width = float(observer.width)
        observer(torch.randn(256, generator=generator) * (1 + k / 100) - k / 100)
        widenings += float(observer.width) != width
    spread = float(observer.max_val) - float(observer.min_val)
    assert widenings >= 1  # the data did widen the bins
    assert BINS * float(observer.width) <= 2 * spread, (float(observer.width), spread)


def test_relu_values_start_at_zero_and_zeros_are_exact() -> None:
    values = torch.relu(torch.randn(50_000, generator=_generator(5)))
    scale, zero_point = _observe(_observer(), values)
    assert int(zero_point) == -128  # range [0, high]: 0 is level -128, no level wasted
    assert float(scale) > 0


@pytest.mark.parametrize("constant", [0.0, 2.5, -0.75])
def test_constant_tensor_gets_a_valid_scale(constant: float) -> None:
    values = torch.full((64,), constant)
    scale, zero_point = _observe(_observer(), values)
    assert float(scale) >= EPS and -128 <= int(zero_point) <= 127
    dequantized = torch.clamp(torch.round(values / scale) + zero_point, -128, 127) - zero_point
    assert (dequantized * scale - values).abs().max() <= float(scale) / 2 + 1e-7


def test_same_values_give_the_same_qparams() -> None:
    values = torch.randn(30_000, generator=_generator(6)) ** 3
    first, second = _observe(_observer(), values), _observe(_observer(), values.clone())
    assert torch.equal(first[0], second[0]) and torch.equal(first[1], second[1])


def test_non_finite_values_are_left_out_of_the_range() -> None:
    """±inf saturates whatever the range is, so it does not stretch it: the range is the
    finite values' own."""
    finite = torch.linspace(-1.0, 2.0, 101)
    with_inf = _observer()
    with_inf(torch.cat([finite, torch.tensor([float("inf"), float("-inf"), float("nan")])]))
    alone = _observer()
    alone(finite)
    assert with_inf.calculate_qparams() == alone.calculate_qparams()


def test_percentile_clips_the_tails_it_names() -> None:
    values = torch.randn(200_000, generator=_generator(7))
    scale, zero_point = _observe(_observer(PercentileObserver, percentile=99.0), values)
    low = (-128 - int(zero_point)) * float(scale)
    high = (127 - int(zero_point)) * float(scale)
    sorted_values = values.double().sort().values
    expected_low = float(sorted_values[int(0.01 * values.numel())])
    expected_high = float(sorted_values[int(0.99 * values.numel())])
    # within a bin and the zero point's rounding
    tolerance = 2 * float(scale)
    assert low == pytest.approx(expected_low, abs=tolerance)
    assert high == pytest.approx(expected_high, abs=tolerance)


def _activation_observers(module: nn.Module, example: tuple, method: RangeMethod) -> list:
    exported = torch.export.export(module, example).module()
    options = QuantizationOptions(ranges=method)
    prepared = prepare_pt2e(exported, CortexMQuantizer(options))
    return [m for m in prepared.modules() if type(m).__name__.endswith("Observer")]


def test_quantizer_uses_the_chosen_method_with_the_same_sharing() -> None:
    torch.manual_seed(0)
    module, example = ConvNet().eval(), (torch.randn(1, 3, 8, 8),)
    minmax = _activation_observers(module, example, RangeMethod.MINMAX)
    mse = _activation_observers(module, example, RangeMethod.MSE)
    kinds = [type(m) for m in mse]
    # The same observers (so the same shared edges), activations' now MseObserver; the
    # linear's per-tensor weight keeps min/max, softmax's output keeps its fixed qparams.
    assert len(mse) == len(minmax)
    assert kinds.count(MseObserver) == [type(m) for m in minmax].count(MinMaxObserver) - 1
    assert kinds.count(MinMaxObserver) == 1


def test_quantizer_measures_through_the_one_function_every_consumer_applies() -> None:
    """Excite: the scaled conv output only hardswish reads, and the scaled excitation only
    hardsigmoid reads, get ranges measured through them; the conv output gelu and add both
    read, the fused relu and every other tensor keep their own error; the sharing is the
    same as with min/max ranges."""
    module, example = excite()
    mse = _activation_observers(module, example, RangeMethod.MSE)
    through = sorted(m.through for m in mse if isinstance(m, MseObserver) and m.through)
    assert through == ["aten.hardsigmoid.default", "aten.hardswish.default"]
    assert len(mse) == len(_activation_observers(module, example, RangeMethod.MINMAX))


def _compile(module: nn.Module, inputs: tuple, method: RangeMethod):
    source = ModelSource(type(module).__name__, module.eval(), tuple(inputs))
    return compile_model(
        source,
        ProgramAbi.for_target(DEFAULT_TARGET),
        synthetic(source.example_inputs, count=8),
        progress=False,
        options=QuantizationOptions(ranges=method),
        serialise=False,  # on first use of .pte
    )


def _lowered_state(compiled) -> tuple[str, dict[str, torch.Tensor]]:
    """What the .pte is made from: the lowered graph's code and every constant it reads."""
    graph = compiled.lowered
    constants = {
        node.target: getattr(graph, node.target)
        for node in graph.graph.nodes
        if node.op == "get_attr"
    }
    return graph.code, constants


CASES = [(f, RangeMethod.MSE) for f in (ds_cnn, pools, extremes, probability_floor, excite)]
CASES += [(f, RangeMethod.PERCENTILE) for f in (pools, probability_floor)]


@pytest.mark.parametrize(
    ("factory", "method"), CASES, ids=[f"{f.__name__}-{m.value}" for f, m in CASES]
)
def test_models_verify_and_compile_deterministically(factory, method: RangeMethod) -> None:
    compiled, again = _compile(*factory(), method), _compile(*factory(), method)
    verification = verify_program(compiled)
    assert verification.passed, verification.per_node
    (code, constants), (code_again, constants_again) = map(_lowered_state, (compiled, again))
    assert code == code_again and constants.keys() == constants_again.keys()
    assert all(torch.equal(constants[k], constants_again[k]) for k in constants)
    if factory is ds_cnn:  # and the bytes of the program, once
        assert compiled.pte == again.pte


def test_cli_method_is_verified_and_recorded(tmp_path) -> None:
    model = tmp_path / "tiny.py"
    model.write_text(TINY_SOURCE)
    programs = {}
    for method in ("minmax", "mse"):
        result, pte, report = invoke_to(
            tmp_path, method, f"{model}:make", "--verify", "--calibration-method", method
        )
        assert result.status == 0, result.err
        assert "PASS" in result.out
        assert json.loads(report.read_text())["calibration"]["options"]["ranges"] == method
        programs[method] = pte.read_bytes()
    assert programs["mse"] != programs["minmax"], "the method was ignored"
