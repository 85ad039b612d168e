"""Questions about a node of an exported graph that several stages ask the same way."""

from __future__ import annotations

import operator
import os
import re
from pathlib import Path

import torch
from torch.fx import Node

from cortex_m_nn.core.families import FLOAT_NAMESPACE, TRANSPOSES, aten


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


def positive_scale(node: Node) -> float | None:
    """The number of ``x * number`` (either order) when it is positive: attention's 1/√d,
    which a batch matmul's requantization takes in; else None."""
    if node.op != "call_function" or node.target is not aten.mul.Tensor or node.kwargs:
        return None
    tensors = [a for a in node.args if isinstance(a, Node)]
    numbers = [a for a in node.args if isinstance(a, int | float) and not isinstance(a, bool)]
    if len(tensors) != 1 or len(numbers) != 1 or not numbers[0] > 0:
        return None
    return float(numbers[0])


def scaled_product(node: Node) -> Node | None:
    """The positive-scale multiply (:func:`positive_scale`) that alone reads ``node``."""
    users = list(node.users)
    if len(users) != 1 or positive_scale(users[0]) is None:
        return None
    return users[0]


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
    c_n = getitem_users(node).get(2)
    if c_n is not None and not _kept(c_n, node.args[1]):
        return (
            "the final cell state c_n is read (CMSIS-NN's LSTM gives the hidden states; to "
            "carry the state from call to call, wrap the LSTM in cortex_m_nn.nn.Streaming)"
        )
    return None


def _kept(value: Node, initial: object) -> bool:
    """Whether ``value`` is read only to be written back into a buffer of ``initial``, the
    state the layer started from: ``nn.Streaming``'s state kept for the next call."""
    buffers = [b for b in initial if isinstance(b, Node)] if isinstance(initial, list) else []
    for user in value.users:
        if user.target in (aten.detach.default, aten.alias.default):
            if not _kept(user, initial):
                return False
        elif user.target is not aten.copy_.default or user.args[1] is not value:
            return False
        elif user.args[0] not in buffers or user.args[0].op != "get_attr":
            return False
    return True


def gru_refusal(node: Node) -> str | None:
    """Why our GRU kernel cannot run this ``aten.gru.input`` (None: it can)."""
    if bool(argument(node, 7, "bidirectional", False)):
        return "a bidirectional GRU (our GRU runs one direction)"
    if bool(argument(node, 6, "train", False)):
        return "a GRU in training mode"
    return None


# -- names and places: how a report names an operator and finds it in the model's code ----


def base_name(op: str) -> str:
    """``conv2d`` for ``aten.conv2d``, ``aten.conv2d.padding`` or ``aten::relu_`` → ``relu``."""
    parts = op.replace("::", ".").split(".")
    if len(parts) > 1 and parts[0] in ("aten", "torch", "ops"):
        parts = parts[1:]
    return parts[0].removesuffix("_")


def op_name(target: object) -> str:
    """``aten.conv2d``; our float operators by their own name (``svdf_memory``)."""
    name = getattr(target, "_name", None) or str(target)
    name = name.replace("::", ".").removesuffix(".default")
    return name.removeprefix(f"{FLOAT_NAMESPACE}.")


_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)\n\s*(.*)')


def _model_frame(node: Node) -> tuple[str, str, str] | None:
    """(file, line, code) of the innermost frame of the model's own code in the trace."""
    frames = _FRAME.findall(node.meta.get("stack_trace") or "")
    user = [f for f in frames if "/torch/" not in f[0]] or frames
    if not user:
        return None
    file, line, _, code = user[-1]
    return file, line, code.strip()


def module_of(node: Node) -> str:
    """``norm (LayerNorm)``: the innermost module the op was called in."""
    module_stack = node.meta.get("nn_module_stack") or {}
    if not module_stack:
        return ""
    path, kind = list(module_stack.values())[-1]
    return f"{path or 'model'} ({kind.rsplit('.', 1)[-1]})"


def source_line(node: Node) -> str:
    """``path/to/model.py:51``, the path relative to the working directory when inside it."""
    frame = _model_frame(node)
    if frame is None:
        return ""
    file, line, _ = frame
    path = Path(file)
    if path.is_absolute():
        try:
            file = os.path.relpath(path) if path.is_relative_to(Path.cwd()) else file
        except (OSError, ValueError):
            pass
    return f"{file}:{line}"


def source_location(node: Node) -> str:
    """Where the op comes from: the module path and the innermost model frame."""
    parts = [module_of(node)] if module_of(node) else []
    frame = _model_frame(node)
    if frame is not None:
        file, line, code = frame
        parts.append(f"{file.rsplit('/', 1)[-1]}:{line}: {code}")
    return ", ".join(parts)
