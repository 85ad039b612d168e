"""Questions about a node of an exported graph that several stages ask the same way."""

from __future__ import annotations

import operator

import torch
from torch.fx import Node

from cortex_m_nn.core.families import TRANSPOSES, aten


def argument(node: Node, index: int, name: str, default: object) -> object:
    """The argument at ``index`` of ``node``, or its keyword ``name``, or ``default``."""
    if len(node.args) > index:
        return node.args[index]
    return node.kwargs.get(name, default)


def swaps_last_two_dims(node: Node) -> bool:
    """``x.transpose(-2, -1)``, ``x.permute(..., -1, -2)`` or ``x.t()`` of a 2-D to 4-D tensor."""
    if node.op != "call_function" or node.target not in TRANSPOSES:
        return False
    value = node.meta.get("val")  # same rank as the input, whose meta a dequantize may lack
    if not isinstance(value, torch.Tensor) or not 2 <= value.dim() <= 4:
        return False
    rank = value.dim()
    if node.target is aten.t.default:
        return rank == 2
    if node.target is aten.transpose.int:
        return sorted(int(d) % rank for d in node.args[1:3]) == [rank - 2, rank - 1]
    dims = [int(d) % rank for d in node.args[1]]
    return dims == [*range(rank - 2), rank - 1, rank - 2]


def constant_arguments(node: Node) -> bool:
    """Whether every argument but the first (the activation input) is a constant."""
    found: list[Node] = []
    torch.fx.node.map_arg((node.args[1:], node.kwargs), found.append)
    return not found


def getitem_users(node: Node) -> dict[int, Node]:
    """``getitem`` index → node, of the LSTM's outputs read."""
    return {int(u.args[1]): u for u in node.users if u.target is operator.getitem}


def lstm_refusal(node: Node) -> str | None:
    """Why CMSIS-NN cannot run this ``aten.lstm.input`` (None: it can)."""
    params = node.args[2]
    has_biases, layers = bool(node.args[3]), int(node.args[4])
    if bool(argument(node, 7, "bidirectional", False)):
        return "a bidirectional LSTM (CMSIS-NN's LSTM runs one direction)"
    if len(params) != layers * (4 if has_biases else 2):
        return "an LSTM with proj_size > 0 (CMSIS-NN's LSTM has no projection)"
    if bool(argument(node, 6, "train", False)):
        return "an LSTM in training mode"
    if 2 in getitem_users(node) and getitem_users(node)[2].users:
        return "the final cell state c_n is read (CMSIS-NN's LSTM gives the hidden states)"
    return None
