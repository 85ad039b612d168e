"""``shared_values.share_values`` on hand-made plans: which values are shared, and every
reference to a value (kernel arguments, list items, inputs, outputs) still names an equal one."""

from __future__ import annotations

import pytest
from executorch.exir.schema import (
    AllocationDetails,
    Chain,
    ContainerMetadata,
    Double,
    EValue,
    ExecutionPlan,
    Instruction,
    Int,
    IntList,
    KernelCall,
    Null,
    Operator,
    ScalarType,
    Tensor,
    TensorList,
    TensorShapeDynamism,
)

from cortex_m_nn.serialize.shared_values import share_values


def _tensor(offset: int = 0, size: int = 4) -> EValue:
    """A planned int8 tensor of ``size`` elements at ``offset`` of buffer 1."""
    at = AllocationDetails(1, offset, 0)
    return EValue(
        Tensor(ScalarType.CHAR, 0, [size], [0], False, 0, 0, at, TensorShapeDynamism.STATIC)
    )


def _plan(values: list[EValue], calls: list[list[int]], operator: str = "cortex_m_nn::conv2d"):
    chain = Chain([], [], [Instruction(KernelCall(0, args)) for args in calls], None)
    return ExecutionPlan(
        "forward", ContainerMetadata("", ""), values, [0], [len(values) - 1], [chain],
        [Operator(operator, "out")], [], [0, 64],
    )  # fmt: skip


def _resolved(plan: ExecutionPlan, index: int) -> object:
    """A value with the values it names (list items) resolved, to compare across plans."""
    value = plan.values[index].val
    if isinstance(value, IntList | TensorList):
        return (type(value).__name__, [_resolved(plan, i) for i in value.items])
    return value


#: case → (values, kernel calls, values left after sharing)
CASES = {
    "equal ints": ([_tensor(), EValue(Int(1)), EValue(Int(1)), _tensor()], [[0, 1, 2, 3]], 3),
    "different ints": ([_tensor(), EValue(Int(1)), EValue(Int(2)), _tensor()], [[0, 1, 2, 3]], 4),
    "0.0 and -0.0": (
        [_tensor(), EValue(Double(0.0)), EValue(Double(-0.0)), _tensor()], [[0, 1, 2, 3]], 4
    ),
    "int lists of equal ints": (
        [_tensor(), EValue(Int(1)), EValue(Int(1)), EValue(IntList([1, 2])), EValue(Int(1)),
         EValue(IntList([4, 4])), _tensor()],
        [[0, 3, 5, 6]],
        4,
    ),
    "nulls across calls": (
        [_tensor(), EValue(Null()), _tensor(), EValue(Null()), _tensor()],
        [[0, 1, 2], [2, 3, 4]],
        4,
    ),
    "tensors naming the same bytes": (
        [_tensor(0), _tensor(16), _tensor(16), _tensor(32)], [[0, 1, 2, 3]], 3
    ),
    "tensors at one offset with other shapes": (
        [_tensor(0), _tensor(16, 4), _tensor(16, 8), _tensor(32)], [[0, 1, 2, 3]], 4
    ),
    "an input and an output equal to others": (
        [_tensor(0), _tensor(0), _tensor(16), _tensor(16)], [[0, 1, 2, 3]], 4
    ),
    "a tensor list of shared tensors": (
        [_tensor(0), EValue(Int(5)), EValue(Int(5)), _tensor(16), _tensor(16), _tensor(48),
         EValue(TensorList([3, 4])), _tensor(32)],
        [[0, 1, 2, 3, 4, 6, 7], [0, 5, 7]],
        6,
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_equal_constants_are_stored_once(case: str) -> None:
    values, calls, left = CASES[case]
    plan = _plan(values, calls)
    shared = share_values(plan)
    assert len(shared.values) == left
    before = [[_resolved(plan, a) for a in call] for call in calls]
    after = [
        [_resolved(shared, a) for a in i.instr_args.args] for i in shared.chains[0].instructions
    ]
    assert after == before
    ends = [_resolved(shared, i) for i in shared.inputs + shared.outputs]
    assert ends == [_resolved(plan, i) for i in plan.inputs + plan.outputs]


def test_a_program_with_other_kernels_is_refused() -> None:
    plan = _plan([_tensor(), EValue(Int(1)), _tensor()], [[0, 1, 2]], "aten::sym_size")
    with pytest.raises(ValueError, match="may write scalar values"):
        share_values(plan)
