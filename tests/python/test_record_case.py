"""The dtype case each report row carries (``OpRecord.case``): what the precision searches
read instead of a CMSIS-NN function's name. Expected cases come from how the model was
quantized (the options, the layer's own quantization), not from the lowering's code."""

from __future__ import annotations

import pytest
import torch
from tests.zoo import ZOO

from cortex_m_nn.core.cmsis_nn import Case
from cortex_m_nn.core.options import Activations, QuantizationOptions, Weights

#: model, options, the source ops of interest → the case each of their rows must carry
CASES = [
    ("ds_cnn", QuantizationOptions(), {"aten.conv2d": Case.S8, "aten.linear": Case.S8}),
    (
        "ds_cnn",
        QuantizationOptions(activations=Activations.INT16),
        {"aten.conv2d": Case.S16, "aten.linear": Case.S16},
    ),
    (
        "ds_cnn",
        QuantizationOptions(weights=Weights.INT4),
        {"aten.conv2d": Case.S4, "aten.linear": Case.S4},
    ),
    # an int16 table activation computes in int16 without a CMSIS-NN ``_s16`` function
    ("transformer", QuantizationOptions(activations=Activations.INT16), {"aten.gelu": Case.S16}),
    # SVDF's state is int16 (arm_svdf_state_s16_s8), its activations int8: case s8
    ("svdf_kws", QuantizationOptions(), {"svdf_time": Case.S8}),
]


@pytest.mark.parametrize(("model", "options", "expected"), CASES, ids=lambda c: str(c)[:40])
def test_each_row_carries_its_case(quantized_models, model, options, expected) -> None:
    program = quantized_models.get(model, ZOO[model], options).lower("cortex-m55")
    seen = {op: 0 for op in expected}
    for record in program.records:
        if record.source_op in expected and record.lowered:
            assert record.case is expected[record.source_op], (record.name, record.case)
            seen[record.source_op] += 1
    assert all(seen.values()), f"no lowered row of {[op for op, n in seen.items() if not n]}"


@pytest.mark.parametrize(("weights", "case"), [(Weights.INT8, Case.S8), (Weights.INT4, Case.S4)])
def test_the_linear_row_is_s4_exactly_when_its_weights_are_packed(
    quantized_models, weights, case
) -> None:
    """Independently of the options: the linear layer's row is s4 when the operator's stored
    weight holds two values per byte (half the float weight's columns), else s8."""
    options = QuantizationOptions(weights=weights)
    program = quantized_models.get("ds_cnn", ZOO["ds_cnn"], options).lower("cortex-m55")
    module, _ = ZOO["ds_cnn"]()
    (layer,) = [m for m in module.modules() if isinstance(m, torch.nn.Linear)]
    (record,) = [r for r in program.records if r.source_op == "aten.linear"]
    (node,) = [n for n in program.lowered.graph.nodes if n.name == record.output_node]
    stored = getattr(program.lowered, node.args[1].target)
    packed = stored.shape[-1] * 2 == layer.weight.shape[-1]
    assert packed == (weights is Weights.INT4)
    assert record.case is case
