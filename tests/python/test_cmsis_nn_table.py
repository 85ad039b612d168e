"""The table of CMSIS-NN functions per operator and dtype case (``core.cmsis_nn.FUNCTIONS``)
against the two sides that must agree with it: each function is called by its operator's
kernel (``kernels/op_<operator>.cpp``, read as text), and each report row of a compiled model
names a function the table lists for the row's operator and case."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tests.zoo import ZOO

from cortex_m_nn.core.cmsis_nn import FUNCTIONS, Case, cmsis_function
from cortex_m_nn.core.operators import load_yaml
from cortex_m_nn.core.options import Activations, QuantizationOptions, Weights

KERNELS = Path(__file__).resolve().parents[2] / "kernels"


def _code(path: Path) -> str:
    """The C++ source without its comments."""
    text = re.sub(r"/\*.*?\*/", "", path.read_text(), flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


@pytest.mark.parametrize(("operator", "case"), sorted(FUNCTIONS), ids=lambda v: str(v))
def test_each_function_is_called_by_its_kernel(operator: str, case: Case) -> None:
    assert operator in {op.name for op in load_yaml()[1]}
    code = _code(KERNELS / f"op_{operator}.cpp")
    for name in FUNCTIONS[operator, case]:
        assert re.search(rf"\b{name}\b", code), f"op_{operator}.cpp never calls {name}"


def test_a_variant_must_be_listed() -> None:
    assert cmsis_function("conv2d", Case.S4, 1) == "arm_convolve_s4"
    with pytest.raises(IndexError):
        cmsis_function("conv2d", Case.S16, 1)
    with pytest.raises(KeyError):
        cmsis_function("concat", Case.S8)


@pytest.mark.parametrize(
    ("model", "options"),
    [
        ("ds_cnn", QuantizationOptions()),
        ("ds_cnn", QuantizationOptions(activations=Activations.INT16)),
        ("ds_cnn", QuantizationOptions(weights=Weights.INT4)),
        ("transformer", QuantizationOptions(activations=Activations.INT16)),
        ("kws_lstm", QuantizationOptions()),
    ],
    ids=lambda v: str(v)[:40],
)
def test_each_row_names_a_function_of_its_case(quantized_models, model, options) -> None:
    program = quantized_models.get(model, ZOO[model], options).lower("cortex-m55")
    checked = 0
    for record in program.records:
        operator = (record.kernel or "").removeprefix("cortex_m_nn::")
        if not record.lowered or (operator, record.case) not in FUNCTIONS:
            continue
        named = (record.cmsis_function or "").split(" ")[0]
        assert named in FUNCTIONS[operator, record.case], (record.name, named, record.case)
        checked += 1
    assert checked
