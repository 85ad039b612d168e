"""Element-wise functions without a CMSIS-NN s8 kernel lower to ``cortex_m_nn::lut``: NCHW
models compile with no fallback for every core class and verify against PT2E; each table is
the PT2E reference's own int8 mapping over all 256 inputs."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.fx import GraphModule, Node

from cortex_m_nn.check.harness import check_dialect, count_operators
from cortex_m_nn.core.families import DEQUANTIZE
from cortex_m_nn.core.options import QuantizationOptions, RangeMethod
from cortex_m_nn.core.target import Target
from cortex_m_nn.pipeline import CompiledProgram

from .activation_models import (
    ACTIVATIONS,
    ChainedTables,
    ClampAfterPoolAndView,
    ConvActivation,
    DoubleRelu,
    EveryActivation,
    Function,
    GeluMlp,
    InputRelu,
    ResidualRelu6,
    TanhThenClamp,
    seeded,
)
from .models import conv_stack

decomposed = torch.ops.quantized_decomposed
LUT = torch.ops.cortex_m_nn.lut.default


def luts(compiled: CompiledProgram) -> list[Node]:
    return [n for n in compiled.lowered.graph.nodes if n.target is LUT]


def table_of(compiled: CompiledProgram, node: Node) -> torch.Tensor:
    return getattr(compiled.lowered, node.args[1].target)


def pt2e_node(compiled: CompiledProgram, name: str) -> Node:
    return next(n for n in compiled.stages.quantized.graph.nodes if n.name == name)


def pt2e_table(quantized: GraphModule, quantize: Node, channels: int = 1) -> torch.Tensor:
    """The int8 → int8 map the PT2E graph computes from the dequantize before the element-wise
    op(s) to ``quantize``, evaluated on all 256 inputs by running those nodes themselves (per
    channel: on ``[1, channels, 256]``, a PReLU's slopes read from the module)."""
    chain = []
    node = quantize.args[0]
    while node.target not in DEQUANTIZE:
        chain.append(node)
        node = node.args[0]
    values = torch.arange(-128, 128, dtype=torch.int8)
    if channels > 1:
        values = values.expand(1, channels, 256).contiguous()
    x = decomposed.dequantize_per_tensor(values, *node.args[1:])

    def constant(a: object) -> object:
        return quantized.get_parameter(a.target) if isinstance(a, Node) else a

    for op in reversed(chain):
        if op.target is torch.ops.aten.mul.Tensor:  # x * x: both operands the input
            x = x * x
            continue
        x = op.target(x, *map(constant, op.args[1:]), **op.kwargs)
    return decomposed.quantize_per_tensor(x, *quantize.args[1:]).reshape(-1, 256).squeeze(0)


def check_tables(compiled: CompiledProgram) -> None:
    """Each table is int8[256] and equals the PT2E graph's mapping; its input is the int8
    output of the producing operator (no requantization in between)."""
    sources = compiled.stages.lowering.value_sources
    for node in luts(compiled):
        table = table_of(compiled, node)
        channels = table.shape[0] if table.dim() == 2 else 1
        assert table.dtype == torch.int8 and table.shape[-1] == 256
        quantize = pt2e_node(compiled, sources[node.name][0])
        assert torch.equal(table, pt2e_table(compiled.stages.quantized, quantize, channels))
        producer = node.args[0]
        while producer.target is torch.ops.aten.view.default or "getitem" in str(producer.target):
            producer = producer.args[0]
        assert str(producer.target).startswith("cortex_m_nn."), producer.target


def no_fallbacks(compiled: CompiledProgram) -> None:
    assert not [r for r in compiled.records if not r.lowered]


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_each_activation_lowers_to_a_table(name: str) -> None:
    module, inputs = seeded(ConvActivation(ACTIVATIONS[name]()), 1, 3, 8, 8)
    compiled, verification = check_dialect(
        module,
        inputs,
        after={"cortex_m_nn.lut": 2, "cortex_m_nn.conv2d": 2, "cortex_m_nn.depthwise_conv2d": 1},
    )
    no_fallbacks(compiled)
    check_tables(compiled)
    assert verification.passed
    records = [r for r in compiled.records if r.kernel == "cortex_m_nn::lut"]
    tables = 8 if name == "prelu_per_channel" else 1  # one table per channel
    assert len(records) == 2 and all(r.weight_bytes == 256 * tables for r in records)


@pytest.mark.parametrize("target", ["cortex-m55", "cortex-m33", "cortex-m0plus"])
def test_every_activation_compiles_for_each_core_class(target: str) -> None:
    module, inputs = seeded(EveryActivation(), 1, 3, 12, 12)
    compiled, verification = check_dialect(
        module,
        inputs,
        target=Target.parse(target),
        after={"cortex_m_nn.lut": len(ACTIVATIONS), "cortex_m_nn.conv2d": len(ACTIVATIONS) + 1},
    )
    no_fallbacks(compiled)
    check_tables(compiled)
    assert verification.passed and compiled.target == Target.parse(target)
    if target == "cortex-m55":  # the program calls the table kernel (one serialisation)
        assert "cortex_m_nn::lut.out" in compiled.operators


@pytest.mark.parametrize(
    ("factory", "shape", "sources"),
    [
        (InputRelu, (1, 3, 8, 8), ["aten.relu"]),
        (ResidualRelu6, (1, 3, 6, 6), ["aten.relu6"]),
        (ClampAfterPoolAndView, (1, 3, 8, 8), ["aten.clamp"]),  # hardtanh: the pool's clamp
    ],
    ids=["model-input", "after-add-with-two-users", "after-pool-and-view"],
)
def test_unfusable_clamps_become_tables(factory, shape, sources: list[str]) -> None:
    module, inputs = seeded(factory(), *shape)
    compiled, _ = check_dialect(module, inputs, after={"cortex_m_nn.lut": len(sources)})
    no_fallbacks(compiled)
    check_tables(compiled)
    tables = [r.source_op for r in compiled.records if r.kernel == "cortex_m_nn::lut"]
    assert tables == sources


def test_activation_after_a_function_folds_into_its_table() -> None:
    module, inputs = seeded(TanhThenClamp(), 1, 3, 8, 8)
    compiled, _ = check_dialect(module, inputs, after={"cortex_m_nn.lut": 1})
    check_tables(compiled)  # the PT2E chain is dequantize → tanh → clamp → quantize
    assert [r.source_op for r in compiled.records if r.kernel == "cortex_m_nn::lut"] == [
        "aten.tanh"
    ]
    (node,) = luts(compiled)
    quantize = pt2e_node(compiled, compiled.stages.lowering.value_sources[node.name][0])
    assert quantize.args[0].target is torch.ops.aten.clamp.default
    scale, zero_point = quantize.args[1:3]
    table = table_of(compiled, node)
    assert int(table.max()) <= round(0.5 / scale) + zero_point
    assert int(table.min()) >= round(-0.5 / scale) + zero_point


def test_a_clamp_that_changes_nothing_is_no_operator() -> None:
    module, inputs = seeded(DoubleRelu(), 1, 3, 8, 8)
    compiled, _ = check_dialect(
        module, inputs, after={"cortex_m_nn.lut": 0, "cortex_m_nn.conv2d": 1}
    )
    no_fallbacks(compiled)
    kinds = {r.source_op: r.kernel for r in compiled.records}
    assert kinds["aten.relu"] == "view (no kernel)"


def test_tables_on_linear_outputs() -> None:
    module, inputs = seeded(GeluMlp(), 2, 5, 8)
    compiled, _ = check_dialect(
        module, inputs, after={"cortex_m_nn.lut": 2, "cortex_m_nn.linear": 2}
    )
    no_fallbacks(compiled)
    check_tables(compiled)


def test_a_table_after_a_table_takes_its_int8_output() -> None:
    module, inputs = seeded(ChainedTables(), 1, 3, 6, 6)
    compiled, _ = check_dialect(module, inputs, after={"cortex_m_nn.lut": 2, "cortex_m_nn.add": 1})
    check_tables(compiled)
    first, second = luts(compiled)
    assert second.args[0] is first


def test_tables_get_their_own_observed_output_range() -> None:
    """sigmoid's output is quantized over the range calibration saw (including 0), not
    the conv's range and not a fixed [0, 1]."""
    module, inputs = seeded(ConvActivation(torch.nn.Sigmoid()), 1, 3, 8, 8)
    minmax = QuantizationOptions(RangeMethod.MINMAX, equalize=False)  # the range it saw
    compiled, _ = check_dialect(module, inputs, options=minmax)
    quantized = compiled.stages.quantized
    sigmoid = next(n for n in quantized.graph.nodes if n.target is torch.ops.aten.sigmoid.default)
    (quantize,) = sigmoid.users
    low = high = 0.0
    with torch.no_grad():
        for (x,) in compiled.calibration.samples:
            y = torch.sigmoid(module.conv(x))
            low, high = min(low, float(y.min())), max(high, float(y.max()))
    scale, zero_point = float(quantize.args[1]), int(quantize.args[2])
    assert scale == pytest.approx((high - low) / 255, rel=1e-5)
    assert zero_point == -128  # sigmoid > 0: the range starts at 0
    assert scale != pytest.approx(float(sigmoid.args[0].args[1]), rel=1e-3)
    assert scale != pytest.approx(1 / 256, rel=1e-3)


@pytest.mark.parametrize("divide", [lambda x: x / 4.0, lambda x: torch.div(x, 3.0)])
def test_a_division_by_a_number_is_folded_into_the_output_scale(divide) -> None:
    """x / c is x with c times finer an output scale: no operator and no float."""
    module, inputs = seeded(ConvActivation(Function(divide)), 1, 3, 8, 8)
    compiled, _ = check_dialect(module, inputs, after={"cortex_m_nn.lut": 0, "aten.div.Tensor": 0})
    no_fallbacks(compiled)
    kinds = [r.kernel for r in compiled.records if r.source_op == "aten.div.Tensor"]
    assert kinds == ["view (no kernel)"] * 2


def test_sqrt_of_a_non_negative_input_is_a_table() -> None:
    """(sqrt of a signed tensor is NaN in the float model already; ops/test_lut.py checks that
    such a table is refused.)"""
    module, inputs = seeded(Function(lambda x: torch.sqrt(torch.relu(x))), 1, 3, 4, 4)
    compiled, _ = check_dialect(module, inputs, after={"cortex_m_nn.lut": 2})
    no_fallbacks(compiled)
    check_tables(compiled)


def test_per_channel_prelu_on_a_linear_output() -> None:
    module, inputs = seeded(nn.Sequential(nn.Linear(6, 5), nn.PReLU(5)), 3, 6)
    compiled, _ = check_dialect(module, inputs, after={"cortex_m_nn.lut": 1})
    no_fallbacks(compiled)
    (node,) = luts(compiled)
    assert tuple(table_of(compiled, node).shape) == (5, 256)


def test_fusable_activations_still_fuse() -> None:
    module, inputs = conv_stack()
    compiled, _ = check_dialect(module, inputs)
    assert count_operators(compiled.lowered)["cortex_m_nn.lut"] == 0
