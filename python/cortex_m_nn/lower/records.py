"""The report's rows: one :class:`OpRecord` per operator of the model, and where it came from.

The walk fills them in as it lowers; :mod:`cortex_m_nn.lower.hygiene` marks the rows whose
lowered node turned out to be dead code.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from torch.fx import GraphModule, Node

from cortex_m_nn.core.cmsis_nn import Case
from cortex_m_nn.core.graph import op_name, source_line, source_location
from cortex_m_nn.core.refusals import Refusal

#: The report's kernel for an operator whose lowered node turned out to be dead code.
REMOVED = "removed (no kernel)"
#: Why a float op the quantizer left alone stays float.
NOT_QUANTIZED = "not quantized (no cortex_m_nn lowering for this op)"


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
    #: the kind of ``fallback_reason`` (the rewrite advice is looked up by it)
    refusal: Refusal | None = None
    #: how many LSB ``verify`` allows this op against the PT2E reference: None, its standard
    #: bound (``verify.MAX_LSB``), or an approximating kernel's (the int16 softmax's tables)
    allowed_lsb: int | None = None
    #: the dtype case of the CMSIS-NN call a lowered op runs (None: not lowered by a rule)
    case: Case | None = None
    #: where the compiler chose our kernel by the cost model (``plan.costs``): the instructions
    #: it expects of ours and of CMSIS-NN's function, {"ours": n, "cmsis_nn": m}
    expected_instructions: dict[str, int] | None = None

    @property
    def lowered(self) -> bool:
        return self.fallback_reason is None


@dataclass
class LoweringResult:
    graph_module: GraphModule
    records: list[OpRecord]
    #: lowered node name → (name of the PT2E quantize node it computes, stored channels-last)
    value_sources: dict[str, tuple[str, bool]] = field(default_factory=dict)
    #: lowered dequantize node name → (the PT2E dequantize node it computes, its scale)
    float_sources: dict[str, tuple[str, float]] = field(default_factory=dict)
    #: lowered state buffer → (the PT2E graph's buffer it keeps, its layer, the state's scale)
    state_sources: dict[str, tuple[str, int, float]] = field(default_factory=dict)

    @property
    def fallbacks(self) -> list[OpRecord]:
        return [r for r in self.records if not r.lowered]


def boundary(node: Node, source_op: str, kernel: str, function: str) -> OpRecord:
    """The row of an operator the lowering adds itself (a boundary quantize, a requantize)."""
    return OpRecord(node.name, source_op, kernel, function, output_node=node.name)


def of_source(node: Node, kernel: str | None = None, function: str | None = None) -> OpRecord:
    """The row of an operator of the model, with where in the model's code it comes from."""
    return OpRecord(
        node.name,
        op_name(node.target),
        kernel,
        function,
        location=source_location(node),
        source_line=source_line(node),
    )
