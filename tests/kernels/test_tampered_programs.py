"""Tampered and mismatched programs: compiled models whose tensors, scratch, arena, arguments
or bytes were changed after compilation (with ExecuTorch's own (de)serializer) either run or
are refused with an error from ExecuTorch (RuntimeError/ValueError in Python); never a crash or
an out-of-bounds access. Run under the sanitized kernels build (conftest.py, docs/testing.md:
Kernels), an access outside a tensor aborts the process with the sanitizer's report."""

from __future__ import annotations

import os
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F
from executorch.exir import schema
from executorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary
from executorch.exir.scalar_type import ScalarType
from executorch.runtime import Runtime
from tests.python import models
from torch import nn

from cortex_m_nn.check.host_kernels import KernelAbi
from cortex_m_nn.frontend.model_source import ModelSource, load_model

from .test_models import compile_for

#: mutated programs per (model, mutation), more for a longer run; seeded, so reproducible
INSTANCES = int(os.environ.get("CORTEX_M_NN_TAMPERED_INSTANCES", "24"))
#: operators whose second output is their CMSIS-NN scratch (python/cortex_m_nn/ops/library.py)
SCRATCH_OPERATORS = {"conv2d", "depthwise_conv2d", "transpose_conv2d", "avg_pool2d", "batch_matmul"}


class Mixed(nn.Module):
    """The operators conv_stack, pools and DS-CNN do not reach: pad, max pool, transposed
    convolution, strided copy, resize, LUT, layer norm, transpose, batch matmul, reduce, concat."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.norm = nn.LayerNorm(4)
        self.linear = nn.Linear(12, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.conv(x))
        a = F.max_pool2d(F.pad(y, (1, 1, 1, 1)), 2)
        b = self.up(a)[:, :, 1:5, ::2]
        c = torch.sigmoid(F.interpolate(b, scale_factor=2.0, mode="nearest"))
        t = self.norm(c.flatten(2).transpose(1, 2))
        m = torch.matmul(t.transpose(1, 2), t)
        return self.linear(torch.cat([m.sum(-1), m.amax(-1), t.mean(1)], dim=1))


def mixed() -> tuple[nn.Module, tuple[torch.Tensor]]:
    return models.seeded(Mixed, 1, 3, 8, 8)


FACTORIES = {"conv_stack": models.conv_stack, "pools": models.pools, "mixed": mixed}
MODELS = [*FACTORIES, "ds_cnn"]


def _source(name: str) -> ModelSource:
    if name == "ds_cnn":
        return load_model(None)  # the built-in default model
    module, example = FACTORIES[name]()
    return ModelSource(name, module, example)


@dataclass
class Compiled:
    pte: bytes
    inputs: tuple[torch.Tensor, ...]


@pytest.fixture(scope="module")
def compiled(kernels: KernelAbi) -> dict[str, Compiled]:
    found = {}
    for name in MODELS:
        source = _source(name)
        found[name] = Compiled(compile_for(source, kernels).pte, tuple(source.example_inputs))
    return found


# --- Mutations: each changes one thing of the forward method and says what, or returns None
# when the program has nothing it applies to. ----------------------------------------------


def forward_plan(program: schema.Program) -> schema.ExecutionPlan:
    return next(p for p in program.execution_plan if p.name == "forward")


def kernel_calls(plan: schema.ExecutionPlan) -> list[tuple[str, list[int]]]:
    """(operator name without namespace, argument value indices) of our operators' calls."""
    calls = []
    for chain in plan.chains:
        for instruction in chain.instructions:
            call = instruction.instr_args
            if isinstance(call, schema.KernelCall):
                name = plan.operators[call.op_index].name
                if name.startswith("cortex_m_nn::"):
                    calls.append((name.split("::")[1], call.args))
    return calls


def argument_values(plan: schema.ExecutionPlan, kind: type) -> list[tuple[str, int]]:
    """(operator, value index) of every argument of type ``kind`` of our calls."""
    return [
        (op, i)
        for op, args in kernel_calls(plan)
        for i in args
        if isinstance(plan.values[i].val, kind)
    ]


def _new_extent(rng: random.Random, extent: int) -> int:
    return rng.choice([0, 1, extent + 1, max(extent - 1, 0), extent * 2, extent * 7 + 3, 65536])


def tensor_sizes(program: schema.Program, rng: random.Random) -> str | None:
    """One extent of an operator's tensor changed, or a dimension added or dropped."""
    plan = forward_plan(program)
    op, index = rng.choice(argument_values(plan, schema.Tensor))
    tensor = plan.values[index].val
    sizes = list(tensor.sizes)
    choice = rng.random()
    if choice < 0.15 and sizes:
        sizes.pop(rng.randrange(len(sizes)))
    elif choice < 0.3:
        sizes.insert(rng.randrange(len(sizes) + 1), rng.choice([1, 2, 3]))
    elif sizes:
        d = rng.randrange(len(sizes))
        sizes[d] = _new_extent(rng, sizes[d])
    if len(sizes) != len(tensor.dim_order) and rng.random() < 0.8:
        tensor.dim_order = list(range(len(sizes)))  # else ExecuTorch refuses the dim order
    before, tensor.sizes = tensor.sizes, sizes
    return f"{op}: value {index} sizes {before} -> {sizes}"


DTYPES = [ScalarType.BYTE, ScalarType.CHAR, ScalarType.SHORT, ScalarType.INT, ScalarType.LONG]
DTYPES += [ScalarType.FLOAT, ScalarType.BOOL, ScalarType.DOUBLE, ScalarType.HALF]


def tensor_dtype(program: schema.Program, rng: random.Random) -> str | None:
    """An operator's tensor given another scalar type."""
    plan = forward_plan(program)
    op, index = rng.choice(argument_values(plan, schema.Tensor))
    tensor = plan.values[index].val
    before = tensor.scalar_type
    tensor.scalar_type = rng.choice([t for t in DTYPES if t != before])
    return f"{op}: value {index} {before.name} -> {tensor.scalar_type.name}"


def scratch_size(program: schema.Program, rng: random.Random) -> str | None:
    """A kernel's planned scratch smaller than the program said (its second output)."""
    plan = forward_plan(program)
    scratches = [
        (op, args[-2])
        for op, args in kernel_calls(plan)
        if op in SCRATCH_OPERATORS and plan.values[args[-2]].val.sizes[0] > 0
    ]
    if not scratches:
        return None
    op, index = rng.choice(scratches)
    tensor = plan.values[index].val
    before = tensor.sizes[0]
    tensor.sizes = [rng.randrange(before)]
    return f"{op}: scratch {before} -> {tensor.sizes[0]} bytes"


def arena_size(program: schema.Program, rng: random.Random) -> str | None:
    """The planned arena smaller than the tensors planned in it."""
    plan = forward_plan(program)
    sizes = plan.non_const_buffer_sizes
    buffer = rng.randrange(1, len(sizes))
    before = sizes[buffer]
    if before == 0:
        return None
    sizes[buffer] = rng.choice([0, 1, before // 2, before - 1, rng.randrange(before)])
    return f"arena {buffer}: {before} -> {sizes[buffer]} bytes"


INTERESTING_INTS = [0, 1, -1, 2, -2, 31, -32, 127, 128, -129, 255, 2**15, 2**31, -(2**31) - 1]
INTERESTING_INTS += [2**32, 2**32 + 1, 2**32 + 3, -(2**32) + 1, 2**62]


def int_argument(program: schema.Program, rng: random.Random) -> str | None:
    """An int argument (offset, activation bound, multiplier, shift, mode, dim, kind, scratch
    bytes, or an element of a stride/padding/permutation list) set to another value."""
    plan = forward_plan(program)
    ints = argument_values(plan, schema.Int)
    for op, index in argument_values(plan, schema.IntList):
        ints += [(op, item) for item in plan.values[index].val.items]
    op, index = rng.choice(ints)
    value = plan.values[index].val
    before = value.int_val
    value.int_val = rng.choice(
        [*INTERESTING_INTS, before + 1, before - 1, -before, before * 3, before + 2**32]
    )
    return f"{op}: value {index} {before} -> {value.int_val}"


def int_list_length(program: schema.Program, rng: random.Random) -> str | None:
    """An int list argument (stride, padding, dilation, kernel size, permutation, sizes,
    strides, dims) one element shorter or longer, or empty."""
    plan = forward_plan(program)
    op, index = rng.choice(argument_values(plan, schema.IntList))
    items = plan.values[index].val.items
    before = len(items)
    choice = rng.random()
    if choice < 0.4 and items:
        items.pop(rng.randrange(len(items)))
    elif choice < 0.8:  # one more int: one of the list's, or any Int value of the plan
        ints = [i for i, v in enumerate(plan.values) if isinstance(v.val, schema.Int)]
        items.append(rng.choice(items or ints))
    else:
        items.clear()
    return f"{op}: list {index} length {before} -> {len(items)}"


CONSTANT_INT32S = [-(2**31), -1000, -40, -32, -1, 0, 31, 32, 40, 1000, 65536, 2**31 - 1]


def constant_data(program: schema.Program, rng: random.Random) -> str | None:
    """One element of an operator's constant (weights, bias, per-channel multipliers and
    shifts, lookup table, resize indices) set to a value the compiler never writes there."""
    plan = forward_plan(program)
    constants = [
        (op, i)
        for op, i in argument_values(plan, schema.Tensor)
        if plan.values[i].val.data_buffer_idx > 0
    ]
    op, index = rng.choice(constants)
    tensor = plan.values[index].val
    buffer = program.constant_buffer[tensor.data_buffer_idx]
    data = bytearray(buffer.storage)
    if tensor.scalar_type == ScalarType.INT and len(data) >= 4:
        at = rng.randrange(len(data) // 4) * 4
        value = rng.choice(CONSTANT_INT32S)
        data[at : at + 4] = value.to_bytes(4, "little", signed=True)
    elif data:
        at, value = rng.randrange(len(data)), rng.randrange(256)
        data[at] = value
    else:
        return None
    buffer.storage = bytes(data)
    return f"{op}: constant {index} ({tensor.scalar_type.name}) byte {at} -> {value}"


def compound(program: schema.Program, rng: random.Random) -> str | None:
    """Two to four of the mutations above in one program (a window argument and the shape it
    must agree with, say)."""
    done = []
    for _ in range(rng.randint(2, 4)):
        name = rng.choice([n for n in MUTATIONS if n != "compound"])
        what = MUTATIONS[name](program, rng)
        if what is not None:
            done.append(what)
    return "; ".join(done) or None


Mutation = Callable[[schema.Program, random.Random], "str | None"]
MUTATIONS: dict[str, Mutation] = {
    "tensor_sizes": tensor_sizes,
    "tensor_dtype": tensor_dtype,
    "scratch_size": scratch_size,
    "arena_size": arena_size,
    "int_argument": int_argument,
    "int_list_length": int_list_length,
    "constant_data": constant_data,
    "compound": compound,
}


def mutated(pte: bytes, mutation: str, rng: random.Random) -> tuple[bytes, str] | None:
    """The program with one mutation applied, and what changed (None: nothing to mutate)."""
    if mutation == "truncate":
        cut = rng.choice([rng.randrange(len(pte)), rng.randrange(len(pte) - 64, len(pte))])
        return pte[:cut], f"truncated to {cut} of {len(pte)} bytes"
    pte_file = deserialize_pte_binary(pte)
    what = MUTATIONS[mutation](pte_file.program, rng)
    return None if what is None else (bytes(serialize_pte_binary(pte_file)), what)


def outcome(pte: bytes, inputs: tuple[torch.Tensor, ...]) -> str:
    """Load and run the program's forward: "ran", or "refused" with an error from ExecuTorch.
    Any other exception fails the test; a crash or a sanitizer report ends the process."""
    try:
        method = Runtime.get().load_program(pte).load_method("forward")
        method.execute(list(inputs))
    except (RuntimeError, ValueError):
        return "refused"
    return "ran"


@pytest.mark.parametrize("mutation", [*MUTATIONS, "truncate"])
@pytest.mark.parametrize("model", MODELS)
def test_tampered_program_runs_or_is_refused(
    compiled: dict[str, Compiled], model: str, mutation: str, record_property
) -> None:
    program = compiled[model]
    rng = random.Random(f"{model}/{mutation}")
    seen: Counter[str] = Counter()
    for _ in range(INSTANCES):
        case = mutated(program.pte, mutation, rng)
        if case is None:
            continue
        pte, what = case
        print(f"{model} {mutation}: {what}", flush=True)  # the last line names a crash's cause
        result = outcome(pte, program.inputs)
        print(f"  {result}", flush=True)
        seen[result] += 1
    record_property("tampered_programs", sum(seen.values()))
    if mutation in ("scratch_size", "arena_size", "truncate", "tensor_dtype"):
        assert seen["refused"] == sum(seen.values()), seen  # none of these can run
    assert not seen or seen["refused"], f"{model}/{mutation}: no mutation was refused: {seen}"


def test_a_window_longer_than_its_padded_input_is_refused(kernels: KernelAbi) -> None:
    """A 3x3 convolution with stride 3 over a 3x3 input gives one output position; tampered to
    dilation 2, its window spans 5 of the 3 inputs and fits nowhere (the Python reference's
    floor count: (3 - 4 - 1) // 3 + 1 = 0), so the kernel refuses the program instead of
    reading past the input. A truncating division counted 1 and let it run."""
    torch.manual_seed(0)
    module = nn.Sequential(nn.Conv2d(1, 2, kernel_size=3, stride=3), nn.ReLU())
    source = ModelSource("window", module.eval(), (torch.randn(1, 1, 3, 3),))
    program = compile_for(source, kernels)
    assert outcome(program.pte, tuple(source.example_inputs)) == "ran"
    pte_file = deserialize_pte_binary(program.pte)
    plan = next(p for p in pte_file.program.execution_plan if p.name == "forward")
    calls = [i.instr_args for c in plan.chains for i in c.instructions]
    conv = next(
        c
        for c in calls
        if isinstance(c, schema.KernelCall)
        and plan.operators[c.op_index].name == "cortex_m_nn::conv2d"
    )
    dilation = plan.values[conv.args[7]].val  # input, weight, bias, multipliers, shifts, stride,
    assert isinstance(dilation, schema.IntList)  # padding, dilation, ...
    plan.values.append(schema.EValue(schema.Int(2)))  # a value of its own: ints are shared
    dilation.items = [len(plan.values) - 1] * 2
    tampered = bytes(serialize_pte_binary(pte_file))
    assert outcome(tampered, tuple(source.example_inputs)) == "refused"


class Paths(nn.Module):
    """A 3x3 convolution, a 3x3 depthwise one and a 1x1 one: one call of each path kind."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(2, 4, 3, padding=1)
        self.b = nn.Conv2d(4, 4, 3, padding=1, groups=4)
        self.c = nn.Conv2d(4, 3, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c(F.relu(self.b(F.relu(self.a(x)))))


#: (operator, which of its calls, path) → what the kernel does: the 1x1 convolution's path 1
#: (arm_convolve_1x1_s8) computes what the wrapper does; path 1 on the 3x3 convolution and an
#: unknown path on the depthwise one are refused (core.cmsis_nn's paths)
PATH_CASES = [
    ("cortex_m_nn::conv2d", 1, 1, "same"),
    ("cortex_m_nn::conv2d", 0, 1, "refused"),
    ("cortex_m_nn::depthwise_conv2d", 0, 7, "refused"),
    ("cortex_m_nn::depthwise_conv2d", 0, 1, "same"),
]


@pytest.mark.parametrize(("operator", "which", "path", "expected"), PATH_CASES)
def test_a_call_runs_its_path_or_is_refused(
    kernels: KernelAbi, operator: str, which: int, path: int, expected: str
) -> None:
    """A call's path argument (the int before scratch_bytes) set after compilation: the
    registration dispatches it to its case, which computes the same bytes where its function
    takes the shape and refuses the program otherwise."""
    torch.manual_seed(0)
    source = ModelSource("paths", Paths().eval(), (torch.randn(1, 2, 6, 5),))
    program = compile_for(source, kernels)
    inputs = tuple(source.example_inputs)
    pte_file = deserialize_pte_binary(program.pte)
    plan = next(p for p in pte_file.program.execution_plan if p.name == "forward")
    calls = [i.instr_args for c in plan.chains for i in c.instructions]
    call = [
        c
        for c in calls
        if isinstance(c, schema.KernelCall) and plan.operators[c.op_index].name == operator
    ][which]
    position = 12 if operator.endswith("::conv2d") else 13  # path, before scratch_bytes
    assert isinstance(plan.values[call.args[position]].val, schema.Int)
    plan.values.append(schema.EValue(schema.Int(path)))  # a value of its own: ints are shared
    call.args[position] = len(plan.values) - 1
    tampered = bytes(serialize_pte_binary(pte_file))
    if expected == "refused":
        assert outcome(tampered, inputs) == "refused"
        return
    run = Runtime.get().load_program
    before = run(program.pte).load_method("forward").execute(list(inputs))
    after = run(tampered).load_method("forward").execute(list(inputs))
    assert all(torch.equal(a, b) for a, b in zip(before, after, strict=True))
