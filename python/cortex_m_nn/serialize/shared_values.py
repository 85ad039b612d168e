"""Equal values stored once in the program.

ExecuTorch's emitter writes a new value for every argument of every call: DS-CNN's
``forward`` holds 127 ``Int`` values and 32 ``IntList`` values, most of them equal (``-128``,
``127``, ``[1, 1]`` …), and a ``Tensor`` value for every activation and scratch buffer, many
of them describing the same bytes (the memory plan puts tensors that do not live at the same
time at the same offset). On the device each value is a 16-byte ``EValue`` in the method
allocator; each tensor adds a 32-byte ``TensorImpl`` and its strides, each int list its boxed
and unboxed items. :func:`share_values` keeps the first of each set of interchangeable
values and points every reference at it (DS-CNN: 236 values → 87):

* equal ``Int``, ``Double``, ``Bool``, ``None``, ``IntList``, ``BoolList``, ``DoubleList``
  values — no kernel writes them;
* equal ``Tensor`` values — the same bytes (memory id and offset, or constant buffer) with the
  same type, shape and dim order; a kernel writing one writes exactly what the other names.
  The program's inputs and outputs are never shared (the caller sets and reads them).

Tensor lists are not shared. It is applied only to programs whose every kernel is a
``cortex_m_nn`` operator: their schemas (``cortex_m_nn.ops``) return tensors only, so no
instruction writes a scalar value, and a call's input and output never share bytes (both live
during the call, so the planner gives them different offsets).
"""

from __future__ import annotations

import dataclasses

from executorch.exir import schema

from cortex_m_nn.ops.library import NAMESPACE

#: The value types no cortex_m_nn kernel writes.
CONSTANT = (schema.Int, schema.Double, schema.Bool, schema.Null, schema.BoolList, schema.DoubleList)


def _key(value: schema.EValue, remap: dict[int, int], ends: set[int], index: int) -> tuple | None:
    """What makes two values interchangeable, or None for a value never shared (``ends``: the
    program's inputs and outputs)."""
    payload = value.val
    if isinstance(payload, schema.Tensor):
        return None if index in ends else ("Tensor", repr(payload))
    if isinstance(payload, schema.IntList):
        return ("IntList", tuple(remap[i] for i in payload.items))
    if isinstance(payload, CONSTANT):
        return (type(payload).__name__, repr(payload))  # repr: 0.0 and -0.0 stay apart
    return None


def shareable(plan: schema.ExecutionPlan) -> bool:
    """Whether every instruction of ``plan`` calls a cortex_m_nn kernel."""
    ours = all(op.name.startswith(f"{NAMESPACE}::") for op in plan.operators)
    calls = all(
        isinstance(i.instr_args, schema.KernelCall) for c in plan.chains for i in c.instructions
    )
    return ours and calls


def _remapped(value: schema.EValue, remap: dict[int, int]) -> schema.EValue:
    """``value`` with the value indices it holds (list items) renumbered."""
    items = getattr(value.val, "items", None)
    if items is None or isinstance(value.val, schema.BoolList | schema.DoubleList):
        return value
    moved = [remap[i] if i >= 0 else i for i in items]  # -1: an absent optional tensor
    return schema.EValue(dataclasses.replace(value.val, items=moved))


def _renumber(chain: schema.Chain, remap: dict[int, int]) -> schema.Chain:
    """``chain`` with its inputs, outputs and kernel arguments renumbered."""

    def call(instruction: schema.Instruction) -> schema.Instruction:
        arguments = [remap[a] for a in instruction.instr_args.args]
        return schema.Instruction(dataclasses.replace(instruction.instr_args, args=arguments))

    return dataclasses.replace(
        chain,
        inputs=[remap[i] for i in chain.inputs],
        outputs=[remap[i] for i in chain.outputs],
        instructions=[call(i) for i in chain.instructions],
    )


def share_values(plan: schema.ExecutionPlan) -> schema.ExecutionPlan:
    """``plan`` with each set of interchangeable values stored once (see the module)."""
    if not shareable(plan):
        raise ValueError(f"{plan.name} calls kernels that may write scalar values")
    remap: dict[int, int] = {}
    first: dict[tuple, int] = {}
    values: list[schema.EValue] = []
    ends = {*plan.inputs, *plan.outputs}
    for index, value in enumerate(plan.values):
        key = _key(value, remap, ends, index)
        if key is not None and key in first:
            remap[index] = first[key]
            continue
        remap[index] = len(values)
        values.append(_remapped(value, remap))
        if key is not None:
            first[key] = remap[index]
    return dataclasses.replace(
        plan,
        values=values,
        inputs=[remap[i] for i in plan.inputs],
        outputs=[remap[i] for i in plan.outputs],
        chains=[_renumber(chain, remap) for chain in plan.chains],
    )
