"""The kernel ABI value: its text (the C++ ``cortex_m_nn_kernels_abi()`` form), the .pte
metadata, the mismatch lines, and the references run with its rounding explicitly."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from cortex_m_nn import __version__
from cortex_m_nn.core.abi import (
    METADATA_METHOD,
    METADATA_PREFIX,
    KernelAbi,
    ProgramAbi,
    Rounding,
    decode_metadata,
    encode_metadata,
)
from cortex_m_nn.core.operators import ops_version
from cortex_m_nn.core.target import Core, Isa, Target, TargetError
from cortex_m_nn.ops.conv2d import conv2d
from cortex_m_nn.ops.library import run_references


def test_text_round_trips_in_the_kernels_form() -> None:
    abi = KernelAbi(Isa.MVE, Rounding.SINGLE, 7)
    assert str(abi) == "isa=mve rounding=single ops_version=7"
    assert KernelAbi.parse("isa=dsp rounding=double ops_version=3") == KernelAbi(
        Isa.DSP, Rounding.DOUBLE, 3
    )
    assert KernelAbi.parse(str(abi)) == abi


def test_defaults_are_this_release_and_cmsis_nn_default_rounding() -> None:
    abi = ProgramAbi.for_target(Target.parse("cortex-m33"))
    assert (abi.isa, abi.rounding, abi.ops_version, abi.core) == (
        Isa.DSP,
        Rounding.DOUBLE,
        ops_version(),
        Core.M33,
    )
    assert abi.target == Target(Core.M33, Isa.DSP)


def test_metadata_in_the_recorded_order_and_read_back() -> None:
    abi = ProgramAbi.for_target(Target.parse("cortex-m0plus"), Rounding.SINGLE)
    recorded = abi.metadata()
    assert list(recorded) == [
        f"{METADATA_PREFIX}{name}" for name in ("core", "isa", "rounding", "version", "ops_version")
    ]
    assert recorded[f"{METADATA_PREFIX}core"] == "cortex-m0plus"
    assert recorded[f"{METADATA_PREFIX}isa"] == "scalar"
    assert recorded[f"{METADATA_PREFIX}rounding"] == "single"
    assert recorded[f"{METADATA_PREFIX}version"] == __version__
    assert recorded[f"{METADATA_PREFIX}ops_version"] == ops_version()
    as_text = {name: str(value) for name, value in recorded.items()}  # how a .pte reads back
    back = ProgramAbi.from_metadata(as_text)
    assert back == abi and back.core is Core.M0PLUS


def test_equality_is_the_abi_not_the_core() -> None:
    m55 = ProgramAbi.for_target(Target.parse("cortex-m55+dsp"))
    m33 = ProgramAbi.for_target(Target.parse("cortex-m33"))
    assert m55 == m33 and m55.mismatch(m33) is None
    assert m55 != ProgramAbi.for_target(Target.parse("cortex-m55"))
    assert m55.kernels == m33.kernels == KernelAbi(Isa.DSP)


def test_a_kernel_build_names_no_core() -> None:
    """A kernel build serves every core with its ISA: its ABI has no core nor target, and
    the kernels a program's ABI reads from a .pte need none either."""
    kernels = KernelAbi.parse("isa=mve rounding=double ops_version=1")
    assert not hasattr(kernels, "core") and not hasattr(kernels, "target")
    recorded = ProgramAbi.for_target(Target.parse("cortex-m55")).metadata()
    del recorded[f"{METADATA_PREFIX}core"]
    assert KernelAbi.from_metadata(recorded) == KernelAbi(Isa.MVE)
    with pytest.raises(KeyError):
        ProgramAbi.from_metadata(recorded)


def test_a_core_without_the_isa_is_refused() -> None:
    with pytest.raises(TargetError, match="cannot run the mve path"):
        ProgramAbi(Isa.MVE, core=Core.M4)


def test_mismatch_names_each_difference_and_its_fix() -> None:
    program = ProgramAbi(Isa.MVE, Rounding.SINGLE, 2, core=Core.M55)
    kernels = KernelAbi(Isa.DSP, Rounding.DOUBLE, 3)
    assert program.mismatch(kernels) == (
        "the .pte was compiled for ISA mve (kernels: dsp; recompile with a --target whose ISA "
        "is dsp, e.g. cortex-m55+dsp); rounding single (kernels: double; recompile with "
        "--rounding double); operator version 2 (kernels: 3; rebuild the kernels and the .pte "
        "from one cortex-m-nn release)"
    )
    assert KernelAbi(Isa.DSP, Rounding.SINGLE, 3).mismatch(kernels) == (
        "the .pte was compiled for rounding single (kernels: double; recompile with "
        "--rounding double)"
    )


def test_isa_and_rounding_read_as_their_names() -> None:
    assert f"{Isa.MVE}+{Rounding.SINGLE}" == "mve+single"
    assert Isa.DSP == "dsp" and Rounding.DOUBLE == "double"


class _Conv(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weight = torch.tensor([[[[3]]]], dtype=torch.int8)
        bias = torch.tensor([0], dtype=torch.int32)
        multipliers = torch.tensor([1518500250], dtype=torch.int32)
        shifts = torch.tensor([-3], dtype=torch.int32)
        out, _ = torch.ops.cortex_m_nn.conv2d.default(
            x, weight, bias, multipliers, shifts, [1, 1], [0, 0], [1, 1], 0, 0, -128, 127, 0, 0
        )
        return out


def test_references_take_the_rounding_explicitly() -> None:
    x = torch.arange(-128, 128, dtype=torch.int8).reshape(1, 16, 16, 1)
    graph = torch.fx.symbolic_trace(_Conv())
    args = (torch.tensor([[[[3]]]], dtype=torch.int8), torch.tensor([0], dtype=torch.int32))
    quant = (torch.tensor([1518500250], dtype=torch.int32), torch.tensor([-3], dtype=torch.int32))
    geometry = ([1, 1], [0, 0], [1, 1], 0, 0, -128, 127)
    results = {}
    for rounding in Rounding:
        explicit = conv2d(x, *args, *quant, *geometry, rounding=rounding)
        (ran,) = run_references(graph, (x,), rounding)  # the value is passed down
        assert torch.equal(ran, explicit)
        results[rounding] = explicit
    # The two roundings differ on these values, so the explicit argument really reached them.
    assert not torch.equal(results[Rounding.SINGLE], results[Rounding.DOUBLE])
    # Without the argument (the reference's default, or through torch.ops, whose schemas have
    # none): CMSIS-NN's default rounding, whatever ran before; no state decides it.
    assert torch.equal(conv2d(x, *args, *quant, *geometry), results[Rounding.DOUBLE])
    assert torch.equal(graph(x), results[Rounding.DOUBLE])


def test_no_hidden_state_decides_the_rounding() -> None:
    """The rounding reaches a reference only as an argument (no context variable)."""
    package = Path(__file__).resolve().parents[2] / "python" / "cortex_m_nn"
    holders = [p.name for p in package.rglob("*.py") if "ContextVar" in p.read_text()]
    assert not holders, holders


def test_the_records_are_one_method_of_name_value_lines() -> None:
    """One constant method holds every record (each method costs a .pte about 270 bytes); its
    lines read back into the same records, values with spaces and '=' intact."""
    records = {
        **ProgramAbi.for_target(Target.parse("cortex-m33")).metadata(),
        f"{METADATA_PREFIX}input_0": "scale=0.5 zero_point=-3 shape=1x2",
    }
    methods = encode_metadata(records)
    assert list(methods) == [METADATA_METHOD] == ["cortex_m_nn_metadata"]
    text = methods[METADATA_METHOD]
    assert text.splitlines()[:2] == ["core=cortex-m33", "isa=dsp"]
    assert decode_metadata(text) == {name: str(value) for name, value in records.items()}
    with pytest.raises(ValueError, match="cannot be one line"):
        encode_metadata({f"{METADATA_PREFIX}io": "int8\nisa=mve"})
