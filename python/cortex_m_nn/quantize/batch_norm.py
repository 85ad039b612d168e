"""Batch norm that no convolution absorbed → a depthwise 1×1 convolution, before annotation.

``prepare_pt2e`` folds a batch norm into the convolution right before it. What is left (a
BatchNorm2d on the model input, after an add or a pool; a BatchNorm1d on a linear's output)
is, in eval mode, ``y[c] = x[c] * a[c] + b[c]`` with ``a = weight / sqrt(running_var + eps)``
and ``b = bias - running_mean * a``. ``torch.export`` presents it as ``aten.batch_norm``
(``training=False``) or ``aten._native_batch_norm_legit_no_training`` (then read through
``getitem(…, 0)``).

That per-channel multiply-add is a depthwise convolution with a 1×1 kernel, a weight ``a`` and
a bias ``b`` per channel, so it is rewritten into one (``conv2d`` with ``groups=C`` for 4-D,
``conv1d`` for 3-D, ``conv1d`` between ``unsqueeze(-1)`` and ``squeeze(-1)`` for 2-D) and
lowers onto CMSIS-NN's depthwise kernel with no new operator: the quantizer gives it
per-channel weights (one weight per channel is quantized exactly: ±127 at scale ``|a|/127``)
and an int32 bias, and one requantization per channel maps it to the output scale. A mul and
an add with per-channel constants would take two kernels and two requantizations.
"""

from __future__ import annotations

import torch
from torch.fx import GraphModule, Node

aten = torch.ops.aten

BATCH_NORMS = {aten.batch_norm.default, aten._native_batch_norm_legit_no_training.default}


def _parameters(model: GraphModule, node: Node) -> tuple[torch.Tensor, ...] | None:
    """(weight, bias, mean, var) as tensors, or None when one is not a constant."""
    values = []
    for argument in node.args[1:5]:
        if argument is None:
            values.append(None)
        elif isinstance(argument, Node) and argument.op == "get_attr":
            value = model
            for part in argument.target.split("."):
                value = getattr(value, part)
            values.append(value.detach().to(torch.float32))
        else:
            return None
    return tuple(values)


def _eval_mode(node: Node) -> tuple[bool, float]:
    """(whether the node normalizes with running statistics, its eps)."""
    if node.target is aten.batch_norm.default:
        return node.args[5] is False, float(node.args[7])
    return True, float(node.args[6])


def _affine(model: GraphModule, node: Node) -> tuple[torch.Tensor, torch.Tensor] | None:
    """Per-channel (a, b) with ``y = x * a + b``, or None when the node is not rewritable."""
    evaluating, eps = _eval_mode(node)
    parameters = _parameters(model, node)
    if not evaluating or parameters is None:
        return None
    weight, bias, mean, var = parameters
    if mean is None or var is None:
        return None
    a = torch.rsqrt(var + eps) * (weight if weight is not None else 1.0)
    b = (bias if bias is not None else 0.0) - mean * a
    return a, b


def _call(graph: torch.fx.Graph, target: object, *args: object) -> Node:
    node = graph.call_function(target, tuple(args))
    fakes = [a.meta["val"] if isinstance(a, Node) else a for a in args]
    node.meta["val"] = target(*fakes)
    return node


def _attribute(model: GraphModule, name: str, value: torch.Tensor, fake: object) -> Node:
    model.register_buffer(name, value.contiguous())
    node = model.graph.get_attr(name)
    node.meta["val"] = fake.from_tensor(model.get_buffer(name))
    return node


def _depthwise(model: GraphModule, node: Node, a: torch.Tensor, b: torch.Tensor) -> Node | None:
    """The depthwise 1×1 convolution computing ``node``, inserted before it."""
    source = node.args[0]
    rank = source.meta["val"].dim()
    if rank not in (2, 3, 4):
        return None
    graph, channels = model.graph, a.numel()
    fake = source.meta["val"].fake_mode
    name = f"_unfolded_{node.name}"
    kernel = a.reshape(channels, 1, *[1] * (2 if rank == 4 else 1))
    with graph.inserting_before(node):
        weight = _attribute(model, f"{name}_weight", kernel, fake)
        bias = _attribute(model, f"{name}_bias", b, fake)
    with graph.inserting_before(node), fake:
        x = _call(graph, aten.unsqueeze.default, source, -1) if rank == 2 else source
        if rank == 4:
            y = _call(graph, aten.conv2d.default, x, weight, bias, [1, 1], [0, 0], [1, 1], channels)
        else:
            y = _call(graph, aten.conv1d.default, x, weight, bias, [1], [0], [1], channels)
        return _call(graph, aten.squeeze.dim, y, -1) if rank == 2 else y


def unfold_batch_norms(model: GraphModule) -> GraphModule:
    """Every eval-mode batch norm with constant statistics → a depthwise 1×1 convolution."""
    for node in list(model.graph.nodes):
        if node.op != "call_function" or node.target not in BATCH_NORMS:
            continue
        affine = _affine(model, node)
        result = _depthwise(model, node, *affine) if affine is not None else None
        if result is None:
            continue
        if node.target is aten.batch_norm.default:
            node.replace_all_uses_with(result)
        else:
            for user in list(node.users):
                if user.target.__name__ == "getitem" and user.args[1] == 0:
                    user.replace_all_uses_with(result)
        if all(not u.users for u in node.users):
            for user in list(node.users):
                model.graph.erase_node(user)
            model.graph.erase_node(node)
    model.recompile()
    return model
