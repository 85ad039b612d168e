"""A fully lowered graph straight to ExecuTorch's execution dialect, without re-tracing it.

Serialising through ``torch.export`` → ``to_edge`` → ``to_executorch`` re-traces the lowered
graph three times with fake tensors (export, the ATen → edge passes, the edge → execution
passes): about 1.1 of the 1.4 s it takes to serialise DS-CNN. A fully lowered graph needs
none of it: it holds only ``cortex_m_nn`` operators (each with an out variant), ``getitem``
and ``aten.view``, and its nodes already carry their fake values. :func:`execution_program`
writes the graph ``to_executorch`` would hand its memory planner — every constant a
placeholder (``b_<name>``, the buffer torch.export lifts), each call's outputs ``memory.alloc``
nodes followed by the call's out variant, each ``view`` a ``memory.view`` sharing its base's
storage, every node's ``TensorSpec`` as ``SpecPropPass`` makes it — and :func:`serialise` runs
the same last steps as ``to_executorch``: ExecuTorch's memory planning pass (our algorithms)
and its emitter and serialiser, storing interchangeable values once (``shared_values``).
Without that sharing the ``.pte`` is byte-identical with the re-traced path's, and with it the
same program as the re-traced one's with its values shared
(``tests/python/test_execution_graph.py``); a graph outside this subset (a float fallback, a
view returned as an output) takes that path (:func:`unsupported`).
"""

from __future__ import annotations

import operator
import warnings
from collections.abc import Sequence
from typing import Any

import torch
from executorch.exir import ExecutorchBackendConfig, memory
from executorch.exir._serialize._program import PTEFile, serialize_pte_binary
from executorch.exir.emit import emit_program
from executorch.exir.passes import MemoryPlanningPass
from executorch.exir.passes.replace_view_copy_with_view_pass import _ViewSpec
from executorch.exir.tensor import TensorSpec
from torch._export.verifier import TrainingIRVerifier
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.export import ExportedProgram
from torch.export.exported_program import ModuleCallEntry, ModuleCallSignature
from torch.export.graph_signature import (
    ExportGraphSignature,
    InputKind,
    InputSpec,
    OutputKind,
    OutputSpec,
    TensorArgument,
)
from torch.fx import Graph, GraphModule, Node
from torch.fx.passes.fake_tensor_prop import FakeTensorProp
from torch.utils import _pytree as pytree

from cortex_m_nn.ops.library import NAMESPACE
from cortex_m_nn.ops.svdf import STATE_PREFIX
from cortex_m_nn.ops.window import window_offset
from cortex_m_nn.serialize import shared_values

VIEW = torch.ops.aten.view.default
WINDOW = torch.ops.cortex_m_nn.window.out
ASSEMBLE = torch.ops.cortex_m_nn.assemble.out


def _is_call(node: Node) -> bool:
    target = node.target
    return isinstance(target, torch._ops.OpOverload) and target.namespace == NAMESPACE


def unsupported(graph_module: GraphModule) -> str | None:
    """Why ``graph_module`` must be re-traced to serialise, or None when it need not be."""
    buffers = dict(graph_module.named_buffers())
    if type(graph_module.graph._codegen) is not torch.fx.graph.CodeGen:
        return "the graph's inputs or outputs are a pytree"
    for node in graph_module.graph.nodes:
        if node.op == "get_attr" and node.target not in buffers:
            return f"{node.name} is not a buffer"
        if node.op == "get_attr" and not buffers[node.target].is_contiguous():
            return f"{node.name} is not contiguous"
        if node.op in ("call_module", "call_method"):
            return f"{node.name} is a {node.op}"
        if _is_call(node) and not hasattr(node.target.overloadpacket, "out"):
            return f"{node.name} calls {node.target}, which has no out variant"
        if node.op != "call_function" or _is_call(node) or node.target is operator.getitem:
            continue
        if node.target is not VIEW:
            return f"{node.name} calls {node.target}, not a cortex_m_nn operator"
        if any(user.op == "output" for user in node.users):
            return f"{node.name} is a view returned as an output"
    outputs = pytree.tree_leaves(graph_module.graph.output_node().args[0])
    computed = [o for o in outputs if isinstance(o, Node) and o.op == "call_function"]
    if len(set(computed)) != len(outputs):
        return "an output is not a tensor the graph computes, or is returned twice"
    return None


def _spec(value: Any) -> Any:
    """``SpecPropPass``'s spec of a node's fake value (a TensorSpec, or a tuple of them)."""
    return pytree.tree_map(
        lambda v: TensorSpec.from_tensor(v) if isinstance(v, torch.Tensor) else None, value
    )


def propagate_values(module: GraphModule, inputs: Sequence[torch.Tensor]) -> None:
    """Every node's fake value (``meta["val"]``), as tracing the graph would give it."""
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        fakes = [mode.from_tensor(t, static_shapes=True) for t in inputs]
        FakeTensorProp(module, mode).propagate_dont_convert_inputs(*fakes)


def _out_names(target: torch._ops.OpOverload) -> list[str]:
    out = target.overloadpacket.out
    return [a.name for a in out._schema.arguments if a.is_out]


class _Builder:
    """The lowered graph with its constants lifted to placeholders (as torch.export does)."""

    def __init__(self, source: GraphModule) -> None:
        self.source = source
        self.graph = Graph()
        self.env: dict[Node, Node] = {}
        self.state: dict[str, torch.Tensor] = {}
        self.input_specs: list[InputSpec] = []
        #: (placeholder, buffer name) of each state the calls update in place
        self.states: list[tuple[Node, str]] = []

    def placeholders(self) -> None:
        """Constants first (torch.export's buffer order, those used), then the user inputs."""
        nodes = list(self.source.graph.nodes)
        used = {n.target for n in nodes if n.op == "get_attr"}
        for name, tensor in self.source.named_buffers():
            if name not in used:
                continue
            placeholder = self.graph.placeholder(f"b_{name.replace('.', '_')}")
            mutable = name.startswith(STATE_PREFIX)
            placeholder.meta["spec"] = TensorSpec.from_tensor(tensor, const=not mutable)
            if mutable:  # planned for the program's lifetime, its initial value loaded once
                placeholder.meta["et_init_buffer"] = True
                self.states.append((placeholder, name))
            self.state[name] = tensor
            self.input_specs.append(
                InputSpec(InputKind.BUFFER, TensorArgument(placeholder.name), name, True)
            )
            for node in nodes:
                if node.op == "get_attr" and node.target == name:
                    self.env[node] = placeholder
        for node in nodes:
            if node.op == "placeholder":
                placeholder = self.graph.placeholder(node.name)
                self.input_specs.append(
                    InputSpec(InputKind.USER_INPUT, TensorArgument(placeholder.name), None)
                )
                self.env[node] = placeholder

    def program(self, example_inputs: Sequence[torch.Tensor]) -> ExportedProgram:
        """The lifted graph as an ATen-dialect ExportedProgram (torch.export's checks)."""
        self.placeholders()
        for node in self.source.graph.nodes:
            if node.op not in ("placeholder", "get_attr"):
                self.env[node] = self.graph.node_copy(node, self.env.__getitem__)
        module = GraphModule(torch.nn.Module(), self.graph)
        propagate_values(module, [*self.state.values(), *example_inputs])
        for node in self.graph.find_nodes(op="placeholder"):
            node.meta.setdefault("spec", _spec(node.meta["val"]))  # the user inputs
        output = self.graph.output_node()
        in_spec = pytree.tree_flatten((tuple(example_inputs), {}))[1]
        out_spec = pytree.tree_flatten(output.args[0])[1]
        outputs = [
            OutputSpec(OutputKind.USER_OUTPUT, TensorArgument(n.name), None)
            for n in pytree.tree_leaves(output.args[0])
        ]
        if self.states:  # buffer mutations come first, as torch.export lists them
            mutations = [
                OutputSpec(OutputKind.BUFFER_MUTATION, TensorArgument(p.name), name)
                for p, name in self.states
            ]
            leaves = [p for p, _ in self.states] + pytree.tree_leaves(output.args[0])
            output.args = (tuple(leaves),)
            outputs = mutations + outputs
        call = ModuleCallSignature(inputs=[], outputs=[], in_spec=in_spec, out_spec=out_spec)
        return ExportedProgram(
            root=module,
            graph=module.graph,
            graph_signature=ExportGraphSignature(self.input_specs, outputs),
            state_dict=self.state,
            range_constraints={},
            module_call_graph=[ModuleCallEntry("", call)],
            # an operator that may update a state in place (svdf, gru) is no functional ATen
            # op: only the training dialect's verifier admits it
            verifiers=[TrainingIRVerifier] if self.states or _writes(module) else None,
        )


def _writes(module: GraphModule) -> bool:
    """Whether a call's schema may write an argument (a GRU's optional kept state, even where
    the call passes none)."""
    for node in module.graph.nodes:
        schema = getattr(node.target, "_schema", None) if node.op == "call_function" else None
        arguments = schema.arguments if schema is not None else []
        if any(a.alias_info is not None and a.alias_info.is_write and not a.kwarg_only
               for a in arguments):  # fmt: skip
            return True
    return False


def _rename(graph: Graph, node: Node, name: str) -> None:
    """``node`` named ``name`` as ExecuTorch's passes name it (``_1`` … when taken)."""
    with graph.inserting_before(node):
        new = graph.create_node("call_function", node.target, node.args, node.kwargs, name=name)
    new.meta.update(node.meta)
    node.replace_all_uses_with(new)
    graph.erase_node(node)


def _to_out_variant(graph: Graph, node: Node) -> None:
    """Allocs for a call's outputs before it; the call becomes its out variant."""
    value = node.meta["val"]
    values = list(value) if isinstance(value, list | tuple) else [value]
    kwargs = dict(node.kwargs)
    with graph.inserting_before(node):
        for name, each in zip(_out_names(node.target), values, strict=True):
            kwargs[name] = graph.call_function(memory.alloc, ((tuple(each.shape), each.dtype),))
            kwargs[name].meta["val"] = each
    node.target, node.kwargs = node.target.overloadpacket.out, kwargs
    node.meta["spec"] = _spec(value)


def _edge_names(graph: Graph) -> None:
    """Calls and views named as ``to_edge`` names them (``cortex_m_nn_conv2d_default``,
    ``aten_view_copy_default_1``), in graph order, before anything is removed."""
    for node in [n for n in graph.nodes if n.op == "call_function"]:
        if _is_call(node):
            name = f"{NAMESPACE}_{node.target.__name__.replace('.', '_')}"
        elif node.target is VIEW:
            name = "aten_view_copy_default"
        else:
            continue
        _rename(graph, node, name)


def _stored(node: Node) -> Node:
    """The node whose spec holds ``node``'s bytes (a view's base, which is planned)."""
    while node.target is memory.view:
        node = node.args[0]
    return node


def _share_storage(node: Node) -> None:
    """A ``window`` planned inside its input, an ``assemble``'s parts inside its output
    (ExecuTorch's ``storage_base``, at the rows' byte offset; ``plan.patch``). A part that is
    a view (an element-wise call's result, flattened) is its base."""
    if node.target is WINDOW:
        base, row = node.args[0], node.args[1]
        node.meta["spec"].storage_base = _stored(base).meta["spec"]
        node.meta["spec"].storage_base_offset = window_offset(
            tuple(base.meta["val"].shape), row, base.meta["val"].element_size()
        )
    elif node.target is ASSEMBLE:
        offset = 0
        for part in node.args[0]:
            _stored(part).meta["spec"].storage_base = node.meta["spec"]
            _stored(part).meta["spec"].storage_base_offset = offset
            offset += part.meta["val"].nbytes


def to_execution_dialect(program: ExportedProgram) -> ExportedProgram:
    """In place, what ``to_executorch``'s passes make of a fully lowered graph: out variants
    writing allocs, views sharing their base's storage, every tensor's spec."""
    graph = program.graph_module.graph
    _edge_names(graph)
    for node in graph.find_nodes(op="call_function", target=VIEW):
        base = node.args[0]
        if base.target is VIEW:  # a view of a view: of the first tensor that is not a view
            node.args = (base.args[0], *node.args[1:])
    graph.eliminate_dead_code()  # the views that were only viewed again
    for node in list(graph.nodes):
        if node.op == "call_function" and _is_call(node):
            _to_out_variant(graph, node)
            _share_storage(node)
        elif node.target is operator.getitem:
            source, index = node.args
            node.meta["spec"] = source.meta["spec"][index]
        elif node.target is VIEW:
            node.target = memory.view
            node.meta["spec"] = _ViewSpec(node.args[0].meta["spec"], node.meta["val"].shape)
        elif node.op == "output":
            node.meta["spec"] = pytree.tree_map(lambda n: n.meta["spec"], node.args[0])
    program.graph_module.recompile()
    return program


def execution_program(
    graph_module: GraphModule, example_inputs: Sequence[torch.Tensor]
) -> ExportedProgram:
    """The unplanned execution-dialect program of a graph :func:`unsupported` accepts."""
    return to_execution_dialect(_Builder(graph_module).program(example_inputs))


def serialise(
    program: ExportedProgram,
    constant_methods: dict[str, Any],
    planning: MemoryPlanningPass,
    share: bool = True,
) -> bytes:
    """What ``to_executorch`` does after its passes — plan memory (in place), emit,
    serialise — with interchangeable values stored once (``shared_values``) unless
    ``share`` is false (then the bytes are ``to_executorch``'s own)."""
    planning.run(program.graph_module, program.graph_signature)
    with warnings.catch_warnings():  # states are planned with their initial value (et_init_buffer)
        warnings.filterwarnings("ignore", "Mutation on a buffer", UserWarning)
        emitted = emit_program({"forward": program}, False, constant_methods)
    plans = emitted.program.execution_plan
    if share:
        plans[0] = shared_values.share_values(plans[0])
    config = ExecutorchBackendConfig(memory_planning_pass=planning)
    pte = serialize_pte_binary(
        PTEFile(program=emitted.program, mutable_data=emitted.mutable_data),
        extract_delegate_segments=config.extract_delegate_segments,
        segment_alignment=config.segment_alignment,
        constant_tensor_alignment=config.constant_tensor_alignment,
        delegate_alignment=config.delegate_alignment,
    )
    return bytes(pte)
