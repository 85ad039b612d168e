"""An SVDF step (``cortex_m_nn.nn.SVDF``: ``svdf_memory`` → state → ``svdf_time``) →
``cortex_m_nn::svdf`` on ``arm_svdf_state_s16_s8`` (int16 state) or ``arm_svdf_s8`` (int8).

The rule closes the pattern at ``svdf_time``'s quantize and reads *through* the state's
quantize to ``svdf_memory`` (its input and feature weights); the layer's write-back of the
state (``states``) is dropped, as the kernel updates the state in place. The state
becomes a zero-initialised buffer ``mutable_state_<n>`` of the lowered graph, which the
program keeps in the arena between inferences (``execution_graph``). As TFLite Micro
prepares its SVDF, the two effective scales are computed in float32: ``s_in·s_wf / s_state``
(the projection into the state) and ``s_state·s_wt / s_out`` (the output), and the bias is
rounded into int32 at ``s_state·s_wt``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.fx import Node

from cortex_m_nn.core.families import QUANTIZE
from cortex_m_nn.core.refusals import LoweringRefused, Refusal
from cortex_m_nn.core.target import Isa
from cortex_m_nn.frontend.states import state_source
from cortex_m_nn.lower.activation import activation_range
from cortex_m_nn.lower.context import LoweringContext
from cortex_m_nn.lower.graph_values import QValue, dtype_of, qparams_of
from cortex_m_nn.lower.macs import svdf_macs
from cortex_m_nn.lower.registry import Lowered, Pattern, reads_through, rule
from cortex_m_nn.nn import SVDF_MEMORY, SVDF_TIME
from cortex_m_nn.ops.arithmetic import quantize_multiplier
from cortex_m_nn.ops.svdf import FUNCTIONS, STATE_PREFIX, scratch_bytes, svdf_kernel_sums

INT32_LIMIT = 2**31


def _state_quantize(op: Node) -> Node | None:
    """The quantize of ``svdf_memory``'s output that ``svdf_time`` reads (dequantized)."""
    dequantize = op.args[0]
    quantize = dequantize.args[0] if isinstance(dequantize, Node) and dequantize.args else None
    if not isinstance(quantize, Node) or quantize.target not in QUANTIZE:
        return None
    memory = quantize.args[0]
    return quantize if isinstance(memory, Node) and memory.target is SVDF_MEMORY else None


@reads_through(SVDF_TIME)
def read_state(op: Node) -> list[Node]:
    quantize = _state_quantize(op)
    return [] if quantize is None else [quantize]


def _check_state(memory: Node) -> None:
    """The state ``svdf_memory`` reads is the layer's buffer, read by it alone and written
    back from it alone: one frame per call (a sequence, or two calls of one layer in a
    forward, would chain states the kernel keeps in one buffer)."""
    state = memory.args[1]
    ok = isinstance(state, Node) and state.op == "get_attr"
    users = set(state.users) if ok else set()
    writes = [u for u in users if state_source(u) is memory]
    if not ok or len(writes) != 1 or users != {memory, writes[0]}:
        raise LoweringRefused(
            Refusal.SVDF_SHAPE,
            "the SVDF state is not its own buffer read and written back once per call "
            "(a sequence input or a layer called twice)",
        )


def _scale(*factors: float, divisor: float) -> tuple[int, int]:
    """``quantize_multiplier`` of ``Π factors / divisor`` computed in float32 (TFLite Micro)."""
    value = torch.tensor(1.0, dtype=torch.float32)
    for factor in factors:
        value = value * torch.tensor(factor, dtype=torch.float32)
    try:
        return quantize_multiplier(float(value / torch.tensor(divisor, dtype=torch.float32)))
    except ValueError as error:
        raise LoweringRefused(Refusal.SVDF_REQUANTIZATION, str(error)) from error


def _bias(context: LoweringContext, node: object, scale: float, units: int) -> torch.Tensor | None:
    """The float bias rounded into int32 accumulator units (``s_state · s_wt``)."""
    if node is None:
        return None
    if not isinstance(node, Node) or node.op != "get_attr":
        raise LoweringRefused(Refusal.WEIGHT_NOT_CONSTANT, "SVDF bias is not a float constant")
    units_of = torch.round(context.attribute(node).to(torch.float64).flatten() / scale)
    if units_of.numel() != units or not torch.all(units_of.abs() < INT32_LIMIT):
        raise LoweringRefused(Refusal.SVDF_ACCUMULATOR, "SVDF bias does not fit int32")
    return units_of.to(torch.int32)


def _check_sums(
    time: torch.Tensor, bias: torch.Tensor | None, rank: int, dtype: torch.dtype
) -> None:
    """Refuse a layer whose int32 time sums could wrap (CMSIS-NN would wrap silently)."""
    largest = -torch.iinfo(dtype).min * time.to(torch.int64).abs().sum(-1)
    worst = largest.reshape(-1, rank).sum(-1)
    if bias is not None:
        worst = worst + bias.to(torch.int64).abs()
    if int(worst.max()) >= INT32_LIMIT:
        raise LoweringRefused(
            Refusal.SVDF_ACCUMULATOR,
            f"time-filter sums reach {int(worst.max())}, beyond int32 (memory too long for "
            "these weights)",
        )


@dataclass
class _Layer:
    """What the rule reads from the PT2E graph of one SVDF step."""

    x: QValue
    state_shape: tuple[int, ...]
    state_dtype: torch.dtype
    state_scale: float
    weights_feature: torch.Tensor
    feature_scale: float
    weights_time: torch.Tensor
    time_scale: float
    rank: int


def _read(context: LoweringContext, op: Node) -> _Layer:
    """The step's input, state and weights, checked; LoweringRefused otherwise."""
    state_q = _state_quantize(op)
    if state_q is None:
        raise LoweringRefused(Refusal.INPUT_NOT_QUANTIZED, "SVDF state is not quantized")
    memory = state_q.args[0]
    _check_state(memory)
    x = context.input_value(memory.args[0])
    state_scale, state_zero = qparams_of(state_q)
    shape = context.shape_of(memory.args[1])
    wf, wf_scale = context.quantized_constant(memory.args[2])
    wt, wt_scale = context.quantized_constant(op.args[1])
    if len(x.shape) != 2 or shape is None or len(shape) != 3 or shape[0] != x.shape[0]:
        raise LoweringRefused(
            Refusal.SVDF_SHAPE, f"input {x.shape} is not one frame [batch, input] of state {shape}"
        )
    dtype = dtype_of(state_q)
    if state_zero != 0 or wt.dtype is not dtype:
        raise LoweringRefused(Refusal.NOT_INT8, "SVDF state and time weights of one dtype, zp 0")
    scales = float(wf_scale[0]), float(wt_scale[0])
    return _Layer(x, shape, dtype, state_scale, wf, scales[0], wt, scales[1], int(op.args[3]))


@rule(SVDF_TIME)
def lower_svdf(context: LoweringContext, pattern: Pattern) -> Lowered:
    op = pattern.op
    layer = _read(context, op)
    x, rank, dtype = layer.x, layer.rank, layer.state_dtype
    batch, filters, memory = layer.state_shape
    units = filters // rank
    m1, s1 = _scale(x.scale, layer.feature_scale, divisor=layer.state_scale)
    m2, s2 = _scale(layer.state_scale, layer.time_scale, divisor=pattern.scale)
    bias = _bias(context, op.args[2], layer.state_scale * layer.time_scale, units)
    _check_sums(layer.weights_time, bias, rank, dtype)
    sums = None
    if dtype is torch.int8 and context.target.isa is Isa.MVE:
        sums = svdf_kernel_sums(layer.weights_feature, x.zero_point)
    state = context.constant(torch.zeros(layer.state_shape, dtype=dtype), STATE_PREFIX)
    weights = (layer.weights_feature, layer.weights_time, bias, sums)
    names = ("weights_feature", "weights_time", "bias", "kernel_sums")
    constants = [
        None if t is None else context.constant(t, f"{op.name}_{name}")
        for name, t in zip(names, weights, strict=True)
    ]
    low, high = activation_range(pattern.activation, pattern.scale, pattern.zero_point)
    out = context.call(
        "svdf", x.node, state, *constants, rank, x.zero_point, pattern.zero_point,
        m1, s1, m2, s2, low, high, scratch_bytes(batch, filters, units),
    )  # fmt: skip
    value = QValue(out, pattern.scale, pattern.zero_point, (batch, units))
    weight_bytes = sum(t.numel() * t.element_size() for t in weights if t is not None)
    return Lowered(
        value, "svdf", FUNCTIONS[dtype], svdf_macs(batch, x.shape[1], filters, memory), weight_bytes
    )
