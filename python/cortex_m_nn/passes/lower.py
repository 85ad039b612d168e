"""Lower a PT2E-quantized graph (``convert_pt2e`` output) onto ``cortex_m_nn`` operators.

The walk visits the converted graph once, in order. Each ``quantize`` node closes a pattern
``dequantize → op [→ activation] → quantize``; the op's rule (``passes/rules``) turns it into
one ``cortex_m_nn`` operator on int8 tensors. 4-D activations are stored channels-last
(NHWC) from the input ``quantize`` to the output ``dequantize``: the layout changes only at
the graph boundary. What no rule lowers stays in float between a ``dequantize`` and a
``quantize`` and is reported as a fallback.
"""

from __future__ import annotations

import math
import operator
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.fx import Graph, GraphModule, Node

from cortex_m_nn.macs import RECURRENT, base_name, fp32_macs
from cortex_m_nn.ops.library import operator as cortex_op
from cortex_m_nn.ops.mul import mul_parameters
from cortex_m_nn.passes.activation import is_activation
from cortex_m_nn.passes.graph_values import (
    DEQUANTIZE,
    DEQUANTIZE_PER_CHANNEL,
    NCHW_TO_NHWC,
    QUANTIZE,
    LoweringRefused,
    QValue,
    channels_last_order,
    logical_shape,
    qparams_of,
)
from cortex_m_nn.quantizer.config import INT8_MAX, INT8_MIN
from cortex_m_nn.target import Target


@dataclass
class OpRecord:
    """One row of the report: an operator of the model and what it became."""

    name: str
    source_op: str
    kernel: str | None
    cmsis_function: str | None = None
    macs: int = 0
    weight_bytes: int = 0
    fallback_reason: str | None = None
    location: str = ""
    #: name of the lowered graph's node holding this op's int8 output (verification keys)
    output_node: str | None = None
    #: ``path:line`` of the model code the op comes from ("" when the graph has no trace)
    source_line: str = ""

    @property
    def lowered(self) -> bool:
        return self.fallback_reason is None


@dataclass
class Lowered:
    """What a rule produced: the output value and its report row's numbers."""

    value: QValue
    kernel: str
    cmsis_function: str
    macs: int = 0
    weight_bytes: int = 0


@dataclass
class Pattern:
    """``op [→ activation] → quantize``: the float op, its fused activation, the output qparams."""

    op: Node
    activation: Node | None
    scale: float
    zero_point: int
    shape: tuple[int, ...]


#: The report's kernel for an operator whose lowered node turned out to be dead code.
REMOVED = "removed (no kernel)"

Rule = Callable[["LoweringContext", Pattern], Lowered]
RULES: dict[object, Rule] = {}
#: target → the activation ``quantize`` nodes a rule for it reads *through*: it uses the value
#: before the op that quantize closes (e.g. batch_matmul takes ``k`` for ``k.transpose(-2, -1)``).
ReadThrough = Callable[[Node], list[Node]]
READS_THROUGH: dict[object, ReadThrough] = {}


def rule(*targets: object) -> Callable[[Rule], Rule]:
    """Register a lowering rule for ATen targets."""

    def register(function: Rule) -> Rule:
        for target in targets:
            RULES[target] = function
        return function

    return register


def reads_through(*targets: object) -> Callable[[ReadThrough], ReadThrough]:
    """Register which producers a rule reads through; they are lowered only when needed.

    A producer (a ``quantize`` node and the op it closes) is skipped when every use of its
    value is by ops reading through it. Should such an op fall back to float, the producer is
    lowered then, as it would have been in order.
    """

    def register(function: ReadThrough) -> ReadThrough:
        for target in targets:
            READS_THROUGH[target] = function
        return function

    return register


#: Why a float op the quantizer left alone stays float.
NOT_QUANTIZED = "not quantized (no cortex_m_nn lowering for this op)"


def op_name(target: object) -> str:
    name = getattr(target, "_name", None) or str(target)
    return name.replace("::", ".").removesuffix(".default")


_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)\n\s*(.*)')


def _model_frame(node: Node) -> tuple[str, str, str] | None:
    """(file, line, code) of the innermost frame of the model's own code in the trace."""
    frames = _FRAME.findall(node.meta.get("stack_trace") or "")
    user = [f for f in frames if "/torch/" not in f[0]] or frames
    if not user:
        return None
    file, line, _, code = user[-1]
    return file, line, code.strip()


def module_of(node: Node) -> str:
    """``norm (LayerNorm)``: the innermost module the op was called in."""
    module_stack = node.meta.get("nn_module_stack") or {}
    if not module_stack:
        return ""
    path, kind = list(module_stack.values())[-1]
    return f"{path or 'model'} ({kind.rsplit('.', 1)[-1]})"


def source_line(node: Node) -> str:
    """``path/to/model.py:51``, the path relative to the working directory when inside it."""
    frame = _model_frame(node)
    if frame is None:
        return ""
    file, line, _ = frame
    path = Path(file)
    if path.is_absolute():
        try:
            file = os.path.relpath(path) if path.is_relative_to(Path.cwd()) else file
        except (OSError, ValueError):
            pass
    return f"{file}:{line}"


def source_location(node: Node) -> str:
    """Where the op comes from: the module path and the innermost model frame."""
    parts = [module_of(node)] if module_of(node) else []
    frame = _model_frame(node)
    if frame is not None:
        file, line, code = frame
        parts.append(f"{file.rsplit('/', 1)[-1]}:{line}: {code}")
    return ", ".join(parts)


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
    #: skipped producers (quantize node → its source nodes, in order) and how to lower one
    pending: dict[Node, list[Node]] = field(default_factory=dict)
    visit: Callable[[Node], None] | None = None
    #: report rows of the ops read through (removed again should one be lowered after all)
    read_through_records: dict[Node, OpRecord] = field(default_factory=dict)
    #: float ops of constants evaluated at compile time (e.g. an LSTM's zero initial state)
    folded: dict[Node, torch.Tensor] = field(default_factory=dict)
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

    # -- reading the source graph ---------------------------------------------------
    def attribute(self, node: Node) -> torch.Tensor:
        if node.op != "get_attr":
            raise LoweringRefused(f"{node.name} is not a constant")
        value = self.source
        for part in node.target.split("."):
            value = getattr(value, part)
        return value

    def input_value(self, node: object) -> QValue:
        """The int8 value behind an activation ``dequantize`` node."""
        if not isinstance(node, Node) or node.target not in DEQUANTIZE:
            raise LoweringRefused("input is not a quantized activation")
        producer = node.args[0]
        if producer not in self.quantized:
            raise LoweringRefused("input is not a quantized activation")
        value = self.quantized[producer]
        if qparams_of(node) != (value.scale, value.zero_point):
            raise LoweringRefused("input quantization disagrees with its producer")
        return value

    def quantized_constant(
        self, node: object, channel_axis: int = 0
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """(integer values, scales) of a folded weight/bias: ``dequantize(get_attr)``.

        Per-channel weights must be quantized along ``channel_axis`` (their output channels).
        """
        if not isinstance(node, Node):
            raise LoweringRefused("weight is not a quantized constant")
        if node.target in DEQUANTIZE_PER_CHANNEL:
            values, scales, zero_points, axis = node.args[:4]
            if axis != channel_axis:
                raise LoweringRefused(
                    f"per-channel weight quantized on axis {axis}, not {channel_axis}"
                )
            zeros = self.attribute(zero_points)
            if torch.any(zeros != 0):
                raise LoweringRefused("weight is not symmetrically quantized")
            return self.attribute(values), self.attribute(scales).to(torch.float64)
        if node.target in DEQUANTIZE:
            values, scale, zero_point = node.args[:3]
            if isinstance(values, Node) and values.op == "get_attr" and zero_point == 0:
                return self.attribute(values), torch.tensor([float(scale)], dtype=torch.float64)
        raise LoweringRefused("weight is not a quantized constant")

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

    # -- values ---------------------------------------------------------------------
    def quantize_boundary(self, source: Node, scale: float, zero_point: int) -> QValue:
        """Quantize a float tensor; 4-D tensors become NHWC here, at the boundary."""
        shape = logical_shape(source)
        nhwc = len(shape) == 4
        node = self.call(
            "quantize", self.float_of(source), scale, zero_point, NCHW_TO_NHWC if nhwc else []
        )
        self.records.append(
            OpRecord(
                node.name,
                "quantize",
                "cortex_m_nn::quantize",
                "(boundary, float → int8)",
                output_node=node.name,
            )
        )
        return QValue(node, scale, zero_point, shape, nhwc)

    def requantize(self, source: object, scale: float, zero_point: int) -> QValue | None:
        """``quantize(dequantize(v))`` into other qparams (convert_pt2e's join of two shared
        quantizations) as int8 → int8: ``cortex_m_nn::mul`` by a one-byte constant 1.
        None when ``source`` is no dequantized int8 value."""
        if not isinstance(source, Node) or source.target not in DEQUANTIZE:
            return None
        if source.args[0] not in self.quantized:
            return None
        value = self.input_value(source)
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
            OpRecord(
                out.name,
                "requantize",
                "cortex_m_nn::mul",
                "arm_elementwise_mul_s8",
                output_node=out.name,
            )
        )
        return QValue(out, scale, zero_point, value.shape, value.nhwc)

    def float_of(self, node: object) -> object:
        """The lowered graph's float value for a node of the source graph."""
        if not isinstance(node, Node):
            return node
        if node in self.floats:
            return self.floats[node]
        if node.target in DEQUANTIZE and node.args[0] in self.pending:
            for skipped in self.pending.pop(node.args[0]):
                if skipped in self.read_through_records:
                    self.records.remove(self.read_through_records.pop(skipped))
                self.visit(skipped)
        if node.target in DEQUANTIZE and node.args[0] in self.quantized:
            value = self.quantized[node.args[0]]
            if value.node not in self._dequantized:
                order = channels_last_order(len(value.shape)) if value.nhwc else []
                permutation = [order.index(d) for d in range(len(order))]
                self._dequantized[value.node] = self.call(
                    "dequantize", value.node, value.scale, value.zero_point, permutation
                )
                name = self._dequantized[value.node].name
                self.float_sources[name] = (node.name, value.scale)
                self.records.append(
                    OpRecord(
                        name,
                        "dequantize",
                        "cortex_m_nn::dequantize",
                        "(boundary, int8 → float)",
                        output_node=name,
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
        """The MACs ``node`` computes in fp32 (see ``cortex_m_nn.macs``)."""
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


@dataclass
class LoweringResult:
    graph_module: GraphModule
    records: list[OpRecord]
    #: lowered node name → (name of the PT2E quantize node it computes, stored channels-last)
    value_sources: dict[str, tuple[str, bool]] = field(default_factory=dict)
    #: lowered dequantize node name → (the PT2E dequantize node it computes, its scale)
    float_sources: dict[str, tuple[str, float]] = field(default_factory=dict)

    @property
    def fallbacks(self) -> list[OpRecord]:
        return [r for r in self.records if not r.lowered]


def _pattern_of(quantize: Node) -> tuple[Node, Node | None] | None:
    """The (op, activation) a quantize node closes, when that op has a rule."""
    source = quantize.args[0]
    if not isinstance(source, Node) or source.op != "call_function":
        return None
    activation = None
    if is_activation(source) and isinstance(source.args[0], Node):
        producer = source.args[0]
        if len(producer.users) == 1 and producer.target in RULES:
            activation, source = source, producer
    if source.target not in RULES:
        return None
    if activation is not None and len(activation.users) != 1:
        return None
    if activation is None and len(source.users) != 1:
        return None
    return source, activation


def _read_through(patterns: dict[Node, tuple]) -> dict[Node, list[Node]]:
    """Producers every user reads through: quantize node → [its op (if any), itself]."""
    readers: dict[Node, set[Node]] = {}
    for op, _ in patterns.values():
        hook = READS_THROUGH.get(op.target)
        for producer in hook(op) if hook else []:
            readers.setdefault(producer, set()).add(op)
    skipped = {}
    for producer, ops in readers.items():
        uses = [user for dq in producer.users for user in dq.users]
        if not all(dq.target in DEQUANTIZE for dq in producer.users) or set(uses) - ops:
            continue
        source = producer.args[0]
        if isinstance(source, Node) and source.op == "call_function" and len(source.users) == 1:
            skipped[producer] = [source, producer]
        else:
            skipped[producer] = [producer]
    return skipped


def lower(converted: GraphModule, target: Target) -> LoweringResult:
    """Lower every pattern a rule supports; everything else stays float (see ``fallbacks``)."""
    from cortex_m_nn.passes import rules  # noqa: F401  (registers the rules)

    context = LoweringContext(converted, target)
    patterns = {}
    for node in converted.graph.nodes:
        if node.op == "call_function" and node.target in QUANTIZE:
            found = _pattern_of(node)
            if found is not None:
                patterns[node] = found
    deferred = {n for op, act in patterns.values() for n in (op, act) if n is not None}
    context.pending = _read_through(patterns)
    skipped = {n for nodes in context.pending.values() for n in nodes}
    records = context.records

    def visit(node: Node) -> None:
        if node.op == "placeholder":
            copy = context.graph.placeholder(node.name)
            copy.meta = dict(node.meta)
            context.floats[node] = copy
        elif node.op == "output":
            context.graph.output(torch.fx.node.map_arg(node.args[0], context.float_of))
        elif node.op in ("get_attr", "call_module") or node in deferred:
            return  # constants are read by rules; _guards_fn is export bookkeeping
        elif node.target in DEQUANTIZE or node.target in DEQUANTIZE_PER_CHANNEL:
            return  # materialised on demand by float_of
        elif node.target in QUANTIZE:
            scale, zero_point = qparams_of(node)
            found = patterns.get(node)
            if found is None:
                value = context.requantize(node.args[0], scale, zero_point)
                if value is None:
                    value = context.quantize_boundary(node.args[0], scale, zero_point)
                context.quantized[node] = value
                return
            op, activation = found
            pattern = Pattern(op, activation, scale, zero_point, logical_shape(op))
            record = OpRecord(
                op.name,
                op_name(op.target),
                None,
                location=source_location(op),
                source_line=source_line(op),
            )
            try:
                lowered = RULES[op.target](context, pattern)
            except LoweringRefused as refusal:
                record.fallback_reason = str(refusal)
                record.macs = context.float_macs(op)
                for float_node in (op, activation):
                    if float_node is not None:
                        context.copy_float(float_node)
                context.quantized[node] = context.quantize_boundary(
                    activation or op, scale, zero_point
                )
            else:
                record.kernel = (
                    "view (no kernel)"
                    if lowered.kernel == "view"
                    else f"cortex_m_nn::{lowered.kernel}"
                )
                record.cmsis_function = lowered.cmsis_function
                record.macs = lowered.macs
                record.weight_bytes = lowered.weight_bytes
                record.output_node = lowered.value.node.name
                context.quantized[node] = lowered.value
            records.append(record)
        elif node.target is operator.getitem:
            context.copy_float(node)  # one output of a float op: no operator of its own
        elif not context.fold(node):
            context.copy_float(node)
            records.append(
                OpRecord(
                    node.name,
                    op_name(node.target),
                    None,
                    macs=context.float_macs(node),
                    fallback_reason=NOT_QUANTIZED,
                    location=source_location(node),
                    source_line=source_line(node),
                )
            )

    context.visit = visit
    for node in converted.graph.nodes:
        if node not in skipped:
            visit(node)
        elif node.target not in QUANTIZE:
            record = OpRecord(
                node.name,
                op_name(node.target),
                "read through (no kernel)",
                "(its consumer reads its input)",
                location=source_location(node),
                source_line=source_line(node),
            )
            context.read_through_records[node] = record
            records.append(record)

    context.graph.eliminate_dead_code()
    alive = {node.name for node in context.graph.nodes}
    for record in records:  # e.g. a transpose a later one composed, a quantize folded again
        if (
            record.kernel
            and record.kernel.startswith("cortex_m_nn::")
            and (record.output_node not in alive)
        ):
            record.kernel, record.cmsis_function = REMOVED, "(a later operator reads its input)"
    module = GraphModule(context.root, context.graph, class_name="LoweredModule")
    sources = {
        value.node.name: (quantize.name, value.nhwc)
        for quantize, value in context.quantized.items()
        if value.node.graph is context.graph and value.node in module.graph.nodes
    }
    return LoweringResult(module, records, sources, context.float_sources)
