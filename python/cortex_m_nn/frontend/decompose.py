"""Composite operators as the operators they are made of, before PT2E.

Some operators the lowering has no rule for are defined by a few it has; each is replaced by
that definition, traced in float (the same function, op for op), so the quantizer annotates
and the lowering lowers the pieces:

* ``scaled_dot_product_attention`` (what ``F.scaled_dot_product_attention``,
  ``nn.MultiheadAttention`` and ``nn.TransformerEncoderLayer`` reach) →
  ``softmax(q @ kᵀ · scale (+ mask)) @ v``: two batch matmuls, a multiply by the scale (the
  first product's requantization applies it: ``lower/patterns.py``), a float mask added, and a
  softmax. Grouped-query attention (``enable_gqa``) repeats the keys and values per group.
* ``einsum`` → PyTorch's own decomposition (permutes, views and one ``bmm`` per product).

Refused with the rewrite: dropout in attention (``dropout_p`` > 0: the model is in training
mode), and a boolean or causal mask (a masked score is ``-inf``, which no int8 scale holds).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch.fx import GraphModule, Node
from torch.fx.experimental.proxy_tensor import make_fx

from cortex_m_nn.core.errors import CompileError
from cortex_m_nn.core.graph import argument, op_name, source_line

aten = torch.ops.aten


def _val(value: object) -> object:
    return value.meta.get("val") if isinstance(value, Node) else value


def _example(value: object) -> torch.Tensor:
    """A real tensor shaped like a node's value, to trace a decomposition with."""
    fake = _val(value)
    if not isinstance(fake, torch.Tensor):
        raise TypeError(f"no tensor value for {value!r}")
    return torch.zeros([int(s) for s in fake.shape], dtype=fake.dtype)


def attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None,
    scale: float | None,
    gqa: bool,
) -> torch.Tensor:
    """``scaled_dot_product_attention`` in float, as the operators our lowering has."""
    if gqa and query.shape[-3] != key.shape[-3]:
        repeats = query.shape[-3] // key.shape[-3]
        key = key.repeat_interleave(repeats, -3)
        value = value.repeat_interleave(repeats, -3)
    factor = scale if scale is not None else 1.0 / math.sqrt(query.shape[-1])
    scores = torch.matmul(query, key.transpose(-2, -1)) * factor
    if mask is not None:
        scores = scores + mask
    return torch.matmul(torch.softmax(scores, -1), value)


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
    if bool(causal) or (mask is not None and _val(mask).dtype == torch.bool):
        raise CompileError(
            f"{op_name(node.target)} with a {'causal' if causal else 'boolean'} mask "
            f"({source_line(node)}): a masked score has no int8 value (-inf); give the mask "
            "as a float additive bias of moderate size (e.g. -8 where masked, which the "
            "scores' int8 range then holds), or attend without a mask"
        )

    def decomposition(*tensors: torch.Tensor) -> torch.Tensor:
        given = tensors[3] if mask is not None else None
        return attention(*tensors[:3], given, scale, gqa)

    inputs = [query, key, value] + ([mask] if mask is not None else [])
    return decomposition, inputs


def _einsum(node: Node) -> tuple[Callable, list[object]]:
    equation, operands = node.args[0], list(node.args[1])

    def decomposition(*tensors: torch.Tensor) -> torch.Tensor:
        return torch.einsum(equation, *tensors)

    return decomposition, operands


#: op → (a function of tensors giving its decomposition, the nodes it takes), and whether to
#: trace it at the level of the export (True: composite operators kept) or below it (False:
#: down to ``bmm`` and views, which einsum needs).
DECOMPOSED: dict[object, tuple[Callable[[Node], tuple[Callable, list[object]]], bool]] = {
    aten.scaled_dot_product_attention.default: (_sdpa, True),
    aten.einsum.default: (_einsum, False),
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
            setattr(graph.owning_module, name, getattr(traced, str(inner.target)))
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
        function, inputs = describe(node)
        examples = [_example(i) for i in inputs]
        traced = make_fx(function, pre_dispatch=pre_dispatch)(*examples)
        _inline(node, traced, inputs)
        done.append(op_name(node.target))
    graph_module.graph.lint()
    graph_module.recompile()
    return done
