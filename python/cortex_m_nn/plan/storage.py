"""Who owns which bytes in an executorch-dialect graph (after ``to_executorch``, or as
ExecuTorch's memory planner sees it): each ``alloc`` and planned graph input is a storage;
``view`` and ``getitem`` nodes and out-variant calls name the storage they alias. Read by the
memory plan (lifetimes, ``memory_plan``) and by the overlaps (``overlap``).
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass, field
from typing import Any

import torch
from executorch.exir import memory
from torch.fx import GraphModule, Node


def _out_arguments(node: Node) -> list[str]:
    """Names of an out-variant call's written (``Tensor(a!)``) keyword arguments, in order."""
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return []
    return [
        a.name
        for a in schema.arguments
        if a.kwarg_only and a.alias_info is not None and a.alias_info.is_write
    ]


def _planned(node: Node) -> bool:
    """A placeholder the memory plan places (a graph input or a state, not a constant): the
    program's planning pass plans graph inputs, so also while it runs (no ``mem_id`` yet)."""
    spec = node.meta.get("spec")
    if spec is None:
        return False
    return is_state(node) or not getattr(spec, "const", True)


def is_state(node: Node) -> bool:
    """A mutable buffer with its initial value (an SVDF state): planned, live for the whole
    program (``execution_graph``); the emitter marks its spec const for the initial value."""
    return node.op == "placeholder" and bool(node.meta.get("et_init_buffer"))


@dataclass(frozen=True)
class Part:
    """One tensor of an ``alloc`` of several (the outputs of e.g. a float ``split``)."""

    alloc: Node
    index: int

    @property
    def name(self) -> str:
        return f"{self.alloc.name}_{self.index}"

    @property
    def spec(self) -> Any:
        return self.alloc.meta["spec"][self.index]

    @property
    def nbytes(self) -> int:
        shape, dtype = self.alloc.args[0][self.index]
        return math.prod(shape) * torch.empty((), dtype=dtype).element_size()


def _is_multiple(node: Node) -> bool:
    return node.target is memory.alloc and isinstance(node.meta.get("spec"), list | tuple)


def nbytes(node: Node | Part) -> int:
    if isinstance(node, Part):
        return node.nbytes
    if node.target is memory.alloc:
        shape, dtype = node.args[0]
        return math.prod(shape) * torch.empty((), dtype=dtype).element_size()
    value = node.meta["val"]
    return value.numel() * value.element_size()


def offset(storage: Node | Part) -> int:
    spec = storage.spec if isinstance(storage, Part) else storage.meta["spec"]
    return int(spec.mem_offset)


def operator_name(node: Node) -> str:
    """``cortex_m_nn::conv2d`` for ``cortex_m_nn.conv2d.out``."""
    name = str(getattr(node.target, "_name", None) or node.target)
    for suffix in (".out", ".default"):
        name = name.removesuffix(suffix)
    return name.replace(".", "::", 1) if "::" not in name else name


def nodes_in(value: object) -> list[Node]:
    found: list[Node] = []
    torch.fx.node.map_arg(value, found.append)
    return found


@dataclass
class Storage:
    """Who owns which bytes in an executorch-dialect graph, and the kernel calls in order."""

    #: node → the storage it names (an alloc, a planned input, or one part of an alloc)
    owner: dict[Node, Node | Part] = field(default_factory=dict)
    #: storage → "input", "activation", "scratch" or "output"
    kind: dict[Node | Part, str] = field(default_factory=dict)
    #: an alloc of several tensors → one storage each (a call writing it writes them all)
    parts: dict[Node, list[Part]] = field(default_factory=dict)
    calls: list[Node] = field(default_factory=list)

    def of(self, used: Node) -> list[Node | Part]:
        """The storages a node reads or writes."""
        return self.parts.get(used) or ([self.owner[used]] if used in self.owner else [])

    def add_call(self, node: Node) -> None:
        self.calls.append(node)
        outs = _out_arguments(node)
        for name in outs:
            if name == "scratch" and node.kwargs.get(name) in self.owner:
                self.kind[self.owner[node.kwargs[name]]] = "scratch"
        if len(outs) == 1 and node.kwargs.get(outs[0]) in self.owner:
            self.owner[node] = self.owner[node.kwargs[outs[0]]]


def _backed(graph_module: GraphModule) -> dict[Node, Node]:
    """Each storage-backed ``alloc`` (a ``window``, an ``assemble``'s strip: ``plan.patch``)
    → the alloc or planned input whose storage holds it (its root ``storage_base``)."""
    holder = {
        id(n.meta["spec"]): n
        for n in graph_module.graph.nodes
        if n.op == "placeholder" or (n.target is memory.alloc and not _is_multiple(n))
    }
    found = {}
    for node in [n for n in holder.values() if n.op != "placeholder"]:
        base = getattr(node.meta["spec"], "storage_base", None)
        while base is not None and base.storage_base is not None:
            base = base.storage_base
        if base is not None:
            found[node] = holder[id(base)]
    return found


def read_storage(graph_module: GraphModule) -> Storage:
    """Storage owners are the ``alloc`` nodes and the planned graph inputs; ``view`` and
    ``getitem`` nodes, out-variant calls and storage-backed allocs are aliases of the storage
    they name."""
    found = Storage()
    owner, kind, parts = found.owner, found.kind, found.parts
    backed = _backed(graph_module)
    for node in graph_module.graph.nodes:
        if node in backed:
            owner[node] = backed[node]
        elif node.op == "placeholder" and _planned(node):
            owner[node], kind[node] = node, "state" if is_state(node) else "input"
        elif node.op != "call_function":
            continue
        elif _is_multiple(node):
            parts[node] = [Part(node, i) for i in range(len(node.meta["spec"]))]
            kind.update(dict.fromkeys(parts[node], "activation"))
        elif node.target is operator.getitem and node.args[0] in parts:
            owner[node] = parts[node.args[0]][node.args[1]]
        elif node.target is memory.alloc:
            owner[node], kind[node] = node, "activation"
        elif node.target is memory.view and node.args[0] in owner:
            owner[node] = owner[node.args[0]]
        elif node.target is operator.getitem:
            source, index = node.args
            outs = _out_arguments(source) if isinstance(source, Node) else []
            if index < len(outs) and source.kwargs.get(outs[index]) in owner:
                owner[node] = owner[source.kwargs[outs[index]]]
        else:
            found.add_call(node)
    return found
