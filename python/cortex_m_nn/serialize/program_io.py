"""The program's inputs and outputs: float (quantized inside the program) or int8 (``--io int8``).

By default a program takes and gives float tensors in the model's own layout: its first
kernel quantizes each input (``cortex_m_nn::quantize``) and its last dequantizes each output.
With ``--io int8`` those boundary kernels are not in the program: the caller gives each input
already quantized, ``q = clamp(round_half_even(x / scale) + zero_point, -128, 127)``, in the
layout the program computes in, and reads each output as int8, ``x = scale * (q -
zero_point)`` — what TensorFlow Lite Micro users do with int8 features.

The layout: a 4-D input or output is stored channels-last (NHWC: ``[N, H, W, C]`` for the
model's ``[N, C, H, W]``), any other tensor in the model's order. The program's tensor has the
stored shape; the report, the ``.pte`` metadata (one ``cortex_m_nn_input_<i>`` /
``cortex_m_nn_output_<i>`` record each) and the generated C header say which.

:func:`int8_io` derives the int8 program from the lowered graph: it is the same graph with
the boundary ``quantize``/``dequantize`` calls taken out, so its outputs, dequantized, equal
the float program's bit for bit (``verify`` checks this on every sample).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch.fx import GraphModule, Node
from torch.utils._pytree import tree_flatten, tree_unflatten

from cortex_m_nn.core.errors import CompileError
from cortex_m_nn.core.options import IoType
from cortex_m_nn.ops.library import operator
from cortex_m_nn.serialize.io_spec import IoQuantization, io_metadata

__all__ = ["IoType", "ProgramIo", "dequantize", "float_io", "int8_io", "quantize"]


@dataclass
class ProgramIo:
    """The graph the ``.pte`` serialises and what its inputs and outputs hold."""

    type: IoType
    graph: GraphModule
    #: per input/output: its int8 quantization, None for a float tensor
    inputs: list[IoQuantization | None]
    outputs: list[IoQuantization | None]
    #: the lowered graph's boundary nodes the program leaves to the caller
    removed: tuple[str, ...] = ()

    def program_inputs(self, sample: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
        """A float sample (model layout) as the program takes it."""
        return tuple(
            x if q is None else quantize(q, x) for x, q in zip(sample, self.inputs, strict=True)
        )

    def float_outputs(self, outputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """The program's outputs as the float program gives them (model layout)."""
        pairs = zip(outputs, self.outputs, strict=True)
        return [t if q is None else dequantize(q, t) for t, q in pairs]

    def metadata(self) -> dict[str, str]:
        """Constant methods the ``.pte`` records (none for float I/O)."""
        return io_metadata(self.type, self.inputs, self.outputs)


def quantize(spec: IoQuantization, x: torch.Tensor) -> torch.Tensor:
    """``x`` (model layout, float) as the program takes it: the boundary kernel's reference,
    so exactly what the float program computes first."""
    return operator("quantize")(x, spec.scale, spec.zero_point, list(spec.permutation), 1)


def dequantize(spec: IoQuantization, q: torch.Tensor) -> torch.Tensor:
    """A program output as the float program gives it (model layout)."""
    back = [spec.permutation.index(d) for d in range(len(spec.permutation))]
    return operator("dequantize")(q, spec.scale, spec.zero_point, back)


def float_io(lowered: GraphModule) -> ProgramIo:
    """The lowered graph as it is: float inputs and outputs."""
    inputs = [n for n in lowered.graph.nodes if n.op == "placeholder"]
    output = next(n for n in lowered.graph.nodes if n.op == "output")
    outputs = tree_flatten(output.args[0])[0]
    return ProgramIo(IoType.FLOAT, lowered, [None] * len(inputs), [None] * len(outputs))


def int8_io(lowered: GraphModule) -> ProgramIo:
    """The lowered graph with int8 inputs and outputs: each input's boundary ``quantize`` and
    each output's ``dequantize`` left to the caller. A CompileError names an input or output
    that is not quantized at the boundary (read or made by a float fallback)."""
    graph_module = copy.deepcopy(lowered)
    graph = graph_module.graph
    quantize, dequantize = operator("quantize"), operator("dequantize")
    removed: list[str] = []
    inputs: list[IoQuantization | None] = []
    for index, placeholder in enumerate([n for n in graph.nodes if n.op == "placeholder"]):
        users = list(placeholder.users)
        calls = {tuple(map(_key, u.args[1:])) for u in users if u.target == quantize}
        if not users or len(calls) != 1 or any(u.target != quantize for u in users):
            raise CompileError(_unquantized("input", index, placeholder, users))
        scale, zero_point, permutation, dtype = users[0].args[1:]
        if dtype != 1:
            raise CompileError(
                f"--io int8: input {index} ({placeholder.name}) is int16 (--activations "
                "int16): use --io float"
            )
        spec = IoQuantization(
            float(scale), int(zero_point), tuple(placeholder.meta["val"].shape), tuple(permutation)
        )
        with graph.inserting_before(placeholder):
            int8 = graph.placeholder(f"{placeholder.name}_int8")
        int8.meta["val"] = torch.empty(spec.shape, dtype=torch.int8)
        for user in users:
            user.replace_all_uses_with(int8)
            removed.append(user.name)
            graph.erase_node(user)
        graph.erase_node(placeholder)
        inputs.append(spec)
    output = next(n for n in graph.nodes if n.op == "output")
    leaves, tree = tree_flatten(output.args[0])
    for index, leaf in enumerate(leaves):
        if not isinstance(leaf, Node) or leaf.target != dequantize:
            raise CompileError(_unquantized("output", index, leaf, []))
    shapes = _stored_shapes(graph_module, [leaf.args[0] for leaf in leaves])
    for index, leaf in enumerate(leaves):
        if leaf.args[0].meta["val"].dtype != torch.int8:
            raise CompileError(
                f"--io int8: output {index} ({leaf.name}) is int16 (--activations int16): "
                "use --io float"
            )
    outputs: list[IoQuantization | None] = []
    for leaf, stored in zip(leaves, shapes, strict=True):
        _, scale, zero_point, back = leaf.args  # back: stored order → the model's
        permutation = tuple(back.index(d) for d in range(len(back)))
        model_shape = tuple(stored[d] for d in back) if back else tuple(stored)
        outputs.append(IoQuantization(float(scale), int(zero_point), model_shape, permutation))
        removed.append(leaf.name)
    output.args = (tree_unflatten([_computed(graph, leaf.args[0]) for leaf in leaves], tree),)
    graph.eliminate_dead_code()
    graph.lint()
    graph_module.recompile()
    return ProgramIo(IoType.INT8, graph_module, inputs, outputs, tuple(removed))


def _computed(graph: torch.fx.Graph, value: Node) -> Node:
    """``value``, or where it is a view (a model ending in a reshape) a contiguous copy of it
    (``cortex_m_nn::strided_copy``): a program returns tensors it computes, and its float
    form's ``dequantize`` was the copy."""
    if value.target is not torch.ops.aten.view.default:
        return value
    shape = list(value.meta["val"].shape)
    strides = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    with graph.inserting_after(value):
        copied = graph.call_function(operator("strided_copy"), (value, shape, strides, 0))
    copied.meta["val"] = torch.empty(shape, dtype=value.meta["val"].dtype)
    return copied


def _key(value: object) -> object:
    return tuple(value) if isinstance(value, list) else value


def _stored_shapes(graph_module: GraphModule, nodes: list[Node]) -> list[tuple[int, ...]]:
    """The shapes of ``nodes``, propagated with fake tensors from the placeholders' values
    (the cortex_m_nn operators' fake implementations give their shapes)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    mode = FakeTensorMode(allow_non_fake_inputs=True)
    placeholders = [n for n in graph_module.graph.nodes if n.op == "placeholder"]
    fakes = [mode.from_tensor(n.meta["val"]) for n in placeholders]
    FakeTensorProp(graph_module, mode).propagate_dont_convert_inputs(*fakes)
    return [tuple(node.meta["val"].shape) for node in nodes]


def _unquantized(kind: str, index: int, node: object, users: list[Node]) -> str:
    name = getattr(node, "name", repr(node))
    readers = ", ".join(sorted({str(getattr(u, "target", u)) for u in users})) or "nothing"
    how = f"read by {readers}" if kind == "input" else f"made by {getattr(node, 'target', node)}"
    return (
        f"--io int8: {kind} {index} ({name}) is not quantized at the program's boundary "
        f"({how}): lower what reads or makes it (the report's fallbacks), or use --io float"
    )
