"""The memory plan of ``forward``: each planned tensor's lifetime and arena offset, the
live-tensor lower bound, and the constants by kind.

ExecuTorch's memory planner places every non-constant tensor (inputs, activations, the
CMSIS-NN scratch buffers our scratch operators return as a second output, outputs) in one
arena. This module reads the result back from the executorch-dialect graph and computes the
lifetimes itself, from the order of the kernel calls, so that it can check the plan (no two
tensors live at once share a byte) and bound it from below: at every kernel call the tensors
alive then must all be in memory, so no plan can be smaller than the largest such sum.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import torch
from torch.export import ExportedProgram
from torch.fx import GraphModule, Node

from cortex_m_nn.core.target import Isa
from cortex_m_nn.plan import overlap
from cortex_m_nn.plan.storage import Part, nbytes, nodes_in, offset, operator_name, read_storage

#: ExecuTorch aligns every planned tensor to 16 bytes (``executorch.exir.tensor.ALIGNMENT``).
ALIGNMENT = 16

KINDS = ("input", "activation", "scratch", "output", "state")
CONSTANT_KINDS = ("weights", "biases", "requantization", "kernel_sums", "other")


def aligned(nbytes: int) -> int:
    return -(-nbytes // ALIGNMENT) * ALIGNMENT


@dataclass(frozen=True)
class PlannedTensor:
    """A planned tensor: ``first``/``last`` are indices of the kernel calls that use it."""

    name: str
    kind: str
    nbytes: int
    offset: int
    first: int
    last: int
    #: the operator that writes it (the first user for an input)
    producer: str = ""

    @property
    def aligned_bytes(self) -> int:
        return aligned(self.nbytes)

    def live_at(self, index: int) -> bool:
        return self.first <= index <= self.last


@dataclass
class MemoryPlan:
    """The planned tensors of ``forward`` in kernel-call order, and the planned arena size."""

    operators: list[str]
    tensors: list[PlannedTensor]
    arena_bytes: int
    constants: dict[str, int] = field(default_factory=dict)
    #: the planning algorithm whose plan the program uses
    planner: str = ""
    #: (output, input) → lead: pairs that may share bytes (``plan.overlap``)
    leads: dict[tuple[str, str], int] = field(default_factory=dict)
    #: the patch-based stage the program runs in strips (``plan.patch.describe``), if any
    stage: dict[str, Any] | None = None
    #: CMSIS-NN function → calls that run it instead of the wrapper's choice (``plan.paths``)
    paths: dict[str, int] = field(default_factory=dict)

    def live(self, index: int) -> list[PlannedTensor]:
        return [t for t in self.tensors if t.live_at(index)]

    def live_bytes(self, index: int) -> int:
        return sum(t.aligned_bytes for t in self.live(index))

    def overlapped_bytes(self, index: int) -> int:
        """The bytes live at kernel call ``index`` less what each output there may share with
        one consumed input (``leads``: the output may start ``lead`` bytes below the input's
        first byte or anywhere lower, so as far inside it as that allows): about what any plan
        needs at that call, whatever it shares elsewhere."""
        live = {t.name: t.aligned_bytes for t in self.live(index)}
        shared: dict[str, int] = {}
        for (out, source), lead in self.leads.items():
            if out in live and source in live:
                start = min(-lead, max(0, live[source] - live[out]))  # from the input's start
                both = max(0, min(start + live[out], live[source]) - max(start, 0))
                shared[out] = max(shared.get(out, 0), both)
        return sum(live.values()) - sum(shared.values())

    @property
    def peak_index(self) -> int:
        """The kernel call at which the most (aligned) bytes are live."""
        if not self.operators:
            return 0
        return max(range(len(self.operators)), key=self.live_bytes)

    @property
    def lower_bound_bytes(self) -> int:
        """Max over kernel calls of the live tensors' bytes (each aligned like the planner)."""
        return self.live_bytes(self.peak_index) if self.operators else 0

    @property
    def largest_scratch_bytes(self) -> int:
        return max((t.nbytes for t in self.tensors if t.kind == "scratch"), default=0)

    @property
    def extent_bytes(self) -> int:
        """Highest byte any tensor occupies: the arena the offsets need."""
        return max((t.offset + t.aligned_bytes for t in self.tensors), default=0)

    def shared(self) -> list[tuple[PlannedTensor, PlannedTensor]]:
        """Pairs of tensors live at the same kernel call that share bytes."""
        found = []
        sized = [t for t in self.tensors if t.nbytes > 0]
        for i, a in enumerate(sized):
            for b in sized[i + 1 :]:
                together = a.first <= b.last and b.first <= a.last
                shared = a.offset < b.offset + b.nbytes and b.offset < a.offset + a.nbytes
                if together and shared:
                    found.append((a, b))
        return found

    def overlapping(self) -> list[tuple[str, str]]:
        """The (output, input) pairs that share bytes as their lead allows."""
        found = []
        for a, b in self.shared():
            for out, source in ((a, b), (b, a)):
                lead = self.leads.get((out.name, source.name))
                if lead is not None and out.offset <= source.offset - lead:
                    found.append((out.name, source.name))
        return found

    def conflicts(self) -> list[tuple[str, str]]:
        """Pairs of tensors live at the same kernel call that share bytes other than as an
        overlap's lead allows (must be empty)."""
        allowed = set(self.overlapping())
        return [
            (a.name, b.name)
            for a, b in self.shared()
            if (a.name, b.name) not in allowed and (b.name, a.name) not in allowed
        ]

    def as_dict(self) -> dict[str, Any]:
        peak = self.peak_index
        live = self.live(peak) if self.operators else []
        lower = self.lower_bound_bytes
        return {
            "arena_bytes": self.arena_bytes,
            "planner": self.planner,
            "lower_bound_bytes": lower,
            "overlaps": [
                {"output": out, "input": source, "lead": self.leads[out, source]}
                for out, source in self.overlapping()
            ],
            "arena_over_lower_bound": self.arena_bytes / lower if lower else 1.0,
            "stage": self.stage,
            "paths": dict(self.paths),
            "alignment": ALIGNMENT,
            "peak": {
                "index": peak,
                "operator": self.operators[peak] if self.operators else None,
                "activation_bytes": sum(t.aligned_bytes for t in live if t.kind != "scratch"),
                "scratch_bytes": sum(t.aligned_bytes for t in live if t.kind == "scratch"),
            },
            "largest_scratch_bytes": self.largest_scratch_bytes,
            "scratch_buffers": sum(t.kind == "scratch" for t in self.tensors),
            "state_bytes": sum(t.aligned_bytes for t in self.tensors if t.kind == "state"),
            "states": sum(t.kind == "state" for t in self.tensors),
            "operators": list(self.operators),
            "tensors": [asdict(t) for t in self.tensors],
        }


def analyse(graph_module: GraphModule, arena_bytes: int, isa: Isa | None = None) -> MemoryPlan:
    """The plan of an executorch-dialect graph (after ``to_executorch``), lifetimes computed here;
    with ``isa``, the overlaps its calls allow (``plan.overlap``), which ``conflicts`` accepts.

    A tensor lives from the first kernel call that touches it (the first, for a graph input)
    to the last (the last, for a graph output or a state, which outlives the call).
    """
    storage = read_storage(graph_module)
    kind = storage.kind
    first: dict[Node | Part, int] = {n: 0 for n, k in kind.items() if k in ("input", "state")}
    last: dict[Node | Part, int] = {}
    producer: dict[Node | Part, str] = {}
    for index, call in enumerate(storage.calls):
        for used in nodes_in((call.args, call.kwargs)):
            for owned in storage.of(used):
                first.setdefault(owned, index)
                producer.setdefault(owned, operator_name(call))
                last[owned] = index
    end = len(storage.calls) - 1
    last.update({n: end for n, k in kind.items() if k == "state"})  # kept between calls
    output = next(n for n in graph_module.graph.nodes if n.op == "output")
    for used in nodes_in(output.args):
        for owned in storage.of(used):
            kind[owned] = "output"
            first.setdefault(owned, end)
            last[owned] = end

    tensors = [
        PlannedTensor(
            name=owned.name,
            kind=kind[owned],
            nbytes=nbytes(owned),
            offset=offset(owned),
            first=first[owned],
            last=last.get(owned, first[owned]),
            producer=producer.get(owned, ""),
        )
        for owned in kind
        if owned in first
    ]
    plan = MemoryPlan([operator_name(c) for c in storage.calls], tensors, arena_bytes)
    if isa is not None:
        plan.leads = {
            (o.output.name, o.input.name): o.lead for o in overlap.overlaps(graph_module, isa)
        }
    return plan


# --- constants -------------------------------------------------------------------------------


def constant_kind(argument: str) -> str:
    """The report's kind of constant for an operator argument name."""
    name = argument.lower()
    if "sum" in name:
        return "kernel_sums"
    if "multiplier" in name or "shift" in name:
        return "requantization"
    if "bias" in name:
        return "biases"
    if "weight" in name or "filter" in name or "kernel" in name:
        return "weights"
    return "other"


def _argument_name(user: Node, value: Node) -> str:
    schema = getattr(user.target, "_schema", None)
    if schema is not None:
        for position, argument in enumerate(user.args):
            if argument is value and position < len(schema.arguments):
                return schema.arguments[position].name
    for name, argument in user.kwargs.items():
        if argument is value:
            return name
    return ""


def constants(program: ExportedProgram) -> dict[str, int]:
    """Bytes of the program's constant tensors by kind, each distinct byte string once (as
    ExecuTorch stores them), so the total equals the ``.pte``'s constant data."""
    signature = program.graph_signature
    names = {
        **signature.inputs_to_parameters,
        **signature.inputs_to_buffers,
        **signature.inputs_to_lifted_tensor_constants,
    }
    sizes = dict.fromkeys(CONSTANT_KINDS, 0)
    seen: set[bytes] = set()
    for node in program.graph_module.graph.nodes:
        if node.op != "placeholder" or node.name not in names:
            continue
        fqn = names[node.name]
        tensor = program.state_dict.get(fqn)
        if tensor is None:
            tensor = program.constants[fqn]
        data = tensor.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()
        if data in seen:
            continue
        seen.add(data)
        argument = next((_argument_name(u, node) for u in node.users), "")
        sizes[constant_kind(argument)] += len(data)
    sizes["total"] = sum(sizes[k] for k in CONSTANT_KINDS)
    return sizes
