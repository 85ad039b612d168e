"""The lowering's state: the graph being built, the values known so far, and helpers rules use.

One :class:`LoweringContext` lives for one ``lower()`` call. Besides the values of the source
graph's nodes it holds the layout caches of :mod:`cortex_m_nn.lower.layout` (which value a
moved value came from, which relayouts exist), so nothing about a lowering outlives it.
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field, replace

import torch
from torch.fx import Graph, GraphModule, Node

from cortex_m_nn.core.cmsis_nn import Case, cmsis_function
from cortex_m_nn.core.families import DEQUANTIZE, DEQUANTIZE_PER_CHANNEL, QUANTIZE
from cortex_m_nn.core.graph import base_name, op_name
from cortex_m_nn.core.integers import INT8_MAX, INT8_MIN, scalar_type
from cortex_m_nn.core.refusals import LoweringRefused, Refusal
from cortex_m_nn.core.target import Target
from cortex_m_nn.lower.graph_values import (
    NCHW_TO_NHWC,
    QValue,
    channels_last_order,
    dtype_of,
    logical_shape,
    qparams_of,
)
from cortex_m_nn.lower.macs import RECURRENT, fp32_macs
from cortex_m_nn.lower.records import OpRecord, boundary
from cortex_m_nn.ops.arithmetic import quantize_multiplier
from cortex_m_nn.ops.library import operator as cortex_op
from cortex_m_nn.ops.mul import mul_parameters
from cortex_m_nn.ops.requantize import check as check_requantize
from cortex_m_nn.ops.svdf import STATE_PREFIX


@dataclass
class LoweringContext:
    """The graph being built, with helpers the rules use."""

    source: GraphModule
    target: Target
    graph: Graph = field(default_factory=Graph)
    root: torch.nn.Module = field(default_factory=torch.nn.Module)
    quantized: dict[Node, QValue] = field(default_factory=dict)
    floats: dict[Node, Node] = field(default_factory=dict)
    records: list[OpRecord] = field(default_factory=list)
    #: lowered dequantize node name → (source graph dequantize node name, scale)
    float_sources: dict[str, tuple[str, float]] = field(default_factory=dict)
    #: float ops of constants evaluated at compile time (e.g. an LSTM's zero initial state)
    folded: dict[Node, torch.Tensor] = field(default_factory=dict)
    #: layout: moved value node → (origin value, positions of its stored bytes in the origin)
    origins: dict[Node, tuple[QValue, torch.Tensor]] = field(default_factory=dict)
    #: layout: (value node, nhwc) → that value in that layout (transposed once)
    relayouts: dict[tuple[Node, bool], QValue] = field(default_factory=dict)
    #: buffers whose state a lowered operator keeps itself (a streaming GRU's or LSTM's):
    #: their write-backs have no operator of their own (:meth:`keep_state`)
    kept_states: set[Node] = field(default_factory=set)
    #: lowered state buffer → (the source graph's buffer, its layer, the state's scale)
    state_sources: dict[str, tuple[str, int, float]] = field(default_factory=dict)
    _dequantized: dict[Node, Node] = field(default_factory=dict)
    _constants: int = 0

    # -- building -------------------------------------------------------------------
    def call(self, name: str, *args: object) -> Node:
        """``cortex_m_nn::<name>(*args)``; for scratch operators, the output (item 0)."""
        node = self.graph.call_function(cortex_op(name), tuple(args))
        if len(node.target._schema.returns) > 1:
            node = self.graph.call_function(operator.getitem, (node, 0))
        return node

    def view(self, value: Node, shape: tuple[int, ...]) -> Node:
        return self.graph.call_function(torch.ops.aten.view.default, (value, list(shape)))

    def constant(self, tensor: torch.Tensor, hint: str) -> Node:
        name = f"{hint}_{self._constants}"
        self._constants += 1
        self.root.register_buffer(name, tensor.detach().clone().contiguous())
        return self.graph.get_attr(name)

    def keep_state(
        self, buffer: Node, layer: int, shape: tuple[int, ...], dtype: torch.dtype, scale: float
    ) -> Node:
        """A state of the program (zero at load) that a lowered operator keeps in place of
        ``layer``'s slice of the source graph's ``buffer`` (whose write-back it makes
        redundant), holding it in ``dtype`` at ``scale``."""
        self.kept_states.add(buffer)
        state = self.constant(torch.zeros(shape, dtype=dtype), STATE_PREFIX)
        self.state_sources[str(state.target)] = (str(buffer.target), layer, scale)
        return state

    def constants(self, hint: str, **tensors: torch.Tensor) -> list[Node]:
        """:meth:`constant` of each of ``tensors`` in order, hinted ``{hint}_{keyword}``."""
        return [self.constant(tensor, f"{hint}_{key}") for key, tensor in tensors.items()]

    # -- reading the source graph ---------------------------------------------------
    def attribute(self, node: Node) -> torch.Tensor:
        if node.op != "get_attr":
            raise LoweringRefused(Refusal.NOT_A_CONSTANT, f"{node.name} is not a constant")
        value = self.source
        for part in node.target.split("."):
            value = getattr(value, part)
        return value

    def input_value(self, node: object, int16: bool = False) -> QValue:
        """The int8 value behind an activation ``dequantize`` node; an int16 one only for a
        rule with an int16 case that says so (``int16``), else refused."""
        if not isinstance(node, Node) or node.target not in DEQUANTIZE:
            raise LoweringRefused(
                Refusal.INPUT_NOT_QUANTIZED, "input is not a quantized activation"
            )
        producer = node.args[0]
        if producer not in self.quantized:
            raise LoweringRefused(
                Refusal.INPUT_NOT_QUANTIZED, "input is not a quantized activation"
            )
        value = self.quantized[producer]
        if qparams_of(node) != (value.scale, value.zero_point) or dtype_of(node) != value.dtype:
            raise LoweringRefused(
                Refusal.INPUT_QPARAMS_DISAGREE, "input quantization disagrees with its producer"
            )
        if value.dtype is not torch.int8 and not int16:
            raise LoweringRefused(Refusal.NOT_INT8, f"this op has no case for {value.dtype} input")
        return value

    def quantized_constant(
        self, node: object, channel_axis: int = 0
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(integer values, scales) of a folded weight/bias: ``dequantize(get_attr)``.

        Per-channel weights must be quantized along ``channel_axis`` (their output channels).
        """
        if not isinstance(node, Node):
            raise LoweringRefused(Refusal.WEIGHT_NOT_CONSTANT, "weight is not a quantized constant")
        if node.target in DEQUANTIZE_PER_CHANNEL:
            values, scales, zero_points, axis = node.args[:4]
            if axis != channel_axis:
                raise LoweringRefused(
                    Refusal.WEIGHT_CHANNEL_AXIS,
                    f"per-channel weight quantized on axis {axis}, not {channel_axis}",
                )
            zeros = self.attribute(zero_points)
            if torch.any(zeros != 0):
                raise LoweringRefused(
                    Refusal.WEIGHT_NOT_SYMMETRIC, "weight is not symmetrically quantized"
                )
            return self.attribute(values), self.attribute(scales).to(torch.float64)
        if node.target in DEQUANTIZE:
            values, scale, zero_point = node.args[:3]
            if isinstance(values, Node) and values.op == "get_attr" and zero_point == 0:
                return self.attribute(values), torch.tensor([float(scale)], dtype=torch.float64)
        raise LoweringRefused(Refusal.WEIGHT_NOT_CONSTANT, "weight is not a quantized constant")

    def accumulator_bias(
        self, node: object, input_scale: float, weight_scales: torch.Tensor
    ) -> torch.Tensor:
        """A quantized bias as int32 in accumulator units (input scale × weight scale).

        PT2E derives one bias scale per bias constant; a layer called on two inputs with
        different scales shares the constant, so its scale must be checked, and the values
        rescaled when it is not this call's accumulator scale.
        """
        values, scales = self.quantized_constant(node)
        accumulator = input_scale * weight_scales.to(torch.float64)
        if torch.allclose(scales.expand_as(accumulator), accumulator, rtol=1e-6, atol=0):
            return values.to(torch.int32)
        rescaled = torch.round(values.to(torch.float64) * scales / accumulator)
        return rescaled.clamp(-(2**31), 2**31 - 1).to(torch.int32)

    def int64_bias(self, node: object, accumulator_scale: float | torch.Tensor) -> torch.Tensor:
        """An int16 op's bias: the float constant (the quantizer leaves it float, PT2E having
        no int64 quantization) rounded, half to even, into accumulator units as int64."""
        if not isinstance(node, Node) or node.op != "get_attr":
            raise LoweringRefused(Refusal.WEIGHT_NOT_CONSTANT, "bias is not a float constant")
        bias = self.attribute(node).to(torch.float64)
        units = torch.round(bias / accumulator_scale)
        if not torch.all(units.abs() < 2**62):
            raise LoweringRefused(Refusal.WEIGHT_NOT_CONSTANT, "bias does not fit int64")
        return units.to(torch.int64)

    # -- values ---------------------------------------------------------------------
    def quantize_boundary(
        self, source: Node, scale: float, zero_point: int, dtype: torch.dtype = torch.int8
    ) -> QValue:
        """Quantize a float tensor to ``dtype``; 4-D tensors become NHWC here, at the boundary."""
        shape = logical_shape(source)
        nhwc = len(shape) == 4
        order = NCHW_TO_NHWC if nhwc else []
        node = self.call(
            "quantize", self.float_of(source), scale, zero_point, order, scalar_type(dtype)
        )
        bits = str(dtype).removeprefix("torch.")
        self.records.append(
            boundary(node, "quantize", "cortex_m_nn::quantize", f"(boundary, float → {bits})")
        )
        return QValue(node, scale, zero_point, shape, nhwc, dtype)

    def requantize(
        self, source: object, scale: float, zero_point: int, dtype: torch.dtype = torch.int8
    ) -> QValue | None:
        """``quantize(dequantize(v))`` into other qparams (convert_pt2e's join of two shared
        quantizations, or a change between int8 and int16 regions). int8 → int8 is
        ``cortex_m_nn::mul`` by a one-byte constant 1 (CMSIS-NN's vector kernel); a change of
        dtype is ``cortex_m_nn::requantize``. None when ``source`` is no dequantized value
        (or the change is one neither computes)."""
        if not isinstance(source, Node) or source.target not in DEQUANTIZE:
            return None
        if source.args[0] not in self.quantized:
            return None
        value = self.input_value(source, int16=True)
        if value.dtype is torch.int8 and dtype is torch.int8:
            return self._requantize_s8(value, scale, zero_point)
        multiplier, shift = quantize_multiplier(value.scale / scale)
        try:
            check_requantize(value.dtype, dtype, -value.zero_point, zero_point, multiplier, shift)
        except ValueError:
            return None
        out = self.call(
            "requantize",
            value.node,
            -value.zero_point,
            zero_point,
            multiplier,
            shift,
            scalar_type(dtype),
        )
        bits = f"{value.dtype} → {dtype}".replace("torch.", "")
        self.records.append(boundary(out, "requantize", "cortex_m_nn::requantize", f"({bits})"))
        return replace(value, node=out, scale=scale, zero_point=zero_point, dtype=dtype)

    def _requantize_s8(self, value: QValue, scale: float, zero_point: int) -> QValue | None:
        """int8 → int8 in other qparams: ``cortex_m_nn::mul`` by 1."""
        try:
            p = mul_parameters(
                value.scale,
                1.0,
                scale,
                input1_zero_point=value.zero_point,
                output_zero_point=zero_point,
            )
        except ValueError:
            return None
        flat = self.view(value.node, (math.prod(value.shape),))
        one = self.constant(torch.ones(1, dtype=torch.int8), "one")
        out = self.call(
            "mul",
            flat,
            one,
            p["input1_offset"],
            p["input2_offset"],
            p["output_offset"],
            p["output_multiplier"],
            p["output_shift"],
            INT8_MIN,
            INT8_MAX,
        )
        out = self.view(out, value.stored_shape)
        self.records.append(
            boundary(out, "requantize", "cortex_m_nn::mul", cmsis_function("mul", Case.S8))
        )
        return QValue(out, scale, zero_point, value.shape, value.nhwc)

    def float_of(self, node: object) -> object:
        """The lowered graph's float value for a node of the source graph."""
        if not isinstance(node, Node):
            return node
        if node in self.floats:
            return self.floats[node]
        if node.target in DEQUANTIZE and node.args[0] in self.quantized:
            value = self.quantized[node.args[0]]
            if value.node not in self._dequantized:
                order = channels_last_order(len(value.shape)) if value.nhwc else []
                permutation = [order.index(d) for d in range(len(order))]
                self._dequantized[value.node] = self.call(
                    "dequantize", value.node, value.scale, value.zero_point, permutation
                )
                lowered = self._dequantized[value.node]
                self.float_sources[lowered.name] = (node.name, value.scale)
                bits = str(value.dtype).removeprefix("torch.")
                self.records.append(
                    boundary(
                        lowered,
                        "dequantize",
                        "cortex_m_nn::dequantize",
                        f"(boundary, {bits} → float)",
                    )
                )
            return self._dequantized[value.node]
        if node.op == "get_attr":
            self.floats[node] = self.constant(self.attribute(node), node.name)
            return self.floats[node]
        if node.target in DEQUANTIZE or node.target in DEQUANTIZE_PER_CHANNEL:
            # A quantized constant feeding a float op: fold the dequantization now.
            folded = node.target(*[self._evaluate(a) for a in node.args], **node.kwargs)
            self.floats[node] = self.constant(folded, "folded")
            return self.floats[node]
        raise KeyError(f"no lowered value for {node.name}")

    def _evaluate(self, argument: object) -> object:
        return self.attribute(argument) if isinstance(argument, Node) else argument

    def shape_of(self, node: object) -> tuple[int, ...] | None:
        """A source-graph tensor's shape, None for anything else."""
        if not isinstance(node, Node):
            return None
        if node.op == "get_attr":
            value = self.attribute(node)
            return tuple(value.shape) if isinstance(value, torch.Tensor) else None
        value = node.meta.get("val")
        if isinstance(value, torch.Tensor):
            return tuple(int(d) for d in value.shape)
        if node.target in DEQUANTIZE | QUANTIZE or node.target in DEQUANTIZE_PER_CHANNEL:
            return self.shape_of(node.args[0])
        return None

    def float_macs(self, node: Node) -> int:
        """The MACs ``node`` computes in fp32 (see ``cortex_m_nn.lower.macs``)."""
        name = base_name(op_name(node.target))
        weights = []
        if name in RECURRENT and len(node.args) > 2 and isinstance(node.args[2], list | tuple):
            weights = [self.shape_of(w) for w in node.args[2]]
        transposed = name == "convolution" and len(node.args) > 6 and bool(node.args[6])
        return fp32_macs(
            name,
            [self.shape_of(a) for a in node.args],
            self.shape_of(node),
            [w for w in weights if w is not None],
            transposed,
        )

    def fold(self, node: Node) -> bool:
        """Evaluate a float op of constants now, into a constant; False if it is no such op.

        Constants an op builds for itself (an LSTM's zero initial state, a lifted tensor
        literal) are no operators of the model: they are neither kernels nor fallbacks.
        """
        inputs: list[Node] = []
        torch.fx.node.map_arg((node.args, node.kwargs), inputs.append)
        if any(n.op != "get_attr" and n not in self.folded for n in inputs):
            return False
        if torch.Tag.nondeterministic_seeded in getattr(node.target, "tags", ()):
            return False

        def value(n: Node) -> object:
            return self.folded[n] if n in self.folded else self.attribute(n)

        result = node.target(
            *torch.fx.node.map_arg(node.args, value), **torch.fx.node.map_arg(node.kwargs, value)
        )
        if not isinstance(result, torch.Tensor):
            return False
        self.folded[node] = result
        self.floats[node] = self.constant(result, node.name)
        return True

    def copy_float(self, node: Node) -> Node:
        """Keep ``node`` as a float op in the lowered graph (a fallback)."""
        args = torch.fx.node.map_arg(node.args, self.float_of)
        kwargs = torch.fx.node.map_arg(node.kwargs, self.float_of)
        copy = self.graph.call_function(node.target, args, kwargs)
        copy.meta = dict(node.meta)
        self.floats[node] = copy
        return copy
