"""Kernel paths (plan.paths): the small schedule gives a 1x1 convolution off MVE
arm_convolve_1x1_s8 (row by row), so its output may take its input's consumed rows, and keeps
the wrapper's choice for it on MVE; the fast schedule gives our kernels where the cost model
expects them faster; on MVE a stage's 3x3 depthwise steps run our kernel without a buffer; the
numbers stay the same."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch
from tests.python.test_cli import run
from tests.target import harness

from cortex_m_nn.core import compute
from cortex_m_nn.core.cmsis_nn import (
    LANES,
    POINTWISE,
    QUADS,
    ROWS,
    THREE_BY_THREE,
    WINDOW,
    WRAPPER,
)
from cortex_m_nn.core.options import IoType
from cortex_m_nn.core.target import Isa
from cortex_m_nn.pipeline import CompiledProgram
from cortex_m_nn.plan import paths
from cortex_m_nn.serialize.pte import runtime_overhead

CONV2D = torch.ops.cortex_m_nn.conv2d.default
DEPTHWISE = torch.ops.cortex_m_nn.depthwise_conv2d.default
LINEAR = torch.ops.cortex_m_nn.linear.default


def _paths(run: harness.ModelRun) -> list[int]:
    """Each conv2d call's path argument (the int before scratch_bytes)."""
    return [n.args[-2] for n in run.compiled.io.graph.graph.nodes if n.target is CONV2D]


@pytest.mark.parametrize("core", ["m33", "m3"])
def test_small_runs_one_by_one_convolutions_row_by_row_off_mve(
    core: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Kept on it (nothing relaxed, as tests/target runs the guard): the overlap guard's 1x1
    convolutions (stride 1 and 2) take path 1 and no scratch, the others keep the wrapper's
    (fast's: the wrapper's or, on the M33, our pointwise kernel); its outputs are fast's; and
    the stride-1 one's output shares its input's bytes, which the wrapper's channel-major walk
    forbids."""
    fast = harness.compile_for("overlap_guard", harness.CORES[core])
    monkeypatch.setattr(paths, "relaxable", lambda *_: [])
    small = harness.compile_for("overlap_guard", harness.CORES[core], schedule="small")
    assert set(_paths(fast)) <= ({WRAPPER, POINTWISE} if core == "m33" else {WRAPPER})
    rows = [n for n in small.compiled.io.graph.graph.nodes if n.target is CONV2D and n.args[-2]]
    assert all(n.args[-2] == ROWS and n.args[-1] == 0 for n in rows)
    # those outside the program's stage (a strip of a 1x1 convolution is a row or a few)
    assert small.compiled.memory.paths["arm_convolve_1x1_s8"] == len(rows) >= 2
    assert all(torch.equal(a, b) for a, b in zip(small.expected, fast.expected, strict=True))
    shared = {out for out, _ in small.compiled.memory.overlapping()}
    assert len(shared) > len({out for out, _ in fast.compiled.memory.overlapping()})


def test_small_keeps_the_wrappers_one_by_one_on_mve() -> None:
    """On MVE the wrapper's 1x1 path already walks four rows at a time: no conv2d changes."""
    small = harness.compile_for("overlap_guard", harness.CORES["m55"], schedule="small")
    assert set(_paths(small)) == {WRAPPER}
    assert "arm_convolve_1x1_s8" not in small.compiled.memory.paths


def test_the_path_stays_only_where_the_arena_needs_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """VWW on M33: of its thirteen 1x1 convolutions only the one whose input and output both
    exist at the arena's peak (after the stage, 24x24x32 to 24x24x32) keeps the row-by-row
    path; the others, whose matrix product it would slow, go back to the wrapper's at no cost
    in RAM."""
    core = harness.CORES["m33"]
    relaxed = harness.compile_for("mobilenet_v1_025", core, io=IoType.INT8, schedule="small")
    assert relaxed.compiled.memory.paths == {"arm_convolve_1x1_s8": 1}
    monkeypatch.setattr(paths, "relaxable", lambda *_: [])
    every = harness.compile_for("mobilenet_v1_025", core, io=IoType.INT8, schedule="small")
    assert every.compiled.memory.paths["arm_convolve_1x1_s8"] > 1
    assert relaxed.compiled.arena_bytes == every.compiled.arena_bytes


def test_a_stages_depthwise_steps_run_our_kernel_at_no_cost_in_ram(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """On MVE a stage's 3x3 depthwise steps run our depthwise_conv_lanes_s8 with no buffer
    (each window gathered on the stack): VWW's every step, in the same arena as with
    arm_depthwise_conv_3x3_s8, which takes no scratch either and about 5 instructions a MAC."""
    core = harness.CORES["m55"]
    vww = harness.compile_for("mobilenet_v1_025", core, io=IoType.INT8, schedule="small")
    assert set(vww.compiled.memory.stage["step_paths"]) == {"depthwise_conv_lanes_s8"}
    strip_path = paths.strip_path

    def three_by_three(call, padding, target):  # what the stage ran before our kernel
        path = strip_path(call, padding, target)
        return THREE_BY_THREE if paths.three_by_three_path(call, padding) else path

    monkeypatch.setattr(paths, "strip_path", three_by_three)
    before = harness.compile_for("mobilenet_v1_025", core, io=IoType.INT8, schedule="small")
    assert set(before.compiled.memory.stage["step_paths"]) == {"arm_depthwise_conv_3x3_s8"}
    assert vww.compiled.arena_bytes == before.compiled.arena_bytes


def test_a_ram_budget_keeps_only_the_paths_it_needs() -> None:
    """--memory auto with a RAM budget: the small schedule fits the budget with fewer
    instruction-costly paths than it takes for the least RAM (VWW on M33: its row-by-row 1x1
    convolution back on the wrapper's path where the budget is the fast schedule's RAM)."""
    fast = harness.compile_for("mobilenet_v1_025", harness.CORES["m33"], io=IoType.INT8)

    def small(budget: int | None) -> CompiledProgram:
        compiled = replace(fast.compiled, schedule="small", ram_budget=budget, _serialised=None)
        return compiled

    def ram(compiled: CompiledProgram) -> int:
        return compiled.arena_bytes + runtime_overhead(compiled.pte).total

    def rows(compiled: CompiledProgram) -> int:
        return compiled.memory.paths.get("arm_convolve_1x1_s8", 0)

    least = small(None)
    roomy = small(ram(fast.compiled))
    assert rows(least) > 0 and rows(roomy) < rows(least)
    assert ram(least) <= ram(roomy) <= ram(fast.compiled)


def test_fast_gives_our_kernel_where_the_cost_model_expects_it_faster(
    capsys: pytest.CaptureFixture, tmp_path: Path
) -> None:
    """VWW on M55, fast: its depthwise layers of few channels (the measured cost model: ours
    0.3-0.6x CMSIS-NN's there) run our depthwise_conv_lanes_s8, the rest CMSIS-NN's; the
    arena stays the wrapper's (the buffer no larger than the wrapper's), the numbers the same,
    and the report names the function of each layer and what the model expects; most of its
    1x1 convolutions run our pointwise_conv_s8 with a quad's gathered inputs as buffer. DS-CNN's
    25x5x64 depthwise layers, where ours is not faster, keep CMSIS-NN's. On M33 (DSP) CMSIS-NN's 3x3
    path and its 1x1 path take no buffer: our depthwise and pointwise kernels take the room the
    first plan's arena leaves at their calls, so the arena stays the same there too."""
    vww = harness.compile_for("mobilenet_v1_025", harness.CORES["m55"], io=IoType.INT8)
    depthwise = [n for n in vww.compiled.io.graph.graph.nodes if n.target is DEPTHWISE]
    lanes = [n for n in depthwise if n.args[-2] == LANES]
    assert 0 < len(lanes) < len(depthwise)
    assert {n.args[-2] for n in depthwise} == {WRAPPER, LANES}
    assert vww.compiled.memory.paths["depthwise_conv_lanes_s8"] == len(lanes)
    mve_pointwise = [n for n in vww.compiled.io.graph.graph.nodes if n.target is CONV2D]
    mve_pointwise = [n for n in mve_pointwise if n.args[-2] == POINTWISE]
    assert len(mve_pointwise) >= 6  # of its thirteen: a quad's gathered inputs, in the room
    assert [int(n.args[-1]) for n in mve_pointwise] == [
        compute.pointwise_buffer_bytes(Isa.MVE, int(n.args[0].meta["val"].shape[3]))
        for n in mve_pointwise
    ]
    rows = [r for r in vww.compiled.records if r.cmsis_function == "depthwise_conv_lanes_s8"]
    assert len(rows) == len(lanes)
    assert all(r.expected_instructions["ours"] < r.expected_instructions["cmsis_nn"] for r in rows)
    m33 = harness.compile_for("mobilenet_v1_025", harness.CORES["m33"], io=IoType.INT8)
    assert all(torch.equal(a, b) for a, b in zip(vww.expected, m33.expected, strict=True))
    assert vww.compiled.arena_bytes == m33.compiled.arena_bytes == 64_512
    dsp = [n for n in m33.compiled.io.graph.graph.nodes if n.target is DEPTHWISE]
    dsp_lanes = [n for n in dsp if n.args[-2] == LANES]
    assert 0 < len(dsp_lanes) and all(int(n.args[-1]) > 0 for n in dsp_lanes)  # tiles in room
    pointwise = [n for n in m33.compiled.io.graph.graph.nodes if n.target is CONV2D]
    pointwise = [n for n in pointwise if n.args[-2] == POINTWISE]
    depths = [int(n.args[0].meta["val"].shape[3]) for n in pointwise]
    assert len(pointwise) >= 6  # of its thirteen 1x1 convolutions
    assert [int(n.args[-1]) for n in pointwise] == [
        compute.pointwise_buffer_bytes(Isa.DSP, d) for d in depths
    ]
    assert m33.compiled.memory.paths == {
        "depthwise_conv_lanes_s8": len(dsp_lanes),
        "pointwise_conv_s8": len(pointwise),
    }
    ds_cnn = harness.compile_for("ds_cnn", harness.CORES["m55"], io=IoType.INT8)
    assert "depthwise_conv_lanes_s8" not in ds_cnn.compiled.memory.paths
    model = tmp_path / "vww.py"
    model.write_text(
        "from tests.target.models import MODELS\n\n\ndef vww():\n"
        "    return MODELS['mobilenet_v1_025']()\n"
    )
    result = run(capsys, f"{model}:vww", "--io", "int8", "-o", tmp_path / "vww.pte")
    assert result.status == 0, result.err
    assert result.out.count("depthwise_conv_lanes_s8") == len(lanes) + 1  # rows, paths line
    assert "instructions in our kernels on those calls" in result.out
    assert "where this ISA's peak is 16 (one VMLADAVA)" in result.out  # then a line a call
    per_call = result.out.split("(one VMLADAVA):\n")[1].splitlines()[: len(lanes)]
    assert all(len(line.split()) == 3 for line in per_call)


def test_fast_gives_our_window_kernel_to_3x3_convolutions() -> None:
    """ResNet-8 on M33, fast: each 3x3 convolution of a multiple of 4 input channels (six: not
    the first layer's 3 channels) runs our window_conv_s8 with a buffer the size of
    arm_convolve_s8's, the wrapper's 1x1 shortcuts keep CMSIS-NN's; on M55 the first layer's
    too (MVE's takes any depth), its buffer a quad's windows (arm_convolve_s8's MVE size); the
    arena stays the same and the numbers are the same on both."""
    m33 = harness.compile_for("resnet8", harness.CORES["m33"], io=IoType.INT8)
    m55 = harness.compile_for("resnet8", harness.CORES["m55"], io=IoType.INT8)
    convolutions = [n for n in m33.compiled.io.graph.graph.nodes if n.target is CONV2D]
    window = [n for n in convolutions if n.args[-2] == WINDOW]
    shapes = [tuple(n.args[1].meta["val"].shape) for n in window]
    assert len(window) == 6 and all(s[1:3] == (3, 3) and s[3] % 4 == 0 for s in shapes)
    assert [int(n.args[-1]) for n in window] == [
        compute.window_buffer_bytes(Isa.DSP, s) for s in shapes
    ]
    assert {n.args[-2] for n in convolutions} == {WRAPPER, WINDOW}
    assert m33.compiled.memory.paths == {"window_conv_s8": 6}
    assert m55.compiled.memory.paths == {"window_conv_s8": 7}
    mve = [n for n in m55.compiled.io.graph.graph.nodes if n.target is CONV2D]
    mve = [n for n in mve if n.args[-2] == WINDOW]
    assert [int(n.args[-1]) for n in mve] == [
        compute.window_buffer_bytes(Isa.MVE, tuple(n.args[1].meta["val"].shape)) for n in mve
    ]
    assert m33.compiled.arena_bytes == m55.compiled.arena_bytes
    assert all(torch.equal(a, b) for a, b in zip(m33.expected, m55.expected, strict=True))


def test_fast_gives_our_fully_connected_kernel_where_faster() -> None:
    """The autoencoder on M33, fast: its linear layers of 128 inputs or outputs or more run our
    fully_connected_quads_s8 (the cost model: 0.8-0.9x CMSIS-NN's there), the 128 to 8 and 8 to
    128 ones keep CMSIS-NN's; the report names it; on the M55 (0.4-0.6x) every layer runs it."""
    m33 = harness.compile_for("autoencoder", harness.CORES["m33"], io=IoType.INT8)
    m55 = harness.compile_for("autoencoder", harness.CORES["m55"], io=IoType.INT8)
    linear = [n for n in m33.compiled.io.graph.graph.nodes if n.target is LINEAR]
    quads = [n for n in linear if n.args[-1] == QUADS]
    assert 0 < len(quads) < len(linear)
    assert m33.compiled.memory.paths == {"fully_connected_quads_s8": len(quads)}
    rows = [r for r in m33.compiled.records if r.cmsis_function == "fully_connected_quads_s8"]
    assert len(rows) == len(quads)
    assert all(r.expected_instructions["ours"] < r.expected_instructions["cmsis_nn"] for r in rows)
    assert m55.compiled.memory.paths == {"fully_connected_quads_s8": len(linear)}
    assert all(torch.equal(a, b) for a, b in zip(m33.expected, m55.expected, strict=True))
