"""Patch-based stages (plan.patch, plan.stage, plan.strips): the first layers of a network run
in strips compute exactly what layer-by-layer execution computes, every row once, in less
RAM, with every window and strip planned at its rows.

The oracle is the layer-by-layer lowered graph itself (each operator's bit-exact reference),
run on the same random int8 inputs as the graph the strips make; the row maps are checked
against a walk of every window position."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch
from tests.python.test_cli import run
from tests.target.models import MODELS
from torch import nn

from cortex_m_nn.core.options import IoType
from cortex_m_nn.core.target import Isa, Target
from cortex_m_nn.frontend.calibration import synthetic
from cortex_m_nn.frontend.model_source import ModelSource
from cortex_m_nn.ops.stage import (
    INPUT,
    OUTPUT,
    SCRATCH,
    STEP_OPERATORS,
    Constant,
    Step,
    View,
    decode,
    encode,
    lead,
    step_words,
)
from cortex_m_nn.pipeline import CompiledProgram, compile_model
from cortex_m_nn.plan import liveness, patch
from cortex_m_nn.plan.fold import fold
from cortex_m_nn.plan.stage import RowMap, shape, stages, value_of
from cortex_m_nn.plan.stage import macs as stage_macs
from cortex_m_nn.plan.strips import strips_graph
from cortex_m_nn.serialize.pte import runtime_overhead

M55 = Target.parse("cortex-m55")
TARGET_MODELS = Path(__file__).parents[1] / "target" / "models.py"


def compiled(name: str, schedule: str = "small", target: Target = M55) -> CompiledProgram:
    source = ModelSource(name, *MODELS[name]())
    calibration = synthetic(source.example_inputs, 4)
    return compile_model(
        source, target, calibration, progress=False, io=IoType.INT8, schedule=schedule
    )


@pytest.fixture(scope="module")
def guard() -> CompiledProgram:
    return compiled("stage_guard")


@pytest.mark.parametrize(
    ("extent", "stride", "top", "height"),
    [(3, 1, 1, 9), (3, 2, 0, 10), (3, 2, 1, 9), (5, 1, 2, 7), (5, 2, 2, 11), (1, 1, 0, 4)]
    + [(5, 1, 0, 6), (3, 1, 0, 5)],
)
def test_row_maps_read_the_rows_and_pads_of_every_window(extent, stride, top, height) -> None:
    """reads/pads against each output row's window walked position by position."""
    bottom_pad = extent - 1 - top  # PyTorch's output count with the end padded as needed
    out_rows = (height + top + bottom_pad - extent) // stride + 1
    mapping = RowMap(extent, stride, top)
    for start in range(out_rows):
        for stop in range(start + 1, out_rows + 1):
            positions = [r * stride - top + k for r in range(start, stop) for k in range(extent)]
            inside = [p for p in positions if 0 <= p < height]
            rows = mapping.reads(range(start, stop), height)
            assert rows == range(min(inside), max(inside) + 1)
            assert mapping.pads(range(start, stop), height) == (
                max(0, -min(positions)),
                max(0, max(positions) - (height - 1)),
            )


def _outputs(graph: torch.fx.GraphModule, inputs: tuple[torch.Tensor, ...]) -> list:
    got = graph(*inputs)
    return list(got) if isinstance(got, list | tuple) else [got]


@pytest.mark.parametrize("name", ["stage_guard", "mobilenet_v1_025"])
@pytest.mark.parametrize("chunk", [1, 3])
def test_strips_compute_what_layer_by_layer_computes(name: str, chunk: int) -> None:
    """Every stage of the model, run in strips of ``chunk`` rows a call, gives the layer-by-
    layer graph's outputs exactly (random int8 inputs), and computes every row once."""
    program = compiled(name, schedule="fast")
    layered = program.io.graph
    generator = torch.Generator().manual_seed(3)
    inputs = tuple(
        torch.randint(-128, 128, tuple(p.meta["val"].shape), generator=generator).to(torch.int8)
        for p in layered.graph.find_nodes(op="placeholder")
    )
    expected = _outputs(layered, inputs)
    tried = 0
    for stage in list(stages(layered))[::2]:
        built = strips_graph(layered, stage, chunk, M55)
        if built is None:
            continue
        striped = torch.fx.GraphModule(layered, copy.deepcopy(built.graph))
        got = _outputs(striped, inputs)
        assert all(torch.equal(a, b) for a, b in zip(got, expected, strict=True))
        assert built.macs == sum(stage_macs(c, shape(value_of(c))[1]) for c in stage.calls)
        folded = fold(built.graph, built.created, built.entry, built.result, patch.PROGRAM)
        constants = {n.target: getattr(layered, n.target) for n in built.graph.nodes
                     if n.op == "get_attr" and n.target != patch.PROGRAM}  # fmt: skip
        one_call = torch.fx.GraphModule({**constants, patch.PROGRAM: folded.program}, built.graph)
        got = _outputs(one_call, inputs)
        assert all(torch.equal(a, b) for a, b in zip(got, expected, strict=True))
        tried += 1
    assert tried >= 2


def test_the_small_schedule_runs_the_guard_in_strips_in_less_ram(guard) -> None:
    """The stage is kept for less RAM: its arena and method allocator (the calls' metadata
    counted exactly from the .pte) below the same schedule's without it."""
    fast = compiled("stage_guard", schedule="fast")
    stage = guard.memory.stage
    assert stage is not None and stage["macs_recomputed"] == 0
    ram = guard.arena_bytes + runtime_overhead(guard.pte).total
    assert ram == stage["ram_bytes"] < stage["ram_without_bytes"]
    assert guard.arena_bytes < stage["arena_without_bytes"] <= fast.arena_bytes
    assert guard.memory.conflicts() == []


def _stage_steps(compiled_program: CompiledProgram) -> tuple[list[Step], dict[int, int]]:
    """The steps of the program's stage call and the bytes of its input, output and scratch."""
    chosen = patch.choose(compiled_program.io.graph, M55)
    call = next(
        n for n in chosen.graph.graph.nodes if n.target is torch.ops.cortex_m_nn.stage.default
    )
    steps = decode(getattr(chosen.graph, call.args[2].target).tolist())
    sizes = {INPUT: call.args[0].meta["val"].nbytes, OUTPUT: call.meta["val"][0].nbytes,
             SCRATCH: call.args[4]}  # fmt: skip
    return steps, sizes


def test_every_step_reads_and_writes_inside_the_stage_tensors(guard) -> None:
    """Each view of the guard's stage program lies inside its tensor, and the views a step
    writes share no byte with its others (what the kernel checks at load) — except a halo's
    copy of one run of bytes, which moves the kept rows down their own buffer (memmove): every
    copy of the guard's moves rows down, some over themselves, none onto itself."""
    steps, sizes = _stage_steps(guard)
    assert len(steps) > 100
    moves = [s for s in steps if s.operator == "strided_copy"]
    assert moves and all(s.arguments[1:] == ([s.out.nbytes], [1], 0) for s in moves)
    for move in moves:
        source = move.arguments[0]
        assert source.source == move.out.source == SCRATCH and source.offset > move.out.offset
    assert any(s.arguments[0].offset < s.out.offset + s.out.nbytes for s in moves)
    for step in steps:
        views = [a for a in step.arguments if isinstance(a, View)]
        written = [step.out] + ([step.scratch] if step.scratch else [])
        for view in views + written:
            assert 0 <= view.offset and view.offset + view.nbytes <= sizes[view.source]
        if step in moves:
            continue
        for out in written:
            for other in views + [w for w in written if w is not out]:
                apart = (other.source != out.source or out.nbytes == 0 or other.nbytes == 0
                         or other.offset + other.nbytes <= out.offset
                         or out.offset + out.nbytes <= other.offset)  # fmt: skip
                assert apart, (step.operator, out, other)


def test_the_stage_lead_never_overwrites_an_input_byte_still_to_be_read(guard) -> None:
    """The lead the planner may place the stage's output at, walked byte by byte: with the
    output starting ``lead`` bytes below the input, no input byte that a step reads has been
    written by that step or an earlier one; 16 bytes less would overwrite one."""
    steps, sizes = _stage_steps(guard)
    reach = lead(steps)

    def clobbers(start: int) -> bool:  # the output at input offset `start`
        written = torch.zeros(sizes[INPUT], dtype=torch.bool)
        for step in steps:
            if step.out.source == OUTPUT:
                low = max(0, start + step.out.offset)
                high = min(sizes[INPUT], start + step.out.offset + step.out.nbytes)
                written[low:high] = True  # a step may write before it reads
            for view in step.arguments:
                if isinstance(view, View) and view.source == INPUT:
                    if written[view.offset : view.offset + view.nbytes].any():
                        return True
        return False

    assert not clobbers(-reach)
    assert clobbers(-reach + 16) or -reach + 16 >= sizes[INPUT]


def test_damaged_stage_programs_are_refused() -> None:
    """A program decodes to its steps; truncated, extended or with a bad header, template or
    step it is refused (the kernel checks the same at load)."""
    lut = [Step("lut", (View(INPUT, 4 * i, (4,)), Constant(0)), View(OUTPUT, 4 * i, (4,)))
           for i in range(3)]  # fmt: skip
    words = encode(lut)
    assert decode(words) == lut
    template = words[4]  # the one template's offset
    damaged = [
        words[:-1], words + [0], [0, *words[1:]],
        words[:2] + [words[2] + 1] + words[3:],  # one step more than the words hold
        words[:template + 2] + [99] + words[template + 3:],  # a hole at word 99 of 14
        words[: words[3]] + [1] + words[words[3] + 1 :],  # a step naming template 1 of 1
    ]  # fmt: skip
    for bad in damaged:
        with pytest.raises(ValueError):
            decode(bad)
    writes_input = encode([Step("lut", (View(INPUT, 0, (4,)), Constant(0)), View(INPUT, 4, (4,)))])
    with pytest.raises(ValueError):
        decode(writes_input)


def test_a_stage_program_stores_each_layer_once(guard) -> None:
    """Steps of one layer share a template: the guard's program needs about a fifth of the
    words its steps would take written out."""
    steps, _ = _stage_steps(guard)
    written_out = sum(len(step_words(s)) for s in steps)
    assert len(encode(steps)) < 0.3 * written_out


def test_the_bound_read_before_serialising_is_the_plans(guard) -> None:
    """plan.liveness's bound of a graph equals the memory plan's, read back from the
    serialised program: layer by layer and in strips."""
    fast = compiled("stage_guard", schedule="fast")
    assert max(liveness.sweep(fast.io.graph).live) == fast.memory.lower_bound_bytes
    chosen = patch.choose(guard.io.graph, M55)
    assert max(liveness.sweep(chosen.graph).live) == guard.memory.lower_bound_bytes


class OddRows(nn.Module):
    """Rows of 9 x 5 int8 bytes: no window or strip of them starts at an aligned byte."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Conv2d(3, 5, 3, padding=1)
        self.b = nn.Conv2d(5, 5, 3, padding=1, groups=5)
        self.c = nn.Conv2d(5, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.c(torch.relu(self.b(torch.relu(self.a(x)))))


def test_misaligned_strips_are_not_made_and_the_program_still_compiles() -> None:
    torch.manual_seed(0)
    source = ModelSource("odd", OddRows().eval(), (torch.randn(1, 3, 9, 9),))
    program = compile_model(
        source, M55, synthetic(source.example_inputs, 4), progress=False, io=IoType.INT8
    )
    found = list(stages(program.io.graph))
    assert found and all(strips_graph(program.io.graph, s, 1, M55) is None for s in found)
    small = compile_model(
        source, M55, synthetic(source.example_inputs, 4), progress=False, io=IoType.INT8,
        schedule="small",
    )  # fmt: skip
    assert small.memory.stage is None and small.memory.conflicts() == []


def test_mobilenet_v2_at_144_needs_a_third_of_the_ram_of_layer_by_layer() -> None:
    """Issue 41's MobileNetV2-0.35 at 144×144: with a stage in one call, the small schedule's
    RAM (arena and method allocator) is at most 0.4× the fast schedule's, its arena at most
    0.35× the layer-by-layer live-tensor bound."""
    fast, small = (compiled("mobilenet_v2_144", schedule=s) for s in ("fast", "small"))
    assert small.memory.stage is not None
    ram = {p.schedule: p.arena_bytes + runtime_overhead(p.pte).total for p in (fast, small)}
    assert ram["small"] <= 0.4 * ram["fast"], ram
    assert small.arena_bytes <= 0.35 * fast.memory.lower_bound_bytes


@pytest.mark.parametrize("core", ["cortex-m55", "cortex-m33", "cortex-m4"])
def test_visual_wake_words_needs_half_the_arena_of_layer_by_layer(core: str) -> None:
    """Issue 41's VWW (MobileNetV1-0.25 at 96×96, int8 I/O): the small schedule's arena is at
    most half the fast one's, on MVE (its stage's 3x3 depthwise steps run our kernel, which
    takes no scratch) and on DSP cores (a 1x1 convolution after the stage runs row by row, over
    its input)."""
    target = Target.parse(core)
    fast, small = (compiled("mobilenet_v1_025", s, target) for s in ("fast", "small"))
    assert small.memory.stage is not None and small.memory.conflicts() == []
    assert small.arena_bytes <= 0.5 * fast.arena_bytes, (small.arena_bytes, fast.arena_bytes)
    if target.isa is Isa.MVE:
        assert small.memory.stage["step_paths"].get("depthwise_conv_lanes_s8", 0) > 0
    else:
        assert small.memory.paths.get("arm_convolve_1x1_s8", 0) > 0


def test_the_report_names_the_stage(capsys, tmp_path: Path) -> None:
    result = run(capsys, f"{TARGET_MODELS}:stage_guard", "-o", tmp_path / "m.pte",
                 "--memory", "small", "--io", "int8")  # fmt: skip
    assert result.status == 0, result.err
    line = next(x for x in result.out.splitlines() if "stage in strips" in x)
    assert "0 MACs recomputed" in line and "without it" in line


def test_auto_takes_the_staged_small_schedule_where_fast_does_not_fit(
    capsys, tmp_path: Path
) -> None:
    """A zoo model (MobileNetV2-0.35, int8 input: a float one is four times the image's bytes
    and a stage cannot start before its quantize) with --ram between what the small schedule
    (a stage in strips) and the fast one need: auto compiles the small one and says why;
    below it, the refusal names its arena and writes nothing."""
    model = f"{TARGET_MODELS}:zoo_mobilenet_v2"
    needs = {}
    for schedule in ("fast", "small"):
        report = tmp_path / f"{schedule}.json"
        result = run(capsys, model, "-o", tmp_path / f"{schedule}.pte", "--memory", schedule,
                     "--io", "int8", "--ram", "1G", "--report-json", report)  # fmt: skip
        assert result.status == 0, result.err
        needs[schedule] = json.loads(report.read_text())["fit"]["ram"]["needed_bytes"]
    assert needs["small"] < needs["fast"], needs
    fits = needs["small"]
    result = run(capsys, model, "-o", tmp_path / "auto.pte", "--io", "int8", "--ram", fits)
    assert result.status == 0, result.err
    assert "memory schedule small: the first schedule whose arena fits" in result.out
    assert "stage in strips" in result.out
    small = needs["small"] - 1
    result = run(capsys, model, "-o", tmp_path / "none.pte", "--io", "int8", "--ram", small)
    assert result.status == 2 and "--memory small" in result.err
    assert not (tmp_path / "none.pte").exists()


def test_an_image_with_a_stage_compiles_the_kernels_its_steps_call(guard) -> None:
    """The stage's kernel calls its steps' kernels directly, so the Zephyr module compiles
    their files too (CORTEX_M_NN_MODEL_KERNEL_SOURCES), though the program registers only the
    operators it calls."""
    from cortex_m_nn.embed.pte_source import cmake_facts, model_facts

    facts = model_facts(guard.pte)
    assert "stage" in facts.kernels and "add" not in facts.kernels
    assert set(STEP_OPERATORS) <= set(facts.kernel_sources)
    sources = ";".join(facts.kernel_sources)
    assert f'set(CORTEX_M_NN_MODEL_KERNEL_SOURCES "{sources}")' in cmake_facts(facts)
