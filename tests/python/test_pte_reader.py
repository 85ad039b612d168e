"""The lean ``.pte`` reader (``cortex_m_nn.serialize.pte_format``, under
``cortex_m_nn.serialize.pte``) against
ExecuTorch's own ``deserialize_pte_binary``.

Real programs (the built-in DS-CNN, test models with and without fallback operators, a zoo
model), the flatbuffer alone with its constants inline, and a program with a method holding
every kind of value and instruction are read both ways: every field the reader returns and
every ``cortex_m_nn.serialize.pte`` function's result must equal what the ExecuTorch reading gives.
A truncated or foreign file is one clear error, and ``embed`` imports neither torch nor
ExecuTorch.
"""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys
from pathlib import Path

import pytest
from executorch.exir import schema
from executorch.exir._serialize._flatbuffer_program import _program_to_flatbuffer
from executorch.exir._serialize._program import (
    PTEFile,
    deserialize_pte_binary,
    serialize_pte_binary,
)
from tests.quantized_models import QuantizedModels
from tests.zoo import ZOO

from cortex_m_nn.cli import main as cli
from cortex_m_nn.core.errors import CompileError
from cortex_m_nn.core.operators import load_yaml
from cortex_m_nn.embed import pte_source as embed
from cortex_m_nn.serialize import pte
from cortex_m_nn.serialize.pte_format import PteFormatError, read_program

from .models import conv_stack, with_rms_norm

ROOT = Path(__file__).resolve().parents[2]

#: name → (model, core, allow_fallback): real programs the reader must read as ExecuTorch does.
MODELS = {
    "conv_stack-m33": (conv_stack, "cortex-m33", False),
    "rms_norm_fallback-m55": (with_rms_norm, "cortex-m55", True),
    "autoencoder-m0plus": (ZOO["autoencoder"], "cortex-m0plus", False),
}


@pytest.fixture(scope="module")
def programs(ds_cnn_compiled, quantized_models: QuantizedModels) -> dict[str, bytes]:
    """Serialised programs by name, compiled once for the module."""
    found = {"ds_cnn-m55": ds_cnn_compiled.pte}
    for name, (factory, core, fallback) in MODELS.items():
        lowered = quantized_models.get(name.split("-")[0], factory).lower(core, fallback)
        found[name] = lowered.pte
    # The flatbuffer alone: no extended header, the constants inline in constant_buffer.
    inline = deserialize_pte_binary(found["ds_cnn-m55"]).program
    found["ds_cnn-inline"] = _program_to_flatbuffer(inline).data
    found["every-kind"] = _with_every_kind(found["conv_stack-m33"])
    return found


def _with_every_kind(data: bytes) -> bytes:
    """``data`` with one more method holding every kind of value and instruction."""
    program = deserialize_pte_binary(data).program
    tensor = dataclasses.replace(
        next(v.val for v in program.execution_plan[0].values if isinstance(v.val, schema.Tensor)),
        allocation_info=schema.AllocationDetails(memory_id=1, memory_offset_low=0,
                                                 memory_offset_high=0),
    )  # fmt: skip
    values = [
        schema.Null(), schema.Int(0), schema.Int(-(2**40)), schema.Bool(True), schema.Bool(False),
        schema.Double(2.5), schema.String("ünïcode"), schema.IntList([3, -1]),
        schema.DoubleList([0.5, 1.5]), schema.BoolList([True, False, True]),
        schema.TensorList([11]), schema.OptionalTensorList([11, -1]), tensor,
    ]  # fmt: skip
    calls = [
        schema.KernelCall(op_index=1, args=[7, 11]), schema.KernelCall(op_index=0, args=[]),
        schema.DelegateCall(delegate_index=0, args=[1, 2, 3]), schema.MoveCall(1, 2),
        schema.JumpFalseCall(3, 0), schema.FreeCall(4),
    ]  # fmt: skip
    program.execution_plan.append(
        schema.ExecutionPlan(
            name="every_kind",
            container_meta_type=schema.ContainerMetadata("", ""),
            values=[schema.EValue(value) for value in values],
            inputs=[1, 2],
            outputs=[6],
            chains=[
                schema.Chain([], [], [schema.Instruction(c) for c in calls[:2]], None),
                schema.Chain([1], [2], [schema.Instruction(c) for c in calls[2:]], None),
            ],
            operators=[schema.Operator("a::b", ""), schema.Operator("c::d", "out")],
            delegates=[],
            non_const_buffer_sizes=[0, 2**33],
        )
    )
    return bytes(serialize_pte_binary(PTEFile(program=program)))


# --- the reference: the same readings on ExecuTorch's deserialised Program -----------------


def _reference_value(value: object) -> tuple[str, object]:
    kind = type(value).__name__
    if isinstance(value, schema.Tensor):
        size = [int(value.scalar_type), tuple(value.sizes), value.data_buffer_idx]
        return kind, (*size, value.allocation_info is not None)
    if isinstance(value, schema.Null):
        return kind, None
    if hasattr(value, "items"):
        return kind, tuple(value.items)
    field = dataclasses.fields(value)[0].name  # int_val, bool_val, double_val, string_val
    return kind, getattr(value, field)


def _reference_instruction(instruction: schema.Instruction) -> tuple[str, int, tuple]:
    call = instruction.instr_args
    op_index = call.op_index if isinstance(call, schema.KernelCall) else 0
    return type(call).__name__, op_index, tuple(getattr(call, "args", ()))


def _reference_plan(plan: schema.ExecutionPlan) -> dict[str, object]:
    return {
        "name": plan.name,
        "values": [_reference_value(value.val) for value in plan.values],
        "inputs": tuple(plan.inputs),
        "outputs": tuple(plan.outputs),
        "instructions": [
            _reference_instruction(i) for chain in plan.chains for i in chain.instructions
        ],
        "operators": [(op.name, op.overload or "") for op in plan.operators],
        "non_const_buffer_sizes": tuple(plan.non_const_buffer_sizes),
    }


def _lean_plan(plan) -> dict[str, object]:
    def value(v):
        if v.kind == "Tensor":
            t = v.payload
            return v.kind, (t.scalar_type, t.sizes, t.data_buffer_idx, t.planned)
        return v.kind, v.payload

    return {
        "name": plan.name,
        "values": [value(v) for v in plan.values],
        "inputs": plan.inputs,
        "outputs": plan.outputs,
        "instructions": [(i.kind, i.op_index, i.args) for i in plan.instructions],
        "operators": list(plan.operators),
        "non_const_buffer_sizes": plan.non_const_buffer_sizes,
    }


#: Bytes per element of the scalar types, as serialize/pte.py counts them.
_ELEMENT = {0: 1, 1: 1, 2: 2, 3: 4, 4: 8, 5: 2, 6: 4, 7: 8, 11: 1, 12: 1, 13: 1, 15: 2}


def _reference_results(data: bytes) -> dict[str, object]:
    """What each ``cortex_m_nn.serialize.pte`` function returns, computed from ExecuTorch's
    reading."""
    program = deserialize_pte_binary(data).program
    plan = next(p for p in program.execution_plan if p.name == "forward")
    ops = [f"{op.name}.{op.overload}" if op.overload else op.name for op in plan.operators]
    constants = {
        v.val.data_buffer_idx: _ELEMENT[int(v.val.scalar_type)] * math.prod(v.val.sizes)
        for p in program.execution_plan
        for v in p.values
        if isinstance(v.val, schema.Tensor)
        and v.val.data_buffer_idx > 0
        and v.val.allocation_info is None
    }
    metadata = {}
    for p in program.execution_plan:
        if p.name == "cortex_m_nn_metadata" and len(p.outputs) == 1:
            value = p.values[p.outputs[0]].val
            assert isinstance(value, schema.String)
            for line in value.string_val.split("\n"):
                name, _, text = line.partition("=")
                metadata[f"cortex_m_nn_{name}"] = text
    return {
        "planned_buffer_bytes": sum(plan.non_const_buffer_sizes),
        "pte_operators": ops,
        "constant_bytes": sum(constants.values()),
        "constant_storage_bytes": sum(len(b.storage) for b in program.constant_buffer),
        "pte_metadata": metadata,
        "runtime_overhead": _reference_overhead(plan),
        "load_temp_bytes": 28
        * max(
            (
                len(i.instr_args.args)
                for c in plan.chains
                for i in c.instructions
                if isinstance(i.instr_args, schema.KernelCall)
            ),
            default=0,
        ),
        "planned_buffer_sizes": list(plan.non_const_buffer_sizes[1:]),
        "scratch_buffer_sizes": _reference_scratch(plan),
        "forward_io": (len(plan.inputs), len(plan.outputs)),
    }


def _reference_overhead(plan: schema.ExecutionPlan) -> pte.RuntimeOverhead:
    """The same allocations, listed from ExecuTorch's own deserialised plan: (part, bytes,
    alignment) in Method::load's order, then laid out. The firmware's temporary allocator
    holds every call's TensorMeta list (28 B per argument, for the call with the most): no
    PlatformMemoryAllocator and no TensorMeta in the method allocator."""
    allocations = []
    allocations += [("values", 16 * len(plan.values), 8), ("values", len(plan.inputs), 1)]
    for value in plan.values:
        val = value.val
        if isinstance(val, schema.Tensor):
            rank = len(val.sizes)
            if val.shape_dynamism != schema.TensorShapeDynamism.STATIC:
                allocations += [("tensors", 4 * rank, 4), ("tensors", rank, 1)]
            allocations += [("tensors", 4 * rank, 4), ("tensors", 32, 4)]
        elif isinstance(val, schema.IntList):
            n = len(val.items)
            allocations += [("lists", 4 * n, 4), ("lists", 8 * n, 8), ("lists", 12, 4)]
        elif isinstance(val, schema.TensorList):
            n = len(val.items)
            allocations += [("lists", 4 * n, 4), ("lists", 4 * n, 4), ("lists", 12, 4)]
        elif isinstance(val, schema.DoubleList | schema.BoolList | schema.String):
            allocations.append(("lists", 8, 4))
    allocations += [("fixed", 32 * len(plan.delegates), 8), ("fixed", 16 * len(plan.chains), 4)]
    for chain in plan.chains:
        n = len(chain.instructions)
        allocations += [("instructions", 4 * n, 4), ("instructions", 8 * n, 4)]
        for instruction in chain.instructions:
            call = instruction.instr_args
            if isinstance(call, schema.KernelCall | schema.DelegateCall):
                allocations.append(("instructions", 4 * len(call.args), 4))
    parts = dict.fromkeys(("values", "tensors", "lists", "instructions", "fixed"), 0)
    end = 0
    for part, size, alignment in allocations:
        start = (end + alignment - 1) // alignment * alignment
        parts[part] += start + size - end
        end = start + size
    return pte.RuntimeOverhead(**parts)


def _reference_scratch(plan: schema.ExecutionPlan) -> list[int]:
    names = {f"cortex_m_nn::{op.name}": [a.name for a in op.arguments] for op in load_yaml()[1]}
    sizes = []
    for chain in plan.chains:
        for instruction in chain.instructions:
            call = instruction.instr_args
            if not isinstance(call, schema.KernelCall):
                continue
            arguments = names.get(plan.operators[call.op_index].name, [])
            if "scratch" in arguments:
                tensor = plan.values[call.args[arguments.index("scratch")]].val
                sizes.append(_ELEMENT[int(tensor.scalar_type)] * math.prod(tensor.sizes))
    return sizes


# --- the tests --------------------------------------------------------------------------


NAMES = [
    "ds_cnn-m55", *MODELS, "ds_cnn-inline", "every-kind",
]  # fmt: skip


@pytest.mark.parametrize("name", NAMES)
def test_reads_every_field_as_executorch_does(programs: dict[str, bytes], name: str) -> None:
    data = programs[name]
    expected = [
        _reference_plan(plan) for plan in deserialize_pte_binary(data).program.execution_plan
    ]
    assert [_lean_plan(plan) for plan in read_program(data).plans] == expected


@pytest.mark.parametrize("name", NAMES)
def test_every_function_gives_what_executorch_gives(programs: dict[str, bytes], name: str) -> None:
    data = programs[name]
    expected = _reference_results(data)
    assert {function: getattr(pte, function)(data) for function in expected} == expected
    assert expected["constant_storage_bytes"] > 0 and expected["pte_operators"]


def test_the_programs_cover_every_kind(programs: dict[str, bytes]) -> None:
    """The programs compared hold every kind of value and instruction, and aten fallbacks."""
    plans = [plan for data in programs.values() for plan in read_program(data).plans]
    kinds = {value.kind for plan in plans for value in plan.values}
    assert kinds >= {"Null", "Int", "Bool", "Double", "Tensor", "String", "IntList",
                     "DoubleList", "BoolList", "TensorList", "OptionalTensorList"}  # fmt: skip
    calls = {call.kind for plan in plans for call in plan.instructions}
    assert calls == {"KernelCall", "DelegateCall", "MoveCall", "JumpFalseCall", "FreeCall"}
    assert any(op.startswith("aten::") for op in pte.pte_operators(programs[NAMES[2]]))


def _truncations(data: bytes, header: bool) -> list[bytes]:
    """``data`` cut at every 1/16th: inside the header, the flatbuffer and the constants.
    With an extended header (which gives the sizes) also one byte short; without, the last
    bytes may be padding no reading needs."""
    return [data[: len(data) * n // 16] for n in range(16)] + ([data[:-1]] if header else [])


@pytest.mark.parametrize("name", ["ds_cnn-m55", "ds_cnn-inline"])
def test_a_truncated_program_is_one_clear_error(
    programs: dict[str, bytes], name: str, tmp_path: Path, capsys
) -> None:
    for cut in _truncations(programs[name], header=name != "ds_cnn-inline"):
        with pytest.raises(PteFormatError, match=r"truncated|too few|not an ExecuTorch"):
            read_program(cut)
    path = tmp_path / "cut.pte"
    path.write_bytes(programs[name][: len(programs[name]) // 3])
    assert cli.main(["embed", str(path), "--output-dir", str(tmp_path / "out"), "-q"]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and "cannot read the .pte" in lines[0], lines
    assert "truncated" in lines[0] and lines[0].endswith("give a .pte file")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "0 bytes are too few for an ExecuTorch program"),
        (b"hello, world: not a program", "not an ExecuTorch program (file identifier b'o, w'"),
        (b"\x10\x00\x00\x00ET12" + b"\xff" * 8, "lies outside the program's 16 bytes"),
    ],
)
def test_a_file_that_is_no_program_says_so(data: bytes, message: str) -> None:
    with pytest.raises(PteFormatError, match=message.replace("(", r"\(")):
        read_program(data)
    with pytest.raises(CompileError, match=r"^cannot read the \.pte: .*; give a \.pte file$"):
        embed.model_facts(data)


def test_a_program_without_forward_is_named(programs: dict[str, bytes]) -> None:
    program = deserialize_pte_binary(programs["conv_stack-m33"]).program
    program.execution_plan = [p for p in program.execution_plan if p.name != "forward"]
    data = bytes(serialize_pte_binary(PTEFile(program=program)))
    with pytest.raises(PteFormatError, match="no forward method"):
        pte.forward_io(data)


def test_embed_and_inspect_import_neither_torch_nor_executorch(programs, tmp_path: Path) -> None:
    """``embed`` and the model summary of ``inspect`` read the .pte without them."""
    path = tmp_path / "model.pte"
    path.write_bytes(programs["ds_cnn-m55"])
    script = (
        "import sys\nfrom pathlib import Path\nfrom cortex_m_nn.cli import main as cli\n"
        "from cortex_m_nn.embed import firmware\n"
        f"assert cli.main(['embed', {str(path)!r}, '--output-dir', {str(tmp_path)!r}, '-q']) == 0\n"
        f"assert 'error' not in firmware._summary(Path({str(path)!r}).read_bytes())\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'torchao', 'executorch'}))"
    )
    env = {"PYTHONPATH": str(ROOT / "python"), "PATH": ""}
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "[]"
