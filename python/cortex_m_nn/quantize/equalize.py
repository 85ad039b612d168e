"""Cross-layer equalization on the exported float graph, before PT2E (Nagel et al. 2019, §4.1).

Two layers in a row, the first's output channel ``i`` the second's input channel ``i``, compute
the same function when channel ``i`` of the first is divided by ``s_i > 0`` and the second's
weights reading it are multiplied by ``s_i``, provided everything between them commutes with
a positive per-channel scale: ReLU and leaky ReLU (positive-homogeneous), max and average
pools, a mean over other dims, an eval-mode dropout, and a flatten into a linear layer.
ReLU6, hardtanh, clamp and hardswish do not (their bounds would have to scale too), so a pair
through them is left alone; so is a pair whose intermediate value has another reader (a
residual branch: the other reader would see the scaled channels).

With ``r1_i`` the largest ``|w|`` of the first layer's output channel ``i`` and ``r2_i`` that
of the second layer's weights reading input channel ``i``, ``s_i = sqrt(r1_i / r2_i)`` makes
both ``sqrt(r1_i * r2_i)`` (the data-free form of the paper). Our convolution weights are
int8 per output channel, so scaling the first layer's channels costs its weights nothing;
what the scaling changes is the int8 activation between the layers (one scale for all
channels) and the second layer's weights. So with calibration samples (what
``compile.quantize`` passes), ``r1_i`` is instead the largest ``|value|`` of channel ``i`` of
that activation over the samples: the scaling balances the activation's channels against the
second layer's weights reading them, both ending at ``sqrt(r1_i * r2_i)``. Pairs share
layers along a chain, so the scaling sweeps over all pairs until the scales settle (the
activation ranges scale with ``1 / s_i`` exactly, so they are measured once).

Batch norms are folded into the convolution or linear layer before them first
(:func:`fold_batch_norms`): equalization must see the weights PT2E will quantize, and PT2E
would fold them only later. Every change writes new tensors; the source model, whose
parameters ``torch.export`` shares, is never modified.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch.fx import GraphModule, Interpreter, Node

from cortex_m_nn.core.families import CONVOLUTIONS, LINEARS
from cortex_m_nn.core.graph import argument
from cortex_m_nn.quantize.batch_norm import BATCH_NORMS, _affine

aten = torch.ops.aten

#: Element-wise ops with ``f(s * x) = s * f(x)`` for ``s > 0`` (dropout only in eval mode).
HOMOGENEOUS = {aten.relu.default, aten.leaky_relu.default, aten.dropout.default}
#: Per-channel pools over the dims after the channel dim (1).
CHANNEL_POOLS = {
    aten.max_pool1d.default,
    aten.max_pool2d.default,
    aten.avg_pool1d.default,
    aten.avg_pool2d.default,
    aten.adaptive_avg_pool1d.default,
    aten.adaptive_avg_pool2d.default,
}
#: Reshapes to ``[N, C * rest]`` that may bring convolution channels to a linear layer.
FLATTENS = {aten.flatten.using_ints, aten.view.default, aten.reshape.default}
#: Sweeps over all pairs at most; they stop earlier once no scale moves by more than TOLERANCE.
SWEEPS = 32
TOLERANCE = 1e-4


def attribute_tensor(model: GraphModule, node: object) -> torch.Tensor | None:
    """The tensor a ``get_attr`` node reads (None when ``node`` is not one)."""
    if not isinstance(node, Node) or node.op != "get_attr":
        return None
    value = model
    for part in node.target.split("."):
        value = getattr(value, part)
    return value.detach() if isinstance(value, torch.Tensor) else None


def replace_attribute(model: GraphModule, node: Node, value: torch.Tensor) -> None:
    """Point ``node``'s attribute at a new tensor (never writes into the old one)."""
    owner_path, _, name = node.target.rpartition(".")
    owner = model.get_submodule(owner_path)
    value = value.detach().clone().contiguous()
    if name in owner._parameters:
        owner._parameters[name] = torch.nn.Parameter(value, requires_grad=False)
    elif name in owner._buffers:
        owner._buffers[name] = value
    else:
        setattr(owner, name, value)


def set_bias(model: GraphModule, layer: Node, bias: torch.Tensor) -> None:
    """Give ``layer`` (a convolution or linear) the bias ``bias``: a new attribute when it
    had none."""
    current = argument(layer, 2, "bias", None)
    if isinstance(current, Node):
        replace_attribute(model, current, bias)
        return
    name = f"_bias_{layer.name}"
    model.register_parameter(name, torch.nn.Parameter(bias.detach().clone(), requires_grad=False))
    with model.graph.inserting_before(layer):
        node = model.graph.get_attr(name)
    fake = layer.args[1].meta["val"].fake_mode
    node.meta["val"] = fake.from_tensor(getattr(model, name))
    layer.kwargs = {k: v for k, v in layer.kwargs.items() if k != "bias"}
    layer.args = (*layer.args[:2], node, *layer.args[3:])


def _owned(node: object) -> bool:
    """A ``get_attr`` read only by one node, and no other ``get_attr`` reads its attribute."""
    if not isinstance(node, Node) or node.op != "get_attr" or len(node.users) != 1:
        return False
    readers = [n for n in node.graph.nodes if n.op == "get_attr" and n.target == node.target]
    return len(readers) == 1


def is_layer(node: Node) -> bool:
    """A convolution (not transposed) or linear layer whose weight and bias are its own
    constants: its channels can be rescaled and its bias replaced."""
    if node.op != "call_function" or node.target not in CONVOLUTIONS | LINEARS:
        return False
    bias = argument(node, 2, "bias", None)
    return _owned(node.args[1]) and (bias is None or _owned(bias))


def _fold_one(model: GraphModule, layer: Node, norm: Node) -> bool:
    """Fold the eval-mode batch norm ``norm`` reading ``layer``'s output into ``layer``."""
    affine = _affine(model, norm)
    if affine is None:
        return False
    a, b = affine
    weight = attribute_tensor(model, layer.args[1]).to(torch.float32)
    if weight.shape[0] != a.numel():
        return False
    bias = attribute_tensor(model, argument(layer, 2, "bias", None))
    bias = torch.zeros_like(a) if bias is None else bias.to(torch.float32)
    replace_attribute(model, layer.args[1], weight * a.reshape(-1, *[1] * (weight.dim() - 1)))
    set_bias(model, layer, bias * a + b)
    if norm.target is aten.batch_norm.default:
        norm.replace_all_uses_with(layer)
    else:
        for user in list(norm.users):
            if user.args[1] != 0:
                return False  # (never happens in eval mode: only the output is read)
        for user in list(norm.users):
            user.replace_all_uses_with(layer)
            model.graph.erase_node(user)
    constants = [a for a in norm.args if isinstance(a, Node) and a.op == "get_attr"]
    model.graph.erase_node(norm)
    for constant in constants:
        if not constant.users:
            model.graph.erase_node(constant)
    return True


def fold_batch_norms(model: GraphModule) -> int:
    """Fold every eval-mode batch norm that alone reads a convolution's or linear layer's
    output into that layer (weights and bias scaled per output channel); returns how many."""
    folded = 0
    for norm in list(model.graph.nodes):
        if norm.op != "call_function" or norm.target not in BATCH_NORMS:
            continue
        layer = norm.args[0]
        channel_last = isinstance(layer, Node) and layer.target in LINEARS
        rank = layer.meta["val"].dim() if isinstance(layer, Node) else 0
        if not isinstance(layer, Node) or not is_layer(layer) or len(layer.users) != 1:
            continue
        if channel_last and rank != 2:  # BatchNorm1d normalizes dim 1, a linear's is the last
            continue
        folded += _fold_one(model, layer, norm)
    model.graph.lint()
    model.recompile()
    return folded


@dataclass(frozen=True)
class Pair:
    """``first``'s output channel ``i`` is read by ``second`` as its input channel ``i`` (as
    ``repeat`` consecutive input features of a linear layer after a flatten)."""

    first: Node
    second: Node
    repeat: int = 1


def _through(node: Node, dim: int, repeat: int) -> tuple[int, int] | None:
    """(channel dim, features per channel) of ``node``'s output, its input's channels being
    on ``dim``; None when ``node`` does not commute with a positive per-channel scale."""
    source = node.args[0].meta["val"]
    output = node.meta.get("val")
    if node.target in HOMOGENEOUS:
        training = node.target is aten.dropout.default and argument(node, 2, "train", False)
        return None if training else (dim, repeat)
    if node.target in CHANNEL_POOLS:
        return (dim, repeat) if dim == 1 and source.dim() >= 3 else None
    if node.target is aten.mean.dim:
        dims = {d % source.dim() for d in argument(node, 1, "dim", None) or []}
        if not dims or dim in dims:
            return None
        keep = argument(node, 2, "keepdim", False)
        return (dim if keep else dim - sum(d < dim for d in dims)), repeat
    if node.target in FLATTENS and isinstance(output, torch.Tensor):
        flat = output.dim() == 2 and output.shape[0] == source.shape[0] and source.dim() >= 3
        if dim == 1 and repeat == 1 and flat:
            return 1, math.prod(source.shape[2:])
    return None


def _pair_from(first: Node) -> Pair | None:
    """The layer reading ``first``'s channels, through ops that commute with scaling them."""
    channels = first.args[1].meta["val"].shape[0]
    current = first
    dim = 1 if first.target in CONVOLUTIONS else first.meta["val"].dim() - 1
    repeat = 1
    while len(current.users) == 1:
        user = next(iter(current.users))
        if user.op != "call_function" or user.args[0] is not current:
            return None
        if is_layer(user) and all(a is not current for a in user.args[1:]):
            x = current.meta["val"]
            if user.target in CONVOLUTIONS:
                fits = dim == 1 and repeat == 1 and x.shape[1] == channels
            else:
                fits = dim == x.dim() - 1 and x.shape[-1] == channels * repeat
            return Pair(first, user, repeat) if fits else None
        step = _through(user, dim, repeat)
        if step is None:
            return None
        (dim, repeat), current = step, user
    return None


def find_pairs(model: GraphModule) -> list[Pair]:
    """Every pair of layers equalization may rescale, in graph order."""
    pairs = [_pair_from(n) for n in model.graph.nodes if is_layer(n)]
    return [p for p in pairs if p is not None]


def _groups(layer: Node) -> int:
    return int(argument(layer, 6, "groups", 1)) if layer.target in CONVOLUTIONS else 1


def input_view(weight: torch.Tensor, groups: int, repeat: int) -> torch.Tensor:
    """``weight`` as ``[groups, outputs per group, input channels per group, rest]``: input
    channel ``i`` is ``[i // per_group, :, i % per_group, :]``."""
    outputs, inputs = weight.shape[0], weight.shape[1] // repeat
    return weight.reshape(groups, outputs // groups, inputs, -1)


def channel_ranges(pair: Pair, first: torch.Tensor, second: torch.Tensor) -> tuple:
    """(r1, r2): the largest ``|w|`` of each channel in the first layer (output channels)
    and the second (input channels), both ``[C]``."""
    r1 = first.reshape(first.shape[0], -1).abs().amax(dim=1)
    r2 = input_view(second, _groups(pair.second), pair.repeat).abs().amax(dim=(1, 3))
    return r1, r2.reshape(-1)


class _RangeMeter(Interpreter):
    """Runs the float graph and keeps, per pair, the largest ``|value|`` of each channel the
    second layer reads."""

    def __init__(self, model: GraphModule, pairs: list[Pair]) -> None:
        super().__init__(model)
        self.inputs = {pair.second.args[0]: pair for pair in pairs}
        self.ranges: dict[Pair, torch.Tensor] = {}

    def run_node(self, node: Node) -> object:
        result = super().run_node(node)
        pair = self.inputs.get(node)
        if pair is not None:
            channels = pair.first.args[1].meta["val"].shape[0]
            if pair.second.target in CONVOLUTIONS:
                values = result.detach().transpose(0, 1).reshape(channels, -1)
            else:
                values = result.detach().reshape(-1, channels, pair.repeat).transpose(0, 1)
            largest = values.reshape(channels, -1).abs().amax(dim=1).double()
            previous = self.ranges.get(pair)
            self.ranges[pair] = largest if previous is None else torch.maximum(previous, largest)
        return result


def activation_ranges(
    model: GraphModule, pairs: list[Pair], samples: Iterable[tuple[torch.Tensor, ...]]
) -> dict[Pair, torch.Tensor]:
    """Per pair, the largest ``|value|`` of each channel between the two layers on
    ``samples`` (``[C]``)."""
    meter = _RangeMeter(model, pairs)
    with torch.no_grad():
        for sample in samples:
            meter.run(*sample)
    return meter.ranges


def _scale(
    pair: Pair, tensors: dict[Node, torch.Tensor], activations: dict[Pair, torch.Tensor] | None
) -> float:
    """Rescale one pair in ``tensors`` (weights and biases by node) and ``activations``;
    the largest |log s|."""
    first, second = tensors[pair.first.args[1]], tensors[pair.second.args[1]]
    r1, r2 = channel_ranges(pair, first, second)
    if activations is not None:
        r1 = activations[pair]
    usable = (r1 > 0) & (r2 > 0)
    s = torch.where(usable, torch.sqrt(r1 / torch.where(usable, r2, 1)), torch.ones_like(r1))
    tensors[pair.first.args[1]] = first / s.reshape(-1, *[1] * (first.dim() - 1))
    bias = argument(pair.first, 2, "bias", None)
    if bias is not None:
        tensors[bias] = tensors[bias] / s
    if activations is not None:
        activations[pair] = activations[pair] / s
    groups = _groups(pair.second)
    view = input_view(second, groups, pair.repeat)
    scaled = view * s.reshape(groups, 1, -1, 1)
    tensors[pair.second.args[1]] = scaled.reshape(second.shape)
    return float(s.log().abs().max())


def equalize(
    model: GraphModule,
    samples: Iterable[tuple[torch.Tensor, ...]] | None = None,
    sweeps: int = SWEEPS,
) -> list[Pair]:
    """Equalize every pair of ``model`` (batch norms already folded): against the
    activation ranges on ``samples``, or data-free (weight ranges) without; returns the
    pairs."""
    pairs = find_pairs(model)
    activations = activation_ranges(model, pairs, samples) if samples is not None else None
    tensors: dict[Node, torch.Tensor] = {}
    for pair in pairs:
        for layer in (pair.first, pair.second):
            bias = argument(layer, 2, "bias", None)
            for node in (layer.args[1], bias) if bias is not None else (layer.args[1],):
                tensors[node] = attribute_tensor(model, node).to(torch.float64)
    for _ in range(sweeps if pairs else 0):
        if max(_scale(pair, tensors, activations) for pair in pairs) < TOLERANCE:
            break
    for node, value in tensors.items():
        replace_attribute(model, node, value.to(attribute_tensor(model, node).dtype))
    return pairs
