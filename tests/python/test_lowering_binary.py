"""Element-wise binary operators end to end: add, sub, mul, minimum, maximum lower completely
from NCHW models (broadcasting, constants, numbers, fused activations) on every core kind,
within 1 LSB of the PT2E reference per operator."""

from __future__ import annotations

import functools

import pytest
import torch
from torch.fx import Graph, GraphModule
from torch.fx.passes.shape_prop import ShapeProp

from cortex_m_nn.check.harness import check_dialect
from cortex_m_nn.core.target import DEFAULT_TARGET, Target
from cortex_m_nn.frontend.calibration import synthetic
from cortex_m_nn.frontend.model_source import ModelSource
from cortex_m_nn.lower.passes import lower
from cortex_m_nn.ops.arithmetic import Rounding
from cortex_m_nn.pipeline import quantize

from .models import (
    differences,
    extremes,
    lone_vectors,
    probability_floor,
    products,
    sums,
    vectors,
)
from .test_lowering import only_cortex_m_nn_and_views

aten = torch.ops.aten
qd = torch.ops.quantized_decomposed

MODELS = {
    "products": (products, {"cortex_m_nn.mul": 6, "aten.mul.Tensor": 0}),
    "differences": (differences, {"cortex_m_nn.add": 5, "aten.sub.Tensor": 0}),
    "extremes": (extremes, {"cortex_m_nn.maximum": 2, "cortex_m_nn.minimum": 2}),
    "sums": (sums, {"cortex_m_nn.add": 4, "aten.add.Tensor": 0}),
    "vectors": (
        vectors,
        {
            "cortex_m_nn.mul": 1,
            "cortex_m_nn.add": 2,
            "cortex_m_nn.maximum": 1,
            "cortex_m_nn.minimum": 1,
        },
    ),
    # 1-D operands (no batch): once an internal IndexError in the layout check
    "lone_vectors": (
        lone_vectors,
        {
            "cortex_m_nn.mul": 1,
            "cortex_m_nn.add": 2,
            "cortex_m_nn.maximum": 1,
            "cortex_m_nn.minimum": 1,
        },
    ),
}


def compiled_model(name: str, target: str = "cortex-m55", rounding: Rounding = Rounding.DOUBLE):
    """check_dialect of a model of MODELS, once per (model, target, rounding) in this module."""
    return _compiled(name, target, rounding)


@functools.cache
def _compiled(name: str, target: str, rounding: Rounding):
    factory, after = MODELS[name]
    module, inputs = factory()
    return check_dialect(
        module, inputs, target=Target.parse(target), after=after, rounding=rounding
    )


@pytest.mark.parametrize("target", ["cortex-m55", "cortex-m33", "cortex-m0plus"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_binary_models_lower_completely(name: str, target: str) -> None:
    compiled, verification = compiled_model(name, target)
    assert not compiled.stages.lowering.fallbacks
    only_cortex_m_nn_and_views(compiled)
    assert verification.passed and verification.max_lsb <= 1


def _operand_shapes(compiled, name: str) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """(input 1, input 2) stored shapes of every ``cortex_m_nn.<name>`` call, in graph order."""
    module = compiled.lowered
    ShapeProp(module).propagate(*compiled.model.example_inputs)
    return [
        tuple(tuple(arg.meta["tensor_meta"].shape) for arg in node.args[:2])
        for node in module.graph.nodes
        if node.op == "call_function" and str(node.target) == f"cortex_m_nn.{name}.default"
    ]


def test_mul_broadcasts_at_collapsed_channels_last_shapes() -> None:
    compiled, _ = compiled_model("products")
    assert _operand_shapes(compiled, "mul") == [
        ((288,), (288,)),  # a * b, [1, 8, 6, 6] each
        ((36, 8), (1, 8)),  # * mean over H, W: per channel
        ((36, 1), (36, 8)),  # [1, 1, 6, 6] gate first: per pixel
        ((288,), (1,)),  # * adaptive_avg_pool2d(gate) [1, 1, 1, 1]: scalar tensor
        ((36, 8), (1, 8)),  # * learned [8, 1, 1] scale
        ((288,), (1,)),  # * 0.5
    ]
    muls = [n for n in compiled.lowered.graph.nodes if "cortex_m_nn.mul" in str(n.target)]
    # relu(a * b): the range starts at the output zero point (real 0.0)
    assert muls[0].args[7] == muls[0].args[4]


def test_sub_is_add_with_negated_input2_multiplier() -> None:
    compiled, _ = compiled_model("differences")
    subs = [r for r in compiled.records if r.source_op == "aten.sub.Tensor"]
    assert len(subs) == 5
    assert {(r.kernel, r.cmsis_function) for r in subs} == {
        ("cortex_m_nn::add", "arm_elementwise_add_s8")
    }
    adds = [n for n in compiled.lowered.graph.nodes if "cortex_m_nn.add" in str(n.target)]
    assert all(n.args[3 + 3] < 0 < n.args[3] for n in adds)  # input2 / input1 multipliers
    shapes = _operand_shapes(compiled, "add")
    assert ((1, 8), (36, 8)) in shapes  # mean(b) - a: input 1 is the broadcast one
    # the [8, 6, 6] constant, permuted to channels-last at compile time
    assert shapes[3] == ((288,), (288,))


@pytest.mark.parametrize("rounding", list(Rounding))
def test_binary_models_verify_with_both_roundings(rounding: Rounding) -> None:
    for name in ("products", "differences"):
        compiled, verification = compiled_model(name, rounding=rounding)
        assert compiled.rounding is rounding and verification.passed


def test_minimum_maximum_share_quantization() -> None:
    module, inputs = extremes()
    source = ModelSource("extremes", module, inputs)
    _, converted = quantize(source, synthetic(inputs, 4), progress=False)
    checked = 0
    for node in converted.graph.nodes:
        if node.target in (aten.maximum.default, aten.minimum.default):
            (quantize_node,) = node.users
            qparams = {tuple(arg.args[1:3]) for arg in node.args[:2]}
            assert qparams == {tuple(quantize_node.args[1:3])}
            checked += 1
    assert checked == 4


def _converted_maximum(scales: tuple[float, float, float]) -> GraphModule:
    """dequantize(x), dequantize(y) → maximum → quantize, as convert_pt2e would give it."""
    graph = Graph()
    value = torch.zeros(2, 4)
    dequantized = []
    for name, scale in zip("xy", scales[:2], strict=False):
        node = graph.placeholder(name)
        q = graph.call_function(
            qd.quantize_per_tensor.default, (node, scale, 0, -128, 127, torch.int8)
        )
        dq = graph.call_function(
            qd.dequantize_per_tensor.default, (q, scale, 0, -128, 127, torch.int8)
        )
        dequantized.append(dq)
    maximum = graph.call_function(aten.maximum.default, tuple(dequantized))
    q = graph.call_function(
        qd.quantize_per_tensor.default, (maximum, scales[2], 0, -128, 127, torch.int8)
    )
    dq = graph.call_function(
        qd.dequantize_per_tensor.default, (q, scales[2], 0, -128, 127, torch.int8)
    )
    graph.output(dq)
    for node in graph.nodes:
        node.meta["val"] = value
    return GraphModule(torch.nn.Module(), graph)


def test_maximum_refuses_different_quantization() -> None:
    same = lower(_converted_maximum((0.1, 0.1, 0.1)), DEFAULT_TARGET)
    assert not same.fallbacks
    (refused,) = lower(_converted_maximum((0.1, 0.2, 0.1)), DEFAULT_TARGET).fallbacks
    assert refused.source_op == "aten.maximum"
    assert "quantized differently" in refused.fallback_reason
    assert "cannot requantize" in refused.fallback_reason


def test_fixed_quantization_input_is_requantized_in_int8() -> None:
    """softmax's output has a fixed quantization, so sharing it with the other maximum input
    needs a requantization: one cortex_m_nn::mul by 1, not a float round trip."""
    compiled, verification = check_dialect(*probability_floor())
    assert [r.source_op for r in compiled.records] == [
        "quantize",
        "aten.linear",
        "aten.softmax.int",
        "requantize",
        "aten.linear",
        "aten.maximum",
        "dequantize",
    ]  # one boundary dequantize: the model output
    (requantize,) = [r for r in compiled.records if r.source_op == "requantize"]
    assert requantize.cmsis_function == "arm_elementwise_mul_s8"
    only_cortex_m_nn_and_views(compiled)
    assert verification.passed and verification.per_node[requantize.output_node] <= 1


class MixedLayouts(torch.nn.Module):
    """A product scaled by a number (the product's requantization applies it) and normalised
    (its [1, 4, 6, 6] bytes stay in logical order), then added to a convolution's
    channels-last output (one operand transposed)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(4, 4, 1)

    def forward(self, x: torch.Tensor, a: torch.Tensor, b: torch.Tensor):
        scores = (a @ b) * 0.5
        return self.conv(x) + scores, torch.softmax(scores, dim=-1)


@pytest.mark.parametrize("target", ["cortex-m55", "cortex-m0plus"])
def test_operands_in_different_layouts_are_aligned_once(target: str) -> None:
    generator = torch.Generator().manual_seed(5)
    inputs = tuple(torch.randn(1, 4, 6, 6, generator=generator) for _ in range(3))
    compiled, verification = check_dialect(
        MixedLayouts().eval(),
        inputs,
        target=Target.parse(target),
        after={"cortex_m_nn.transpose": 1, "cortex_m_nn.softmax": 1, "cortex_m_nn.mul": 0},
    )
    assert not compiled.stages.lowering.fallbacks and verification.passed
    kinds = {r.source_op: r.cmsis_function for r in compiled.records}
    assert kinds["aten.matmul"] == "arm_batch_matmul_s8"  # stays in logical order, scaled
    assert kinds["aten.add.Tensor"] == "arm_elementwise_add_s8 after arm_transpose_s8"
