"""The passes before the walk: which ops close a pattern, and which producers are read through.

Both look at the converted (PT2E) graph only; neither builds anything.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torch.fx import GraphModule, Node

from cortex_m_nn.core.families import DEQUANTIZE, MATMULS, QUANTIZE
from cortex_m_nn.core.graph import positive_scale, scaled_product
from cortex_m_nn.frontend.states import is_state_write
from cortex_m_nn.lower.activation import is_activation
from cortex_m_nn.lower.registry import READS_THROUGH, RULES

#: quantize node → (the op it closes, the activation fused between them — or, after a batch
#: matmul, the positive scale its requantization applies)
Patterns = dict[Node, tuple[Node, Node | None]]


@dataclass
class Plan:
    """What the walk needs to know before it starts."""

    #: each ``quantize`` node closing a pattern a rule lowers → (op, activation)
    patterns: Patterns = field(default_factory=dict)
    #: skipped producers (quantize node → [its op (if any), itself]): every user reads
    #: through them; they are lowered only should such a user fall back to float
    read_through: dict[Node, list[Node]] = field(default_factory=dict)

    @property
    def in_patterns(self) -> set[Node]:
        """Ops and activations lowered with the quantize closing them, not on their own."""
        return {n for op, act in self.patterns.values() for n in (op, act) if n is not None}

    @property
    def skipped(self) -> set[Node]:
        return {n for nodes in self.read_through.values() for n in nodes}


def pattern_of(quantize: Node) -> tuple[Node, Node | None] | None:
    """The (op, activation) a quantize node closes, when that op has a rule."""
    source = quantize.args[0]
    if not isinstance(source, Node) or source.op != "call_function":
        return None
    activation = None
    if is_activation(source) and isinstance(source.args[0], Node):
        producer = source.args[0]
        if len(producer.users) == 1 and producer.target in RULES:
            activation, source = source, producer
    scale = source if activation is None and positive_scale(source) is not None else None
    if scale is not None:  # a batch matmul's positive scale (quantize/quantizer.py)
        producer = next(a for a in scale.args if isinstance(a, Node))
        if producer.op == "call_function" and producer.target in MATMULS:
            if scaled_product(producer) is scale:
                activation, source = scale, producer
    if source.target not in RULES:
        return None
    if activation is not None and len(activation.users) != 1:
        return None
    if activation is None and len(source.users) != 1:
        return None
    return source, activation


def find_patterns(converted: GraphModule, plan: Plan) -> None:
    """Pass: every ``op [→ activation] → quantize`` a rule lowers, in graph order."""
    for node in converted.graph.nodes:
        if node.op == "call_function" and node.target in QUANTIZE:
            found = pattern_of(node)
            if found is not None:
                plan.patterns[node] = found


def find_read_through(converted: GraphModule, plan: Plan) -> None:
    """Pass: the producers every user reads through (``registry.reads_through``)."""
    readers: dict[Node, set[Node]] = {}
    for op, _ in plan.patterns.values():
        hook = READS_THROUGH.get(op.target)
        for producer in hook(op) if hook else []:
            readers.setdefault(producer, set()).add(op)
    for producer, ops in readers.items():
        uses = [u for dq in producer.users for u in dq.users if not is_state_write(u)]
        if not all(dq.target in DEQUANTIZE for dq in producer.users) or set(uses) - ops:
            continue
        source = producer.args[0]
        if isinstance(source, Node) and source.op == "call_function" and len(source.users) == 1:
            plan.read_through[producer] = [source, producer]
        else:
            plan.read_through[producer] = [producer]
