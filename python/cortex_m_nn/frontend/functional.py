"""Functional form first: the exported graph without mutation or no-op copies, before PT2E.

``torch.export(...).module()`` keeps in-place operators (``out += identity`` is
``aten.add_``, ``nn.ReLU(inplace=True)`` is ``aten.relu_``, ``nn.Dropout(inplace=True)`` is
``aten.dropout_``) and copies or aliases that change nothing (``alias`` — what a slice that
cuts nothing, GhostNet's ``out[:, :self.out_chs]``, exports as —, ``contiguous``, ``clone``,
``detach``, same-dtype ``to``, ``narrow`` of everything). The quantizer annotates and the
rules lower functional operators, so :func:`functional_form` rewrites the graph:

1. each in-place operator becomes its functional overload (the same name without the trailing
   underscore, found from the schema: the first argument is written). The export already
   makes later readers of the mutated tensor read the in-place node; readers of another alias
   holding the same elements (``z = y[:, :]`` or ``y.detach()`` read after ``y.relu_()``) are
   made to read the result as well;
2. a mutation visible elsewhere is refused (``CompileError``: the operator, its source line,
   the rewrite): of a parameter or buffer (state kept between calls), of a tensor another view
   of whose elements is read afterwards (``y[:, :2] = 0``, ``x[:, :4].relu_()`` then ``x``
   read), or of a model input whose value before the write is read too (``y = x * 3`` then
   ``x.relu_()``) or whose new value nothing reads (the write is all the op does). Any other
   write into a model input (``nn.ReLU(inplace=True)`` as the first layer) is made functional
   like the rest: on the device nothing reads the input buffer after the model, so only the
   write-back into the caller's tensor goes, which :attr:`FunctionalForm.notes` says (the
   compile report prints it);
3. the no-ops go (their readers read their input), and with them the metadata checks
   (``_assert_tensor_metadata``) the export leaves beside ``to``;
4. operators the lowering has no rule for become the exactly equivalent ones it has
   (:mod:`cortex_m_nn.frontend.equivalents`: eval-mode dropouts, ``view_as``, ``max.dim``, …),
   and composite ones the operators they are made of (:mod:`cortex_m_nn.frontend.decompose`:
   attention, ``einsum``); operators of constants alone are computed once
   (:mod:`cortex_m_nn.frontend.constants`: a parameter reshaped, sliced or transposed).
"""

from __future__ import annotations

import contextlib
import operator
from collections.abc import Iterable
from dataclasses import dataclass, field

import torch
from torch._guards import detect_fake_mode
from torch._ops import OpOverload
from torch.fx import GraphModule, Node

from cortex_m_nn.core.errors import CompileError
from cortex_m_nn.core.families import aten
from cortex_m_nn.core.graph import module_of, op_name, source_line
from cortex_m_nn.core.refusals import Refusal
from cortex_m_nn.core.rewrites import rewrite_for
from cortex_m_nn.frontend.constants import fold_constants
from cortex_m_nn.frontend.decompose import decompose, mask_softmaxes
from cortex_m_nn.frontend.equivalents import equivalents
from cortex_m_nn.frontend.states import is_state_write, writes_svdf_state

#: Copies and aliases that always hand back their input's elements unchanged.
ALWAYS_SAME = {
    aten.alias.default,
    aten.clone.default,
    aten.contiguous.default,
    aten.detach.default,
    aten.lift_fresh_copy.default,
}
#: Copies and aliases that hand back their input's elements unchanged when the dtype, device
#: and shape stay (see :func:`same_elements`); every ``aten.to`` overload is one.
NO_OPS = ALWAYS_SAME | {
    aten._to_copy.default,
    aten.type_as.default,
    aten.slice.Tensor,
    aten.narrow.default,
    *(getattr(aten.to, name) for name in aten.to.overloads()),
}
#: Views whose result holds the same elements as their input when the shape stays.
SAME_ELEMENTS = NO_OPS | {aten.view.default, aten.reshape.default}
#: In-place operators that change a tensor's shape, not its elements: views of it are unaffected.
METADATA_ONLY = {"t_", "transpose_", "unsqueeze_", "squeeze_", "swapdims_", "swapaxes_", "detach_"}
#: ``GraphModule.meta`` key of the functional form's notes (:attr:`FunctionalForm.notes`).
NOTES = "cortex_m_nn_notes"
#: Readers that look at a tensor's metadata only, never its elements: the checks ``to`` leaves
#: in the export, of metadata the graph has fixed; they go with the copies.
METADATA_READERS = {aten._assert_tensor_metadata.default}


@dataclass
class FunctionalForm:
    """What :func:`functional_form` changed: ATen names, in graph order."""

    functional: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    equivalent: list[str] = field(default_factory=list)
    decomposed: list[str] = field(default_factory=list)
    folded: list[str] = field(default_factory=list)
    #: what the compile report says about the rewrite (a write into a model input dropped)
    notes: list[str] = field(default_factory=list)


def functional_form(graph_module: GraphModule) -> FunctionalForm:
    """Rewrite ``graph_module`` in place (see the module docstring); CompileError on a
    mutation that cannot be made functional."""
    changes = FunctionalForm()
    graph = graph_module.graph
    order = {node: index for index, node in enumerate(graph.nodes)}
    for node in list(graph.nodes):
        if is_in_place(node) and not is_state_write(node):  # an SVDF state: kept
            changes.functional.append(op_name(node.target))
            changes.notes += make_functional(node, order)
    changes.folded = fold_constants(graph_module)  # (a mask built from constants, too)
    changes.decomposed = decompose(graph_module)
    changes.folded += fold_constants(graph_module)
    changes.decomposed += mask_softmaxes(graph_module)
    for node in list(graph.nodes):
        if is_no_op(node) or node.target in METADATA_READERS:
            changes.removed.append(op_name(node.target))
            views_to_reshapes(node)
            node.replace_all_uses_with(node.args[0])
            graph.erase_node(node)
    graph.lint()
    graph_module.recompile()
    changes.equivalent = equivalents(graph_module)
    graph_module.meta[NOTES] = list(changes.notes)
    return changes


def views_to_reshapes(copy: Node) -> None:
    """A ``view`` of a removed copy, directly or through other views (``select``,
    ``transpose``, …), becomes a ``reshape``: once the copy is gone it reads the copy's input,
    whose strides a view may not span (``transpose(1, 2).contiguous().view``, a channel
    shuffle, ``nn.MultiheadAttention``'s ``contiguous().select(…).view``). In a functional
    graph the two are the same operation."""
    pending, seen = list(copy.users), set()
    while pending:
        user = pending.pop()
        if user in seen or user.op != "call_function":
            continue
        seen.add(user)
        if user.target is aten.view.default:
            user.target = aten.reshape.default
        elif _is_view(user.target):
            pending += list(user.users)


def _is_view(target: object) -> bool:
    """An ATen operator whose result aliases its input (``select``, ``transpose``, …)."""
    if not isinstance(target, OpOverload) or not target._schema.returns:
        return False
    alias = target._schema.returns[0].alias_info
    return alias is not None and not alias.is_write


def is_in_place(node: Node) -> bool:
    """An ATen operator that writes its first argument (``add_``, ``relu_``, ``copy_``, …)."""
    if node.op != "call_function" or not isinstance(node.target, OpOverload):
        return False
    arguments = node.target._schema.arguments
    first = arguments[0].alias_info if arguments else None
    return first is not None and first.is_write and not arguments[0].kwarg_only


def functional_overload(target: OpOverload) -> OpOverload | None:
    """``aten.add.Tensor`` for ``aten.add_.Tensor``: the operator of the same name without the
    underscore, its overload of the same name if it takes the same arguments, else the one that
    does (``pow.Tensor_Tensor`` for ``pow_.Tensor``); None when there is none."""
    name = target._schema.name.split("::")[-1]
    packet = getattr(aten, name.removesuffix("_"), None) if name.endswith("_") else None
    if packet is None:
        return None
    names = [target._overloadname, *packet.overloads()]
    candidates = [getattr(packet, n) for n in names if n in packet.overloads()]
    return next((c for c in candidates if _same_arguments(c, target)), None)


def _same_arguments(functional: OpOverload, in_place: OpOverload) -> bool:
    """The same arguments after the first (``input`` or ``self``): names, types, keywords."""
    ours, theirs = functional._schema.arguments, in_place._schema.arguments
    key = [(a.name, str(a.type), a.kwarg_only) for a in ours[1:]]
    return len(ours) == len(theirs) and key == [
        (a.name, str(a.type), a.kwarg_only) for a in theirs[1:]
    ]


def make_functional(node: Node, order: dict[Node, int]) -> list[str]:
    """Replace the in-place ``node`` by its functional form, or refuse it; returns the notes
    for the report (the write into a model input it drops)."""
    functional = functional_overload(node.target)
    if functional is None:
        refuse(node, Refusal.IN_PLACE_ONLY, "has no functional form")
    written = node.args[0]
    root = alias_root(written)
    notes = [input_write(node, root, order)] if root.op == "placeholder" else []
    if root.op == "get_attr" and writes_svdf_state(node):
        refuse(
            node, Refusal.SVDF_SHAPE, f"writes the SVDF state {root.target} more than one step on"
        )
    if root.op == "get_attr":
        refuse(node, Refusal.MUTATED_BUFFER, f"writes into the parameter or buffer {root.target}")
    graph = node.graph
    with graph.inserting_before(node):
        computed = graph.call_function(functional, node.args, node.kwargs)
        computed.meta = dict(node.meta)
        result = cast_back(computed, written)
    order[computed] = order[result] = order[node]
    node.replace_all_uses_with(result)
    graph.erase_node(node)
    if node.target._schema.name.split("::")[-1] not in METADATA_ONLY:
        redirect_readers(node, written, root, result, order)
    return notes


def input_write(mutation: Node, root: Node, order: dict[Node, int]) -> str:
    """The report's note for a write into the model input ``root`` that can be dropped;
    refused when the input's value before it is read too, or its new value by nothing."""
    for view in aliases_of(root):
        for reader in view.users:
            if reader is mutation or reader.op != "call_function":
                continue  # the write itself, the export's guards
            if reader.target in METADATA_READERS or order.get(reader, -1) > order[mutation]:
                continue  # later readers read the result (or are checked as views)
            if aliases_input(reader) and reader.args[0] is view:
                continue  # a view: its own readers are checked
            refuse(
                mutation,
                Refusal.MUTATED_INPUT,
                f"writes into the model input {root.name}, whose value before the write "
                f"is read too ({source_line(reader) or reader.name})",
            )
    if not mutation.users:
        refuse(
            mutation,
            Refusal.MUTATED_INPUT,
            f"writes into the model input {root.name} and nothing reads the result",
        )
    return (
        f"{op_name(mutation.target)} at {where(mutation)} writes into the model input "
        f"{root.name}: computed into a new tensor; the input keeps its value"
    )


def cast_back(result: Node, written: Node) -> Node:
    """In place, the result keeps the written tensor's dtype; the functional form promotes
    (e.g. float16 ``x.add_(float32)``): cast its result back where the dtypes differ."""
    want = _dtype(written)
    got = _promoted_dtype(result)
    if want is None or got is None or got == want:
        return result
    cast = result.graph.call_function(aten.to.dtype, (result, want))
    cast.meta = dict(result.meta)
    value = result.meta.get("val")
    if isinstance(value, torch.Tensor):
        with detect_fake_mode([value]) or contextlib.nullcontext():
            result.meta["val"] = value.to(got)  # what the functional form gives
    return cast


def _promoted_dtype(node: Node) -> torch.dtype | None:
    """The dtype ``node``'s operator gives its arguments' dtypes (run on meta tensors)."""

    def meta(argument: object) -> object:
        value = argument.meta.get("val") if isinstance(argument, Node) else argument
        if isinstance(argument, Node) and not isinstance(value, torch.Tensor):
            raise LookupError
        return (
            torch.empty(value.shape, dtype=value.dtype, device="meta")
            if isinstance(value, torch.Tensor)
            else value
        )

    try:
        args, kwargs = torch.fx.node.map_aggregate((node.args, node.kwargs), meta)
        return node.target(*args, **kwargs).dtype
    except Exception:  # an operator without a meta kernel: keep the dtype
        return None


def _dtype(node: Node) -> torch.dtype | None:
    value = node.meta.get("val")
    return value.dtype if isinstance(value, torch.Tensor) else None


def aliases_input(node: Node) -> bool:
    """Whether ``node`` shares its first argument's elements: a view by its schema, unless the
    traced values say it copied (``contiguous`` of a transpose, ``to(copy=True)``)."""
    if node.op != "call_function":
        return False
    if node.target is operator.getitem:
        return isinstance(node.args[0], Node) and aliases_input(node.args[0])
    if not isinstance(node.target, OpOverload) or not node.args:
        return False
    arguments = node.target._schema.arguments
    first = arguments[0].alias_info if arguments else None
    if first is None or first.is_write or not isinstance(node.args[0], Node):
        return False
    value, source = node.meta.get("val"), node.args[0].meta.get("val")
    if isinstance(value, torch.Tensor) and isinstance(source, torch.Tensor):
        return torch._C._is_alias_of(value, source)
    return True


def alias_root(node: Node) -> Node:
    """The node owning the elements ``node`` views (``node`` itself when it owns them)."""
    while aliases_input(node):
        node = node.args[0]
    return node


def aliases_of(root: Node) -> list[Node]:
    """``root`` and every view of it (views of views included), in graph order."""
    found, frontier = [root], [root]
    while frontier:
        views = [u for n in frontier for u in n.users if aliases_input(u) and u.args[0] is n]
        found += views
        frontier = views
    return found


def same_elements(node: Node) -> bool:
    """A copy or view with its input's elements, in the same order: same shape, dtype and
    device (and step 1 for a slice)."""
    if node.op != "call_function" or node.target not in SAME_ELEMENTS:
        return False
    source = node.args[0] if node.args else None
    if not isinstance(source, Node):
        return False
    before, after = source.meta.get("val"), node.meta.get("val")
    if not isinstance(before, torch.Tensor) or not isinstance(after, torch.Tensor):
        return node.target in ALWAYS_SAME
    if node.target is aten.slice.Tensor and _step(node) != 1:
        return False
    return (before.shape, before.dtype, before.device) == (after.shape, after.dtype, after.device)


def redirect_readers(
    mutation: Node, written: Node, root: Node, result: Node, order: dict[Node, int]
) -> None:
    """Readers after ``mutation`` of an alias holding exactly the written elements read
    ``result`` instead; a reader after it of any other view of them sees the write only
    partly: refused."""
    after = order[mutation]
    identical = _identity_class(written, aliases_of(root))
    for view in [n for n in identical if order.get(n, -1) <= after]:
        for reader in list(view.users):
            if order.get(reader, -1) > after:
                reader.replace_input_with(view, result)
    for view in aliases_of(root):
        for reader in view.users:
            if order.get(reader, -1) <= after or reader.target in METADATA_READERS:
                continue
            if view in identical or (aliases_input(reader) and reader.args[0] is view):
                continue  # a later view: its own readers are checked
            made = source_line(view) or view.name
            refuse(
                mutation,
                Refusal.MUTATED_VIEW,
                f"writes into elements read afterwards through another view ({made})",
            )


def _identity_class(written: Node, views: Iterable[Node]) -> set[Node]:
    """The views holding exactly the elements of ``written``, in the same order: those linked
    to it by identity aliases, up or down."""
    links: dict[Node, set[Node]] = {}
    for view in views:
        if aliases_input(view) and same_elements(view):  # the root's own input is not linked
            links.setdefault(view, set()).add(view.args[0])
            links.setdefault(view.args[0], set()).add(view)
    identical, frontier = {written}, [written]
    while frontier:
        frontier = [n for f in frontier for n in links.get(f, ()) if n not in identical]
        identical.update(frontier)
    return identical


def _step(view: Node) -> int:
    return view.args[4] if len(view.args) > 4 else view.kwargs.get("step", 1)


def is_no_op(node: Node) -> bool:
    """A copy or alias that hands back its input's elements unchanged."""
    return node.op == "call_function" and node.target in NO_OPS and same_elements(node)


def where(node: Node) -> str:
    """``path/model.py:12 in layer1.0 (BasicBlock)``, or the node's name without a trace."""
    module = module_of(node)
    line = source_line(node)
    if line:
        return line + (f" in {module}" if module else "")
    return module or f"node {node.name} (no source line recorded)"


def refuse(node: Node, kind: Refusal, why: str) -> None:
    """One line: the in-place operator, where, why, and the rewrite."""
    op = op_name(node.target)
    raise CompileError(f"{op} at {where(node)} {why}; rewrite: {rewrite_for(op, kind)}")
