"""Kernel calls prepared ahead of time: the C table ``cortex-m-compile embed`` writes beside
the program (``kernels/include/cortex_m_nn/prepared.h`` says what the firmware does with it,
``prepared_entries.h`` holds the entries' structs).

For every ``cortex_m_nn`` kernel call of ``forward``, in instruction order, one entry: for an
operator with a ``prepared`` kind in ``operators.yaml``, the CMSIS-NN params, quantization and
dims its kernel derives from the call's arguments, written here from the same arguments in the
``.pte``; for any other operator an empty entry. The proof pass at load compares every entry
with what the kernel derives, byte for byte, so an entry computed differently here fails the
load with a message; it can never be used.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from cortex_m_nn.core.cmsis_nn import WRAPPER, mve_one_by_n_inexact
from cortex_m_nn.core.operators import DEFAULT_CASE, load_yaml
from cortex_m_nn.core.target import Isa
from cortex_m_nn.serialize.pte_format import ExecutionPlan

#: A C initializer: a number, or the fields of a struct in order (name → value).
Initializer = int | Mapping[str, "Initializer"]


class Call:
    """One kernel call's arguments, by schema name, read from the plan's values."""

    def __init__(self, plan: ExecutionPlan, names: list[str], args: tuple[int, ...]) -> None:
        self._plan = plan
        self._values = dict(zip(names, args, strict=True))

    def sizes(self, name: str) -> tuple[int, ...]:
        return tuple(int(d) for d in self._plan.values[self._values[name]].payload.sizes)

    def value(self, name: str) -> int:
        return int(self._plan.values[self._values[name]].payload)

    def scalar_type(self, name: str) -> int:
        """A tensor argument's ExecuTorch ScalarType code (1: int8 Char, 2: int16 Short)."""
        return int(self._plan.values[self._values[name]].payload.scalar_type)

    def given(self, name: str) -> bool:
        """Whether an optional argument holds a value (not None)."""
        return self._plan.values[self._values[name]].payload is not None

    def values(self, name: str) -> list[int]:
        items = self._plan.values[self._values[name]].payload
        return [int(self._plan.values[i].payload) for i in items]


def _tile(hw: list[int]) -> dict[str, int]:
    """A (h, w) pair as CMSIS-NN's cmsis_nn_tile {w, h}."""
    return {"w": hw[1], "h": hw[0]}


def _dims(n: int, h: int, w: int, c: int) -> dict[str, int]:
    return {"n": n, "h": h, "w": w, "c": c}


def _activation(call: Call) -> dict[str, int]:
    return {"min": call.value("activation_min"), "max": call.value("activation_max")}


def _window(call: Call) -> dict[str, Initializer]:
    return {
        "stride": _tile(call.values("stride")),
        "padding": _tile(call.values("padding")),
        "dilation": _tile(call.values("dilation")),
        "activation": _activation(call),
    }


#: ExecuTorch's ScalarType code of int16 (``Short``).
SHORT = 2
#: ExecuTorch's ScalarType code of uint8 (Byte): our operators' int4 weights, packed pairs.
BYTE = 0


def _conv2d(call: Call, isa: Isa) -> dict[str, Initializer] | None:
    if call.scalar_type("input") == SHORT or call.scalar_type("weight") == BYTE:
        return None  # int16 activations, int4 weights: the s16 and s4 kernels run unprepared
    if call.value("path") != WRAPPER:
        return None  # another function than the wrapper's: its case runs unprepared
    input_, weight, out = call.sizes("input"), call.sizes("weight"), call.sizes("out")
    geometry = (call.values("stride"), call.values("padding"), call.values("dilation"))
    direct = isa is Isa.MVE and mve_one_by_n_inexact(input_, weight, out, *geometry)
    return {
        "params": {
            "input_offset": call.value("input_offset"),
            "output_offset": call.value("output_offset"),
            **_window(call),
        },
        "input": _dims(*input_),
        "filter": _dims(*weight),
        "bias": _dims(1, 1, 1, weight[0]),
        "output": _dims(*out),
        "direct": int(direct),
    }


def _depthwise_conv2d(call: Call, isa: Isa) -> dict[str, Initializer] | None:
    if call.scalar_type("input") == SHORT or call.scalar_type("weight") == BYTE:
        return None  # int16 activations, int4 weights: the s16 and s4 kernels run unprepared
    if call.value("path") != WRAPPER:
        return None  # another function than the wrapper's: its case runs unprepared
    weight = call.sizes("weight")
    return {
        "params": {
            "input_offset": call.value("input_offset"),
            "output_offset": call.value("output_offset"),
            "ch_mult": call.value("depth_multiplier"),
            **_window(call),
        },
        "input": _dims(*call.sizes("input")),
        "filter": _dims(*weight),
        "bias": _dims(1, 1, 1, weight[3]),
        "output": _dims(*call.sizes("out")),
    }


def _linear(call: Call, isa: Isa) -> dict[str, Initializer] | None:
    if call.scalar_type("input") == SHORT or call.scalar_type("weight") == BYTE:
        return None  # int16 activations, int4 weights: the s16 and s4 kernels run unprepared
    if call.value("path") != WRAPPER:
        return None  # our fully_connected_quads_s8 runs unprepared
    out_features, in_features = call.sizes("weight")
    batches = math.prod(call.sizes("input")) // in_features if in_features else 0
    return {
        "params": {
            "input_offset": call.value("input_offset"),
            "filter_offset": 0,
            "output_offset": call.value("output_offset"),
            "activation": _activation(call),
        },
        "quant": {"multiplier": call.value("multiplier"), "shift": call.value("shift")},
        "input": _dims(batches, 1, 1, in_features),
        "filter": _dims(in_features, 1, 1, out_features),
        "bias": _dims(1, 1, 1, out_features),
        "output": _dims(batches, 1, 1, out_features),
        "per_channel": int(call.given("multipliers")),
    }


def _avg_pool2d(call: Call, isa: Isa) -> dict[str, Initializer] | None:
    if call.scalar_type("input") == SHORT:
        return None  # int16 activations: arm_avgpool_s16 runs unprepared
    kh, kw = call.values("kernel_size")
    return {
        "params": {
            "stride": _tile(call.values("stride")),
            "padding": _tile(call.values("padding")),
            "activation": _activation(call),
        },
        "input": _dims(*call.sizes("input")),
        "filter": _dims(1, kh, kw, 1),
        "output": _dims(*call.sizes("out")),
    }


_ADD_FIELDS = (
    *(f"input{i}_{name}" for i in (1, 2) for name in ("offset", "multiplier", "shift")),
    "left_shift",
    *(f"output_{name}" for name in ("offset", "multiplier", "shift")),
    "activation_min",
    "activation_max",
)


def _add(call: Call, isa: Isa) -> dict[str, Initializer] | None:
    if call.scalar_type("input1") == SHORT:
        return None  # int16 activations: arm_elementwise_add_s16 runs unprepared
    shape = call.sizes("out")
    if call.sizes("input1") != shape or call.sizes("input2") != shape:
        return None  # broadcasting: the kernel runs it row by row, unprepared
    return {**{name: call.value(name) for name in _ADD_FIELDS}, "size": math.prod(shape)}


def _softmax(call: Call, isa: Isa) -> dict[str, Initializer] | None:
    if call.scalar_type("input") == SHORT:
        return None  # int16 activations: arm_softmax_s16 runs unprepared
    sizes = call.sizes("input")
    return {
        "rows": math.prod(sizes) // sizes[-1],
        "row": sizes[-1],
        **{name: call.value(name) for name in ("multiplier", "shift", "diff_min")},
    }


#: Per operator with a prepared form: its entry from a call, for the target's ISA (None: this
#: call has none and runs unprepared).
ENTRIES: dict[str, Callable[[Call, Isa], dict[str, Initializer] | None]] = {
    "conv2d": _conv2d,
    "depthwise_conv2d": _depthwise_conv2d,
    "linear": _linear,
    "avg_pool2d": _avg_pool2d,
    "add": _add,
    "softmax": _softmax,
}


@dataclass(frozen=True)
class PreparedCall:
    """One kernel call's entry: the operator, its kind and fields (kind 0: no fields), and the
    kernel case it runs (``core.operators``: what the image must link for it)."""

    operator: str
    kind: int
    fields: dict[str, Initializer] | None
    case: str = DEFAULT_CASE

    @property
    def kind_name(self) -> str:
        """The kind's name in prepared.h's enum (``CORTEX_M_NN_PREPARED_<OPERATOR>``)."""
        return f"CORTEX_M_NN_PREPARED_{self.operator.upper() if self.kind else 'NONE'}"


def prepared_calls(plan: ExecutionPlan, isa: Isa) -> list[PreparedCall]:
    """Every ``cortex_m_nn`` kernel call of ``plan``, in order, with its entry."""
    operators = {op.name: op for op in load_yaml()[1]}
    calls = []
    for instruction in plan.instructions:
        if instruction.kind != "KernelCall":
            continue
        name = plan.operators[instruction.op_index][0]
        if not name.startswith("cortex_m_nn::"):
            continue
        op = operators[name.removeprefix("cortex_m_nn::")]
        names = [a.name for a in op.arguments]
        call = Call(plan, names, instruction.args[: len(names)])
        case = op.case_of(call)
        if not op.prepared:
            calls.append(PreparedCall(op.name, 0, None, case))
            continue
        fields = ENTRIES[op.name](call, isa)
        calls.append(PreparedCall(op.name, op.prepared if fields else 0, fields, case))
    return calls


def _c_initializer(value: Any) -> str:
    if isinstance(value, Mapping):
        return "{" + ", ".join(f".{k} = {_c_initializer(v)}" for k, v in value.items()) + "}"
    return str(int(value))


def c_table(calls: list[PreparedCall], symbol: str) -> str:
    """C source of the table ``<symbol>_prepared`` (``cortex_m_nn_prepared_call[]``) and its
    entries, for ``cortex_m_nn_model.c``."""
    lines = [
        "",
        "/* The kernel calls of forward prepared ahead of time (cortex_m_nn/prepared.h). */",
        '#include "cortex_m_nn/prepared_entries.h"',
        "",
    ]
    rows = []
    for index, call in enumerate(calls):
        kind = call.kind_name
        if call.fields is None:
            rows.append(f"    {{{kind}, NULL}}, /* {index}: {call.operator} */")
            continue
        entry = f"{symbol}_call_{index}"
        lines.append(f"static const cortex_m_nn_{call.operator}_prepared {entry} = {{")
        lines += [f"    .{k} = {_c_initializer(v)}," for k, v in call.fields.items()]
        lines.append("};")
        rows.append(f"    {{{kind}, &{entry}}}, /* {index}: {call.operator} */")
    if not rows:
        rows.append("    {CORTEX_M_NN_PREPARED_NONE, NULL}, /* no kernel call */")
    lines += [
        "",
        f"const cortex_m_nn_prepared_call {symbol}_prepared[] = {{",
        *rows,
        "};",
        "",
    ]
    return "\n".join(lines)
