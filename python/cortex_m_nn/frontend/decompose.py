"""Composite operators as the operators they are made of, before PT2E.

Some operators the lowering has no rule for are defined by a few it has; each is replaced by
that definition, traced in float (the same function, op for op), so the quantizer annotates
and the lowering lowers the pieces:

* ``scaled_dot_product_attention`` (what ``F.scaled_dot_product_attention``,
  ``nn.MultiheadAttention`` and ``nn.TransformerEncoderLayer`` reach) →
  ``softmax(q @ kᵀ · scale + mask) @ v``: two batch matmuls, a multiply by the scale (the
  first product's requantization applies it: ``lower/patterns.py``), a float mask added, and a
  softmax. A causal or boolean mask, or the ``-inf`` entries of a constant float one, is
  applied by the softmax instead (``cortex_m_nn_float::masked_softmax``: a masked score weighs
  exactly 0, as ``-inf`` does in float, and the scores' int8 range is the kept ones').
  Grouped-query attention (``enable_gqa``) repeats the keys and values per group.
* ``einsum`` → PyTorch's own decomposition (permutes, views and one ``bmm`` per product);
  ``baddbmm`` → ``bmm`` and an add (``nn.MultiheadAttention``'s masked scores when it returns
  its weights).

After the constants are folded, :func:`mask_softmaxes` makes ``softmax(scores + mask)`` with
a constant ``-inf`` mask the masked softmax too. Refused with the rewrite: dropout in attention
(``dropout_p`` > 0: the model is in training mode), a boolean mask the model computes (its
entries are known at run time only), a mask row that masks every score (NaN in float).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch.fx import GraphModule, Node
from torch.fx.experimental.proxy_tensor import make_fx

from cortex_m_nn.core.errors import CompileError
from cortex_m_nn.core.float_ops import MASKED_SOFTMAX
from cortex_m_nn.core.graph import argument, op_name, source_line
from cortex_m_nn.frontend.constants import constant_value

aten = torch.ops.aten


def _val(value: object) -> object:
    return value.meta.get("val") if isinstance(value, Node) else value


def _example(value: object) -> torch.Tensor:
    """A real tensor shaped like a node's value, to trace a decomposition with."""
    fake = _val(value)
    if not isinstance(fake, torch.Tensor):
        raise TypeError(f"no tensor value for {value!r}")
    return torch.zeros([int(s) for s in fake.shape], dtype=fake.dtype)


def _grouped(tensor: torch.Tensor, repeats: int) -> torch.Tensor:
    """Each key/value head ``[..., G, L, E]`` ``repeats`` times in a row (``repeat_interleave``
    over heads, as a broadcast the lowering moves as a copy)."""
    *outer, groups, length, features = tensor.shape
    expanded = tensor.unsqueeze(-3).expand(*outer, groups, repeats, length, features)
    return expanded.reshape(*outer, groups * repeats, length, features)


def attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    bias: torch.Tensor | None,
    keep: torch.Tensor | None,
    scale: float | None,
    gqa: bool,
) -> torch.Tensor:
    """``scaled_dot_product_attention`` in float, as the operators our lowering has: ``bias``
    a float mask added to the scores, ``keep`` a boolean one (a causal mask, or the ``-inf``
    entries of a float one) applied by the softmax."""
    if gqa and query.shape[-3] != key.shape[-3]:
        repeats = query.shape[-3] // key.shape[-3]
        key, value = (_grouped(t, repeats) for t in (key, value))
    factor = scale if scale is not None else 1.0 / math.sqrt(query.shape[-1])
    scores = torch.matmul(query, key.transpose(-2, -1)) * factor
    if bias is not None:
        scores = scores + bias
    if keep is None:
        return torch.matmul(torch.softmax(scores, -1), value)
    return torch.matmul(MASKED_SOFTMAX(scores, keep), value)


#: ``scaled_dot_product_attention``'s arguments before ``enable_gqa``, with their defaults.
SDPA_ARGUMENTS = (
    ("query", None),
    ("key", None),
    ("value", None),
    ("attn_mask", None),
    ("dropout_p", 0.0),
    ("is_causal", False),
    ("scale", None),
)


def _masks(
    node: Node, mask: object, causal: bool, scores: torch.Size
) -> tuple[object, torch.Tensor | None]:
    """(what is added to the scores: the mask node, a constant or None; the boolean mask the
    softmax applies, or None), for scores of shape ``scores``."""
    keep = torch.ones(scores[-2:], dtype=torch.bool).tril() if causal else None
    if mask is None:
        return None, keep
    value = constant_value(mask)
    boolean = _val(mask).dtype == torch.bool
    if value is None and boolean:
        raise CompileError(
            f"{op_name(node.target)} with a boolean mask computed by the model "
            f"({source_line(node)}): give it as a constant (a buffer), or as a float "
            "additive mask of moderate size (e.g. -8 where masked)"
        )
    if value is None or (not boolean and not bool((value == -math.inf).any())):
        return mask, keep  # a finite float mask: added as it is
    value = value.detach()
    kept = value if boolean else value != -math.inf
    keep = kept if keep is None else keep & kept
    bias = None if boolean else torch.where(kept, value, 0.0)
    return (None if bias is None or not bias.any() else bias), keep


def _sdpa(node: Node) -> tuple[Callable, list[object]]:
    query, key, value, mask, dropout, causal, scale = (
        argument(node, i, name, default) for i, (name, default) in enumerate(SDPA_ARGUMENTS)
    )
    gqa = bool(node.kwargs.get("enable_gqa", False))
    if float(dropout):
        raise CompileError(
            f"{op_name(node.target)} with dropout_p={dropout} ({source_line(node)}): attention "
            "dropout runs in training only; put the model in eval mode (model.eval()) or pass "
            "dropout_p=0.0"
        )
    if isinstance(mask, Node) and not isinstance(_val(mask), torch.Tensor):
        mask = None
    scores = _val(node).shape[:-1] + (_val(key).shape[-2],)
    bias, keep = _masks(node, mask, bool(causal), scores)
    if keep is not None:
        keep = keep.expand(scores).contiguous()
        if not bool(keep.any(-1).all()):
            raise CompileError(
                f"{op_name(node.target)} ({source_line(node)}): a mask row masks every score "
                "(its softmax is NaN in float); keep at least one entry per row"
            )
    given = isinstance(bias, Node)

    def decomposition(*tensors: torch.Tensor) -> torch.Tensor:
        added = tensors[3] if given else bias
        return attention(*tensors[:3], added, keep, scale, gqa)

    return decomposition, [query, key, value] + ([bias] if given else [])


def _einsum(node: Node) -> tuple[Callable, list[object]]:
    equation, operands = node.args[0], list(node.args[1])

    def decomposition(*tensors: torch.Tensor) -> torch.Tensor:
        return torch.einsum(equation, *tensors)

    return decomposition, operands


def _baddbmm(node: Node) -> tuple[Callable, list[object]]:
    """``beta · input + alpha · (batch1 @ batch2)`` (``nn.MultiheadAttention``'s masked
    scores when it returns its weights)."""
    beta, alpha = float(node.kwargs.get("beta", 1)), float(node.kwargs.get("alpha", 1))

    def decomposition(added: torch.Tensor, left: torch.Tensor, right: torch.Tensor) -> object:
        product = torch.bmm(left, right)
        product = product if alpha == 1 else product * alpha
        return product + (added if beta == 1 else added * beta)

    return decomposition, list(node.args[:3])


def _log_softmax(node: Node) -> tuple[Callable, list[object]]:
    """``log(softmax(x))``: the int8 softmax (probabilities at 1/256), then a table of the
    logarithm; a probability that rounds to 0 takes the output's lowest value."""
    dim = int(node.args[1])

    def decomposition(x: torch.Tensor) -> torch.Tensor:
        return torch.log(torch.softmax(x, dim))

    return decomposition, [node.args[0]]


def _reflected(size: int, before: int, after: int) -> list[int]:
    """The indices a reflect pad of ``before``/``after`` reads along a dim of ``size``."""
    return [*range(before, 0, -1), *range(size), *range(size - 2, size - 2 - after, -1)]


def _pad(node: Node) -> tuple[Callable, list[object]] | None:
    """A reflect pad: per padded dim, the input's elements in reflected order (a constant
    ``index_select``, which ``frontend/equivalents`` moves as slices and a ``cat``)."""
    mode = argument(node, 2, "mode", "constant")
    if mode != "reflect":
        return None
    sides, shape = list(node.args[1]), list(_val(node.args[0]).shape)
    if any(p >= shape[-1 - i // 2] for i, p in enumerate(sides)) or min(sides) < 0:
        return None  # PyTorch refuses these itself
    indices = {
        len(shape) - 1 - i: torch.tensor(_reflected(shape[-1 - i], *sides[2 * i : 2 * i + 2]))
        for i in range(len(sides) // 2)
    }

    def decomposition(x: torch.Tensor) -> torch.Tensor:
        for dim, index in indices.items():
            x = x.index_select(dim, index)
        return x

    return decomposition, [node.args[0]]


def _adaptive_average(node: Node) -> tuple[Callable, list[object]] | None:
    """An adaptive average pool of windows of different sizes (8 → 3): each output the mean
    of its window (an average pool of its slice), joined by ``cat``. Uniform windows are the
    pool's own rule's."""
    shape, size = _val(node.args[0]).shape, list(node.args[1])
    spatial = [int(s) for s in shape[-2:]]
    if all(i % o == 0 for i, o in zip(spatial, size, strict=True)):
        return None

    def window(extent: int, count: int, index: int) -> tuple[int, int]:
        return (index * extent) // count, -((-(index + 1) * extent) // count)

    def decomposition(x: torch.Tensor) -> torch.Tensor:
        rows = []
        for i in range(size[0]):
            top, bottom = window(spatial[0], size[0], i)
            cells = []
            for j in range(size[1]):
                left, right = window(spatial[1], size[1], j)
                cells.append(x[..., top:bottom, left:right].mean((-2, -1), keepdim=True))
            rows.append(torch.cat(cells, -1))
        return torch.cat(rows, -2)

    return decomposition, [node.args[0]]


#: op → (a function of tensors giving its decomposition, the nodes it takes), and whether to
#: trace it at the level of the export (True: composite operators kept) or below it (False:
#: down to ``bmm`` and views, which einsum needs).
Decomposition = Callable[[Node], tuple[Callable, list[object]] | None]
DECOMPOSED: dict[object, tuple[Decomposition, bool]] = {
    aten.scaled_dot_product_attention.default: (_sdpa, True),
    aten.einsum.default: (_einsum, False),
    aten.baddbmm.default: (_baddbmm, True),
    aten.log_softmax.int: (_log_softmax, True),
    aten.pad.default: (_pad, True),
    aten.adaptive_avg_pool2d.default: (_adaptive_average, True),
}


def _inline(node: Node, traced: GraphModule, inputs: list[object]) -> None:
    """``traced``'s nodes in place of ``node``, reading ``inputs``; each new node keeps
    ``node``'s metadata (its source line) with its own value."""
    graph = node.graph
    placeholders = [n for n in traced.graph.nodes if n.op == "placeholder"]
    mapping: dict[Node, object] = dict(zip(placeholders, inputs, strict=True))
    result: object = None
    for inner in traced.graph.nodes:
        if inner.op == "placeholder":
            continue
        if inner.op == "output":
            result = torch.fx.node.map_arg(inner.args[0], lambda n: mapping[n])
            break
        if inner.op == "get_attr":  # a constant the decomposition made
            name = f"{node.name}_{inner.target}"
            graph.owning_module.register_buffer(name, getattr(traced, str(inner.target)))
            with graph.inserting_before(node):
                mapping[inner] = graph.get_attr(name)
            mapping[inner].meta["val"] = inner.meta.get("val")
            continue
        args = torch.fx.node.map_arg(inner.args, lambda n: mapping[n])
        kwargs = torch.fx.node.map_arg(inner.kwargs, lambda n: mapping[n])
        with graph.inserting_before(node):
            new = graph.call_function(inner.target, args, kwargs)
        new.meta = dict(node.meta)
        values = torch.fx.node.map_arg((args, kwargs), _val)
        new.meta["val"] = inner.target(*values[0], **values[1])
        mapping[inner] = new
    node.replace_all_uses_with(result)
    graph.erase_node(node)


def decompose(graph_module: GraphModule) -> list[str]:
    """Rewrite ``graph_module`` in place (see the module docstring); returns the decomposed
    operators' names, in graph order."""
    done = []
    for node in list(graph_module.graph.nodes):
        if node.op != "call_function" or node.target not in DECOMPOSED:
            continue
        describe, pre_dispatch = DECOMPOSED[node.target]
        found = describe(node)
        if found is None:  # this call is the operator's own rule's
            continue
        function, inputs = found
        examples = [_example(i) for i in inputs]
        traced = make_fx(function, pre_dispatch=pre_dispatch)(*examples)
        _inline(node, traced, inputs)
        done.append(op_name(node.target))
    graph_module.graph.lint()
    graph_module.recompile()
    return done


SOFTMAXES = {aten.softmax.int, aten._softmax.default}


def _infinite_mask(node: object) -> tuple[Node, torch.Tensor] | None:
    """For ``scores + mask`` (either order) with a constant mask holding ``-inf``: (the
    scores node, the mask's value), else None."""
    if not isinstance(node, Node) or node.target is not aten.add.Tensor or len(node.args) != 2:
        return None
    for scores, mask in (node.args, node.args[::-1]):
        value = constant_value(mask)
        if isinstance(scores, Node) and value is not None and bool((value == -math.inf).any()):
            return scores, value
    return None


def mask_softmaxes(graph_module: GraphModule) -> list[str]:
    """``softmax(scores + mask)`` over the last dim, the mask a constant holding ``-inf``
    (PyTorch's float attention masks, once folded: ``nn.MultiheadAttention``'s merged masks,
    ``generate_square_subsequent_mask``) → the masked softmax of ``scores`` plus the mask's
    finite part: a masked score has no int8 value. Returns the rewritten operators' names."""
    done = []
    for node in list(graph_module.graph.nodes):
        found = _infinite_mask(node.args[0]) if node.target in SOFTMAXES else None
        shape = _val(node).shape if found is not None else None
        if found is None or int(node.args[1]) % len(shape) != len(shape) - 1:
            continue
        scores, value = found
        keep = (value != -math.inf).expand(shape).contiguous()
        if not bool(keep.any(-1).all()):
            continue  # a row that masks every score: NaN in float, left as it is
        bias = torch.where(keep, value.expand(shape), 0.0)
        graph = graph_module.graph
        with graph.inserting_before(node):
            if bool(bias.any()):
                graph_module.register_buffer(f"{node.name}_bias", bias)
                added = graph.call_function(
                    aten.add.Tensor, (scores, graph.get_attr(f"{node.name}_bias"))
                )
                added.meta = {**node.meta, "val": _val(node.args[0])}
                scores = added
            graph_module.register_buffer(f"{node.name}_keep", keep)
            masked = graph.call_function(
                MASKED_SOFTMAX, (scores, graph.get_attr(f"{node.name}_keep"))
            )
        masked.meta = dict(node.meta)
        node.replace_all_uses_with(masked)
        old, constant = node.args[0], [a for a in node.args[0].args if a is not found[0]]
        graph.erase_node(node)
        for dead in (old, *constant):  # the add of the mask, and the mask, read by none else
            if isinstance(dead, Node) and not dead.users:
                graph.erase_node(dead)
        done.append(op_name(node.target))
    graph_module.graph.lint()
    graph_module.recompile()
    return done
