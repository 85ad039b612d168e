"""Exact float rewrites before PT2E: operators the lowering has no rule for, as the ones it has.

Each rewrite gives the same float function (the same elements, values and shape), so the
quantizer annotates, and the lowering lowers, the operator it becomes:

* ``feature_dropout``, ``alpha_dropout``, ``feature_alpha_dropout`` in eval mode (identity)
  → ``dropout`` in eval mode (identity; its rule makes it a view);
* ``view_as(x, y)`` → ``reshape(x, y.shape)``; ``expand_as(x, y)`` → ``expand(x, y.shape)``;
* ``max.dim`` / ``min.dim`` whose indices nothing reads → ``amax`` / ``amin`` over that dim;
* ``adaptive_max_pool2d`` / ``adaptive_max_pool1d`` whose indices nothing reads: to size 1
  → ``amax`` over the pooled dims; to a size dividing the input's (every window the same)
  → ``max_pool2d`` / ``max_pool1d`` with kernel = stride = input ÷ output;
* ``instance_norm`` with the input's own statistics (no running stats) → ``group_norm`` with
  one group per channel (the same statistics, weight and bias per channel); with running
  statistics in eval mode (``track_running_stats=True``) → ``batch_norm`` in eval mode (a
  per-channel multiply-add, folded into the convolution before it or a depthwise 1×1);
* ``index_select(x, d, i)`` and ``x[..., i]`` (``index`` with one index tensor) of constant
  1-D indices → a ``slice`` (indices in arithmetic progression) or a ``cat`` of slices (one per
  run of consecutive indices), which ``lower/gather`` moves as a view, a transpose, a strided
  copy or a concat;
* ``avg_pool2d`` / ``avg_pool1d`` counting their zero padding (``count_include_pad``,
  PyTorch's default; not with a divisor override) → ``constant_pad_nd`` with zeros, then the
  pool without padding (the same windows and divisor; in ``ceil_mode`` a last window past
  the padding divides by what it covers of the padded input, as PyTorch's does).

* ``x / (|x| + 1)`` (``nn.Softsign``) → one element-wise function of ``x``, a table.

Anything else (training-mode dropout or instance norm, indices that are read, non-uniform
windows, indices computed by the model) is left as it is: its lowering refuses it.
"""

from __future__ import annotations

import operator
from collections.abc import Callable

import torch
from torch.fx import GraphModule, Node

from cortex_m_nn.core.float_ops import SOFTSIGN
from cortex_m_nn.core.graph import argument, op_name
from cortex_m_nn.frontend.constants import constant_value

aten = torch.ops.aten

#: Dropouts that are the identity in eval mode (``train`` false), like ``aten.dropout``.
DROPOUTS = {
    aten.feature_dropout.default,
    aten.alpha_dropout.default,
    aten.feature_alpha_dropout.default,
}
#: ``max.dim`` / ``min.dim`` → the reduction of the values alone.
EXTREMES = {aten.max.dim: aten.amax.default, aten.min.dim: aten.amin.default}
#: The first arguments of ``instance_norm`` (and of ``batch_norm``).
NORM_ARGS = ("input", "weight", "bias", "running_mean", "running_var")
#: Adaptive max pools → (the max pool of uniform windows, the number of pooled dims).
ADAPTIVE_MAX = {
    aten.adaptive_max_pool2d.default: (aten.max_pool2d.default, 2),
    aten.adaptive_max_pool1d.default: (aten.max_pool1d.default, 1),
}

Replacement = tuple[object, tuple] | None


def _value(argument: object) -> object:
    return argument.meta.get("val") if isinstance(argument, Node) else argument


def _shape(node: Node) -> list[int] | None:
    value = _value(node)
    return [int(s) for s in value.shape] if isinstance(value, torch.Tensor) else None


def _dropout(node: Node) -> Replacement:
    if bool(argument(node, 2, "train", True)):
        return None
    return aten.dropout.default, (node.args[0], argument(node, 1, "p", 0.5), False)


def _as(node: Node) -> Replacement:
    shape = _shape(node.args[1]) if isinstance(node.args[1], Node) else None
    if shape is None:
        return None
    target = aten.reshape.default if node.target is aten.view_as.default else aten.expand.default
    return target, (node.args[0], shape)


def _extreme(node: Node) -> Replacement:
    dim, keepdim = argument(node, 1, "dim", None), argument(node, 2, "keepdim", False)
    return EXTREMES[node.target], (node.args[0], [int(dim)], bool(keepdim))


def _adaptive_max(node: Node) -> Replacement:
    pool, dims = ADAPTIVE_MAX[node.target]
    shape, size = _shape(node.args[0]), node.args[1]
    size = [size] * dims if isinstance(size, int) else list(size)
    if shape is None or len(size) != dims or not all(isinstance(s, int) for s in size):
        return None
    spatial = shape[-dims:]
    if all(s == 1 for s in size):
        rank = len(shape)
        return aten.amax.default, (node.args[0], list(range(rank - dims, rank)), True)
    if any(s == 0 or i % s for i, s in zip(spatial, size, strict=True)):
        return None  # windows of different sizes
    kernel = [i // s for i, s in zip(spatial, size, strict=True)]
    return pool, (node.args[0], kernel, kernel)


def _instance_norm(node: Node) -> Replacement:
    """Group norm with a group per channel (the input's own statistics), or batch norm in eval
    mode (the running statistics; both take them as ``(x, weight, bias, mean, var, …)``)."""
    x, weight, bias, mean, var = (argument(node, i, n, None) for i, n in enumerate(NORM_ARGS))
    shape, eps = _shape(x), float(argument(node, 7, "eps", 1e-5))
    if shape is None or len(shape) < 2:
        return None
    if bool(argument(node, 5, "use_input_stats", True)):
        if mean is not None or var is not None:
            return None  # training: the running statistics are updated too
        return aten.group_norm.default, (x, shape[1], weight, bias, eps)
    if mean is None or var is None:
        return None
    momentum = float(argument(node, 6, "momentum", 0.1))
    return aten.batch_norm.default, (x, weight, bias, mean, var, False, momentum, eps, False)


def _indices(graph_module: GraphModule, node: object, size: int) -> list[int] | None:
    """Constant 1-D integer indices into a dim of ``size``, made non-negative (a boolean mask
    is not one: the export gives its result a shape that depends on the data)."""
    value = constant_value(node)
    if value is None or value.dim() != 1 or not value.numel():
        return None
    if value.dtype not in (torch.int64, torch.int32):
        return None
    indices = value.tolist()
    if any(not -size <= i < size for i in indices):
        return None
    return [i % size for i in indices]


def _selected(node: Node) -> tuple[object, int] | None:
    """(the index tensor, its dim) of ``index_select`` or of ``index`` with one index."""
    if node.target is aten.index_select.default:
        return node.args[2], int(node.args[1])
    found = [(i, t) for i, t in enumerate(node.args[1]) if t is not None]
    return (found[0][1], found[0][0]) if len(found) == 1 else None


def _runs(indices: list[int]) -> list[tuple[int, int, int]]:
    """(start, end, step) slices giving ``indices`` in order: one slice for an arithmetic
    progression of a positive step, else one per run of consecutive indices."""
    step = indices[1] - indices[0] if len(indices) > 1 else 1
    if step > 0 and indices == list(range(indices[0], indices[-1] + 1, step)):
        return [(indices[0], indices[-1] + 1, step)]
    runs = [[indices[0], indices[0] + 1]]
    for i in indices[1:]:
        if i == runs[-1][1]:
            runs[-1][1] += 1
        else:
            runs.append([i, i + 1])
    return [(start, end, 1) for start, end in runs]


def _add(like: Node, target: object, args: tuple, value: object = None) -> Node:
    """``target(*args)`` before ``like``, with ``like``'s metadata (its source location) and
    ``value`` (computed on the arguments' values when None)."""
    with like.graph.inserting_before(like):
        node = like.graph.call_function(target, args)
    node.meta = dict(like.meta)
    if value is None:
        value = target(*torch.fx.node.map_arg(args, lambda n: n.meta["val"]))
    node.meta["val"] = value
    return node


def _values(node: Node) -> Node | None:
    """The ``getitem`` of the values of a (values, indices) op whose indices nothing reads."""
    users = list(node.users)
    if not all(u.target is operator.getitem for u in users):
        return None
    if any(u.args[1] != 0 and u.users for u in users):
        return None
    found = [u for u in users if u.args[1] == 0]
    return found[0] if len(found) == 1 else None


def _index(graph_module: GraphModule, node: Node) -> bool:
    """``index_select`` / ``index`` of constant indices as slices (and a ``cat``)."""
    selected, shape = _selected(node), _shape(node.args[0])
    if selected is None or shape is None or "val" not in node.args[0].meta:
        return False
    tensor, dim = selected
    dim %= len(shape)
    indices = _indices(graph_module, tensor, shape[dim])
    if not indices:
        return False
    slices = [_add(node, aten.slice.Tensor, (node.args[0], dim, *run)) for run in _runs(indices)]
    result = slices[0] if len(slices) == 1 else _add(node, aten.cat.default, (slices, dim))
    result.meta["val"] = node.meta["val"]
    node.replace_all_uses_with(result)
    node.graph.erase_node(node)
    return True


def _pool_counting_padding(node: Node) -> bool:
    """An average pool that counts its zero padding (``count_include_pad``, PyTorch's
    default) as the average pool, without padding, of the zero-padded input: the same
    windows, the same divisor. CMSIS-NN's pool divides by the valid elements only."""
    dims = 1 if node.target is aten.avg_pool1d.default else 2
    padding = argument(node, 3, "padding", 0)
    padding = [padding] if isinstance(padding, int) else list(padding)
    padding = padding * dims if len(padding) == 1 else padding
    counts = bool(argument(node, 5, "count_include_pad", True))
    ceil = bool(argument(node, 4, "ceil_mode", False))
    divisor = None if dims == 1 else argument(node, 6, "divisor_override", None)
    if not counts or divisor is not None or not any(padding[:dims]):
        return False
    sides = [p for size in reversed(padding[:dims]) for p in (size, size)]
    padded = _add(node, aten.constant_pad_nd.default, (node.args[0], sides, 0.0))
    kernel = argument(node, 1, "kernel_size", None)
    stride = argument(node, 2, "stride", [])
    arguments = (padded, kernel, stride, [0] * dims, ceil)
    value = node.target(*torch.fx.node.map_arg(arguments, lambda n: n.meta["val"]))
    if _shape(node) != [int(s) for s in value.shape]:  # ceil mode: a window in the right
        padded.graph.erase_node(padded)  # padding alone, which PyTorch drops; not so here
        return False
    pool = _add(node, node.target, arguments, node.meta.get("val"))
    node.replace_all_uses_with(pool)
    node.graph.erase_node(node)
    return True


def _replace(node: Node, replacement: Replacement, values: Node | None = None) -> bool:
    """``node`` (or, for a (values, indices) op, its ``values`` getitem) replaced."""
    if replacement is None:
        return False
    result = values if values is not None else node
    new = _add(result, *replacement, value=result.meta.get("val"))
    result.replace_all_uses_with(new)
    for user in [u for u in node.users if u is not new]:
        node.graph.erase_node(user)
    node.graph.erase_node(node)
    return True


def _softsign(node: Node) -> bool:
    """``x / (|x| + 1)`` (``nn.Softsign``, either order of the add) as one element-wise
    function of ``x``: a table, where the division of two tensors has no int8 kernel."""
    x, denominator = node.args[:2]
    if not isinstance(denominator, Node) or denominator.target is not aten.add.Tensor:
        return False
    parts = list(denominator.args[:2])
    magnitude = next((p for p in parts if isinstance(p, Node)), None)
    ones = [p for p in parts if isinstance(p, int | float) and p == 1]
    if len(ones) != 1 or magnitude is None or denominator.kwargs:
        return False
    if magnitude.target is not aten.abs.default or magnitude.args[0] is not x:
        return False
    softsign = _add(node, SOFTSIGN, (x,), node.meta.get("val"))
    node.replace_all_uses_with(softsign)
    node.graph.erase_node(node)
    for dead in (denominator, magnitude):
        if not dead.users:
            node.graph.erase_node(dead)
    return True


#: Operators rewritten whole: op → its replacement (None: left alone).
WHOLE: dict[object, Callable[[Node], Replacement]] = {
    **dict.fromkeys(DROPOUTS, _dropout),
    aten.view_as.default: _as,
    aten.expand_as.default: _as,
    aten.instance_norm.default: _instance_norm,
}
#: (values, indices) operators rewritten when only the values are read.
VALUES_ONLY: dict[object, Callable[[Node], Replacement]] = {
    **dict.fromkeys(EXTREMES, _extreme),
    **dict.fromkeys(ADAPTIVE_MAX, _adaptive_max),
}
INDEXING = {aten.index_select.default, aten.index.Tensor}
AVERAGE_POOLS = {aten.avg_pool2d.default, aten.avg_pool1d.default}


def equivalents(graph_module: GraphModule) -> list[str]:
    """Rewrite ``graph_module`` in place (see the module docstring); returns the rewritten
    operators' names, in graph order."""
    rewritten = []
    for node in list(graph_module.graph.nodes):
        if node.op != "call_function":
            continue
        name = op_name(node.target)
        if node.target in WHOLE:
            done = _replace(node, WHOLE[node.target](node))
        elif node.target in VALUES_ONLY:
            values = _values(node)
            done = values is not None and _replace(node, VALUES_ONLY[node.target](node), values)
        elif node.target in INDEXING:
            done = _index(graph_module, node)
        elif node.target in AVERAGE_POOLS:
            done = _pool_counting_padding(node)
        elif node.target is aten.div.Tensor:
            done = _softsign(node)
        else:
            continue
        if done:
            rewritten.append(name)
    graph_module.graph.lint()
    graph_module.recompile()
    return rewritten
