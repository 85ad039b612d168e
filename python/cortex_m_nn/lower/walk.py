"""The walk: visit the converted graph once, in order, and lower each node.

A ``quantize`` node closing a pattern runs the op's rule (``registry.RULES``); a rule that
refuses leaves the op in float between a ``dequantize`` and a ``quantize``, reported as a
fallback. Other quantize nodes are the graph's input boundary or a requantization; float ops
the quantizer left alone are copied (or folded when they compute constants only).

Producers every reader reads through (``patterns.find_read_through``) are skipped; the walk
itself lowers one after all, just before a reader that fell back copies its float inputs.
"""

from __future__ import annotations

import operator

import torch
from torch.fx import Node

from cortex_m_nn.core.families import DEQUANTIZE, DEQUANTIZE_PER_CHANNEL, QUANTIZE
from cortex_m_nn.core.precision import has_int16_case
from cortex_m_nn.core.refusals import LoweringRefused, Refusal
from cortex_m_nn.frontend.states import is_state_write, only_kept
from cortex_m_nn.lower.context import LoweringContext
from cortex_m_nn.lower.graph_values import dtype_of, logical_shape, qparams_of
from cortex_m_nn.lower.patterns import Plan
from cortex_m_nn.lower.records import NOT_QUANTIZED, OpRecord, of_source
from cortex_m_nn.lower.registry import RULES, WHY_FLOAT, Lowered, Pattern

#: The report's row of an op a consumer reads through.
READ_THROUGH = "read through (no kernel)", "(its consumer reads its input)"


class Walk:
    """One pass over the converted graph, building ``context.graph``."""

    def __init__(self, context: LoweringContext, plan: Plan) -> None:
        self.context = context
        self.patterns = plan.patterns
        self.in_patterns = plan.in_patterns
        self.skipped = plan.skipped
        #: skipped producers not lowered (yet): quantize node → its source nodes, in order
        self.pending = dict(plan.read_through)
        #: report rows of the ops read through (removed again should one be lowered after all)
        self.read_through_records: dict[Node, OpRecord] = {}

    def run(self, nodes: list[Node]) -> None:
        for node in nodes:
            if node not in self.skipped:
                self.visit(node)
            elif node.target not in QUANTIZE:
                record = of_source(node, *READ_THROUGH)
                self.read_through_records[node] = record
                self.context.records.append(record)

    def visit(self, node: Node) -> None:
        context = self.context
        if node.op == "placeholder":
            copy = context.graph.placeholder(node.name)
            copy.meta = dict(node.meta)
            context.floats[node] = copy
        elif node.op == "output":
            context.graph.output(torch.fx.node.map_arg(node.args[0], context.float_of))
        elif node.op in ("get_attr", "call_module") or node in self.in_patterns:
            return  # constants are read by rules; _guards_fn is export bookkeeping
        elif node.target in DEQUANTIZE or node.target in DEQUANTIZE_PER_CHANNEL:
            return  # materialised on demand by float_of
        elif node.target in QUANTIZE:
            self.quantize(node)
        elif node.target is operator.getitem:
            context.copy_float(node)  # one output of a float op: no operator of its own
        elif is_state_write(node) and node.args[1].args[0] in self.pending:
            return  # its SVDF was lowered: cortex_m_nn::svdf updates the state in place
        elif is_state_write(node) and node.args[0] in context.kept_states:
            return  # its GRU or LSTM was lowered: the kernel keeps the state itself
        elif only_kept(node, context.kept_states):
            return  # an LSTM's c_n, kept by cortex_m_nn::lstm (computed only to be kept)
        elif not context.fold(node):
            context.copy_float(node)
            record = of_source(node)
            record.macs = context.float_macs(node)
            explain = WHY_FLOAT.get(node.target)
            reason = (explain(node) if explain else None) or NOT_QUANTIZED
            record.fallback_reason, record.refusal = reason, Refusal.NOT_QUANTIZED
            context.records.append(record)

    def quantize(self, node: Node) -> None:
        """A quantize node: a pattern's rule, else a requantization or the input boundary."""
        context = self.context
        scale, zero_point = qparams_of(node)
        dtype = dtype_of(node)
        found = self.patterns.get(node)
        if found is None:
            value = context.requantize(node.args[0], scale, zero_point, dtype)
            if value is None:
                value = context.quantize_boundary(node.args[0], scale, zero_point, dtype)
            context.quantized[node] = value
            return
        op, activation = found
        pattern = Pattern(op, activation, scale, zero_point, logical_shape(op), dtype)
        record = of_source(op)
        try:
            if dtype is not torch.int8 and not has_int16_case(op.target):
                raise LoweringRefused(Refusal.NOT_INT8, f"this op has no case for {dtype} output")
            lowered = RULES[op.target](context, pattern)
        except LoweringRefused as refusal:
            record.fallback_reason, record.refusal = str(refusal), refusal.kind
            record.macs = context.float_macs(op)
            start = len(context.records)
            self.fall_back(node, pattern)
            for pulled in context.records[start:]:  # producers it read through: its reason
                if pulled.refusal is Refusal.NOT_QUANTIZED:
                    pulled.fallback_reason, pulled.refusal = str(refusal), refusal.kind
        else:
            fill_lowered(record, lowered)
            context.quantized[node] = lowered.value
        context.records.append(record)

    def fall_back(self, quantize: Node, pattern: Pattern) -> None:
        """Keep a refused pattern's op (and activation) in float, quantized again after."""
        for float_node in (pattern.op, pattern.activation):
            if float_node is not None:
                self.lower_read_through(float_node)
                self.context.copy_float(float_node)
        self.context.quantized[quantize] = self.context.quantize_boundary(
            pattern.activation or pattern.op, pattern.scale, pattern.zero_point, pattern.dtype
        )

    def lower_read_through(self, node: Node) -> None:
        """Lower the skipped producers ``node`` reads, as the float copy of ``node`` meets its
        inputs: each input's float value in argument order, a producer just before it."""

        def materialise(argument: Node) -> Node:
            if argument.target in DEQUANTIZE and argument.args[0] in self.pending:
                for skipped in self.pending.pop(argument.args[0]):
                    if skipped in self.read_through_records:
                        self.context.records.remove(self.read_through_records.pop(skipped))
                    self.visit(skipped)
            self.context.float_of(argument)
            return argument

        torch.fx.node.map_arg((node.args, node.kwargs), materialise)


def fill_lowered(record: OpRecord, lowered: Lowered) -> None:
    """A lowered op's report row: its kernel, CMSIS-NN function, MACs, weights, output."""
    kernel = lowered.kernel
    record.kernel = "view (no kernel)" if kernel == "view" else f"cortex_m_nn::{kernel}"
    record.cmsis_function = lowered.cmsis_function
    record.macs = lowered.macs
    record.weight_bytes = lowered.weight_bytes
    record.output_node = lowered.value.node.name
    record.allowed_lsb = lowered.allowed_lsb
    record.case = lowered.case


def walk(context: LoweringContext, plan: Plan) -> None:
    """Pass: lower every node of the source graph in order (see :class:`Walk`)."""
    Walk(context, plan).run(list(context.source.graph.nodes))
