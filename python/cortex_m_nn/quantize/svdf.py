"""Quantization of an SVDF layer's two float operators (``cortex_m_nn.nn``), as TFLite's
converter quantizes its SVDF: int8 input and output, int8 per-tensor feature weights, and
the state (``svdf_memory``'s output) and time weights of the layer's ``state_bits``: int16
state with time weights in 10 bits (the default, ``arm_svdf_state_s16_s8``) or both int8
(``arm_svdf_s8``). The state is symmetric (CMSIS-NN's SVDF has no state zero point); the bias
stays float and the lowering rounds it to int32 at the state scale × time-weight scale.
"""

from __future__ import annotations

import torch
from torch.fx import Node
from torchao.quantization.pt2e.observer import MinMaxObserver
from torchao.quantization.pt2e.quantizer import QuantizationSpec

from cortex_m_nn.core.integers import INT8_MAX, INT8_MIN
from cortex_m_nn.nn import SVDF_MEMORY
from cortex_m_nn.quantize import config

#: Largest time weight of an int16 state: 10 bits, as TFLite's converter makes them.
TIME_WEIGHT_INT16_MAX = 511


def _symmetric(dtype: torch.dtype, low: int, high: int) -> QuantizationSpec:
    return QuantizationSpec(
        dtype=dtype,
        quant_min=low,
        quant_max=high,
        qscheme=torch.per_tensor_symmetric,
        observer_or_fake_quant_ctr=MinMaxObserver.with_args(eps=config.EPS),
    )


#: state_bits → (the state's spec, the time weights' spec).
STATE_SPECS = {
    16: (
        config.ACTIVATION_INT16,
        _symmetric(torch.int16, -TIME_WEIGHT_INT16_MAX, TIME_WEIGHT_INT16_MAX),
    ),
    8: (_symmetric(torch.int8, INT8_MIN, INT8_MAX), config.WEIGHT_PER_TENSOR),
}


def state_bits(memory: Node) -> int:
    """The ``state_bits`` an ``svdf_memory`` node was given (16 unless 8)."""
    return 8 if memory.args[3] == 8 else 16


def svdf_annotation(
    node: Node, activation: QuantizationSpec
) -> tuple[dict[Node, QuantizationSpec], QuantizationSpec] | None:
    """(input specs, output spec) of one SVDF operator, None to leave it float:
    ``svdf_time`` only when an annotated ``svdf_memory`` feeds it (its time weights' spec
    follows that state's). The state input of ``svdf_memory`` is not annotated: it is the
    buffer the layer writes back, read as the float it holds."""
    if node.target is SVDF_MEMORY:
        x, _, weight = node.args[:3]
        if not isinstance(x, Node) or not isinstance(weight, Node):
            return None
        state, _ = STATE_SPECS[state_bits(node)]
        return {x: activation, weight: config.WEIGHT_PER_TENSOR}, state
    memory, weight = node.args[:2]
    if (
        not isinstance(memory, Node)
        or memory.target is not SVDF_MEMORY
        or not isinstance(weight, Node)
    ):
        return None
    if "quantization_annotation" not in memory.meta:
        return None
    _, time_spec = STATE_SPECS[state_bits(memory)]
    return {weight: time_spec}, activation
