"""On target: each model compiled for each core (--target per core), embedded in the bare-metal
runner, run under QEMU; the outputs must be bit-identical to the Python reference (the lowered
graph's CMSIS-NN-exact references) on the same inputs.

Builds are cached in pytest's cache directory (ExecuTorch's runtime, CMSIS-NN and the kernels
compile once per core, a few minutes each on two cores).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch
from elftools.elf.elffile import ELFFile
from executorch.exir import schema
from executorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary
from tests.target import harness

from cortex_m_nn.core.options import IoType
from cortex_m_nn.embed import firmware
from cortex_m_nn.embed.pte_source import model_facts
from cortex_m_nn.plan import overlap, paths
from cortex_m_nn.plan import patch as stage_plan
from cortex_m_nn.serialize.pte import forward_plan, runtime_overhead

pytestmark = pytest.mark.skipif(harness.missing() is not None, reason=str(harness.missing()))


@pytest.fixture(scope="module", params=list(harness.CORES))
def core_build(request: pytest.FixtureRequest) -> tuple[harness.Core, Path, dict]:
    """Every model compiled for one core and its runners built: (core, build dir, runs)."""
    core = harness.CORES[request.param]
    root = Path(request.config.cache.mkdir(f"target-{core.name}"))
    models_dir = root / "models"
    for stale in models_dir.glob("*"):
        stale.unlink()
    runs = {}
    for name in harness.MODEL_NAMES:
        runs[name] = harness.compile_for(name, core)
        harness.write_model(runs[name], models_dir)
    if core.name == "m55":  # one runner whose embedded reference is wrong by one value
        ds_cnn = runs["ds_cnn"]
        wrong = [t.clone() for t in ds_cnn.expected]
        wrong[0].view(-1)[0] += 1.0
        harness.write_model(
            harness.ModelRun("ds_cnn_wrong_reference", ds_cnn.compiled, ds_cnn.inputs, wrong),
            models_dir,
        )
        # one image built for conv2d's int16 case where its program calls an int8 one
        harness.write_model(
            harness.ModelRun("ds_cnn_missing_case", ds_cnn.compiled, ds_cnn.inputs, wrong),
            models_dir,
        )
        cases = model_facts(ds_cnn.compiled.pte).cases
        called = next(c for c in cases if c.startswith("conv2d."))  # a case of ours, on MVE
        assert "conv2d.int16" not in cases
        other = ["conv2d.int16" if c == called else c for c in cases]
        (models_dir / "ds_cnn_missing_case.cases").write_text(",".join(other))
    # the small memory schedule: outputs over their inputs' consumed bytes (plan.overlap)
    for name in SMALL_SCHEDULE_MODELS:
        io = None if name == "overlap_guard" else IoType.INT8  # its float output: all of it
        with pytest.MonkeyPatch.context() as patch:  # the guards: every path they have, kept
            if name in GUARDS:
                patch.setattr(paths, "relaxable", lambda *_: [])
                patch.setattr(stage_plan, "relax", lambda _, chosen, *__: chosen)
            small = harness.compile_for(name, core, io=io, schedule="small")
        runs[f"{name}_small"] = replace(small, name=f"{name}_small")
        harness.write_model(runs[f"{name}_small"], models_dir)
    with pytest.MonkeyPatch.context() as patch:  # the guard's control: leads too short
        lead = overlap._lead
        patch.setattr(overlap, "_lead", lambda *a: lead(*a) - TOO_TIGHT)
        patch.setattr(paths, "relaxable", lambda *_: [])
        tight = harness.compile_for("overlap_guard", core, schedule="small")
    harness.write_model(replace(tight, name="overlap_guard_too_tight"), models_dir)
    runs["overlap_guard_too_tight"] = tight
    # every core: the per-channel shift check on its own code path (DS-CNN's test vector)
    harness.write_model(runs["ds_cnn"], models_dir / "damaged")
    for suffix in (".pte", ".test_vector.h"):
        (models_dir / "damaged" / f"ds_cnn{suffix}").rename(
            models_dir / f"ds_cnn_damaged_shift{suffix}"
        )
    (models_dir / "damaged").rmdir()
    damaged = models_dir / "ds_cnn_damaged_shift.pte"
    damaged.write_bytes(damaged_shift(damaged.read_bytes()))
    harness.build(core, models_dir, root / "build")
    return core, root / "build", runs


def damaged_shift(pte: bytes) -> bytes:
    """The program with the last per-channel shift of its first conv2d set to 31, one past
    CMSIS-NN's [-31, 30] (the last channel: the end of the check's loop, MVE's last lanes)."""
    pte_file = deserialize_pte_binary(pte)
    program = pte_file.program
    plan = next(p for p in program.execution_plan if p.name == "forward")
    calls = [i.instr_args for c in plan.chains for i in c.instructions]
    conv = next(
        c
        for c in calls
        if isinstance(c, schema.KernelCall)
        and plan.operators[c.op_index].name == "cortex_m_nn::conv2d"
    )
    shifts = plan.values[conv.args[4]].val  # input, weight, bias, multipliers, shifts, ...
    storage = bytearray(program.constant_buffer[shifts.data_buffer_idx].storage)
    storage[-4:] = (31).to_bytes(4, "little", signed=True)
    program.constant_buffer[shifts.data_buffer_idx].storage = bytes(storage)
    return bytes(serialize_pte_binary(pte_file))


@pytest.mark.parametrize("model", harness.MODEL_NAMES)
def test_bit_exact_on_target(core_build: tuple, model: str) -> None:
    core, build_dir, runs = core_build
    run = runs[model]
    result = harness.run(build_dir / f"runner_{model}.elf", core)
    assert result.returncode == 0, (
        f"runner exit {result.returncode}:\n{result.stdout}{result.stderr}"
    )
    assert "PASS (bit-exact)" in result.stdout
    if run.next_expected is not None:  # a model with states: its second run must differ
        assert not all(map(torch.equal, run.expected, run.next_expected))
    # Independently of the runner's own comparison: the printed bytes against the reference.
    assert result.outputs() == harness.output_bytes(run.expected)
    # The method allocator, sized from the report's runtime-overhead count, was enough, and
    # the count is exactly what ExecuTorch's Method::load took from it.
    assert result.method_allocator_used() == runtime_overhead(run.compiled.pte).total
    # Model::run_profiled ran forward again, one kernel call at a time, with the same outputs.
    calls = sum(i.kind == "KernelCall" for i in forward_plan(run.compiled.pte).instructions)
    assert f"runner: {calls} kernel calls run one at a time" in result.stdout


#: Programs run with the small schedule, whose outputs take their dead inputs' bytes: the
#: guard model (one call of each path plan.overlap lets overlap) and three MLPerf-style models;
#: and whose first layers run in strips (plan.patch): the stage guard (each kind of strip
#: call), MobileNetV2-0.35 at 144×144 and MobileNetV1-0.25 (VWW).
SMALL_SCHEDULE_MODELS = ("overlap_guard", "ds_cnn", "resnet8", "mobilenet_v1_025")
SMALL_SCHEDULE_MODELS += ("stage_guard", "mobilenet_v2_144")
#: Of those, the guard models: planned with every path plan.paths gives them kept (not
#: relaxed where their arena would not need it), so each runs on the core.
GUARDS = ("overlap_guard", "stage_guard")
#: Of those, the programs that must run a stage in strips.
STAGED = ("stage_guard", "mobilenet_v2_144", "mobilenet_v1_025")
#: How much shorter than plan.overlap's leads the control's are: two rows of the guard's
#: 16×16×8 tensors, more than the leads' margin (they assume the largest group a path may
#: interleave; 64 bytes short still ran bit exact on M55, where its groups are smaller).
TOO_TIGHT = 256


@pytest.mark.parametrize("model", SMALL_SCHEDULE_MODELS)
def test_small_schedule_bit_exact(core_build: tuple, model: str) -> None:
    """A program planned with outputs over the consumed part of their inputs, or with its
    first layers in strips, runs bit exact on the core's CMSIS-NN code paths: a kernel reading
    a byte after writing over it, or a strip computed from the wrong rows or pads, would
    change the outputs (random inputs); a window or strip planned off its rows fails the
    load. The guard model's plan shares bytes on every core; the staged models run a stage."""
    core, build_dir, runs = core_build
    run = runs[f"{model}_small"]
    memory = run.compiled.memory
    assert memory.conflicts() == []
    if model == "overlap_guard":
        assert len(memory.overlapping()) >= 3, memory.overlapping()
        if core.name != "m55":  # its 1x1 stride-1 convolution, row by row (plan.paths)
            assert memory.paths.get("arm_convolve_1x1_s8", 0) > 0, memory.paths
    if model in STAGED:
        assert memory.stage is not None, "no stage runs in strips"
        if core.name == "m55":  # 3x3 depthwise steps on our kernel, no buffer
            assert memory.stage["step_paths"].get("depthwise_conv_lanes_s8", 0) > 0
    result = harness.run(build_dir / f"runner_{model}_small.elf", core)
    assert result.returncode == 0, f"runner exit {result.returncode}:\n{result.stdout}"
    assert result.outputs() == harness.output_bytes(run.expected)


def test_a_lead_too_short_corrupts_the_outputs(core_build: tuple) -> None:
    """The control of the test above: the guard model planned with every lead TOO_TIGHT
    bytes shorter than plan.overlap computes shares bytes the kernels still read, and its
    outputs differ from the reference, so a wrong lead cannot pass unseen."""
    core, build_dir, runs = core_build
    fair = runs["overlap_guard_small"].compiled.memory
    tight = runs["overlap_guard_too_tight"].compiled.memory
    short = [  # outputs placed over bytes their true lead keeps from them
        (out.name, source.name)
        for a, b in tight.shared()
        for out, source in ((a, b), (b, a))
        if (out.name, source.name) in fair.leads
        and out.offset > source.offset - fair.leads[out.name, source.name]
    ]
    assert short, "the control's plan breaks no lead"
    result = harness.run(build_dir / "runner_overlap_guard_too_tight.elf", core)
    assert result.returncode == 1, result.stdout
    assert "FAIL (outputs differ)" in result.stdout


def test_runner_fails_on_a_wrong_reference(core_build: tuple) -> None:
    """The runner's exit status can fail: one changed expected value gives exit 1."""
    core, build_dir, _ = core_build
    if core.name != "m55":
        pytest.skip("checked once, on the M55 build")
    result = harness.run(build_dir / "runner_ds_cnn_wrong_reference.elf", core)
    assert result.returncode == 1, result.stdout
    assert "FAIL (outputs differ)" in result.stdout


def test_a_damaged_shift_is_refused_on_every_core(core_build: tuple) -> None:
    """A per-channel shift outside CMSIS-NN's range makes Model::load fail, on the MVE (M55),
    DSP (M33, M4) and scalar (M3) code paths of the check alike: the proof pass at load checks
    every call's arguments, so the program never runs (its later runs skip the checks)."""
    core, build_dir, _ = core_build
    result = harness.run(build_dir / "runner_ds_cnn_damaged_shift.elf", core)
    assert result.returncode not in (0, 1), result.stdout  # 1: ran and compared (wrongly)
    assert "runner: load: " in result.stdout, result.stdout
    assert "refused its arguments" in result.stdout, result.stdout
    assert "PASS" not in result.stdout and "output 0" not in result.stdout


@pytest.mark.parametrize("model", harness.MODEL_NAMES)
def test_image_links_only_the_cases_its_program_calls(core_build: tuple, model: str) -> None:
    """The image's kernel cases (the case functions its symbol table holds) are exactly those
    its program's calls run: none it does not call (the flash every image used to pay for
    int16, int4 and the rest), none missing (the bit-exact run above needs each). And no
    CMSIS-NN function of a width (the first _s16 or _s4 of its name) that no linked case is
    of: those come only with their cases (the recurrent int8 cases aside: CMSIS-NN's LSTM
    keeps its gates and cell state in int16, and our GRU its gates)."""
    core, build_dir, runs = core_build
    elf = build_dir / f"runner_{model}.elf"
    called = set(model_facts(runs[model].compiled.pte).cases)
    report = firmware.inspect(elf)
    assert set(report["cases"]) == called
    kinds = {case.split(".")[1] for case in called}
    if any(case.startswith(("lstm.", "gru.")) for case in called):
        kinds.add("int16")
    for width, kind in (("s16", "int16"), ("s4", "int4")):
        if kind not in kinds:
            assert width not in report["cmsis_nn_widths"], (width, report["cmsis_nn_widths"])


#: C-library and C++-library code an image must not link: assert's printing handler (with the
#: expression, file and function strings of every assert behind it: flatbuffers' index checks
#: end in et_pal_abort instead, cmake/include/cortex_m_nn/flatbuffers_check.h) and libstdc++'s
#: exception helpers (std::string_view::substr's range error; firmware builds have no
#: exceptions, so they only abort, after formatting a message).
UNWANTED_LIBRARY_CODE = ("__assert_func", "_ZSt24__throw_out_of_range_fmtPKcz")


@pytest.mark.parametrize("model", harness.MODEL_NAMES)
def test_image_links_no_assert_or_exception_strings(core_build: tuple, model: str) -> None:
    """No image links the library code above (each would bring its strings back)."""
    _, build_dir, _ = core_build
    with open(build_dir / f"runner_{model}.elf", "rb") as stream:
        symbols = {s.name for s in ELFFile(stream).get_section_by_name(".symtab").iter_symbols()}
    assert not symbols & set(UNWANTED_LIBRARY_CODE), sorted(symbols & set(UNWANTED_LIBRARY_CODE))


def test_a_call_of_a_case_the_image_lacks_is_refused_at_load(core_build: tuple) -> None:
    """An image built for other cases than its program calls (conv2d's int16 case for a
    program of int8 convolutions) refuses the program when it is loaded, in one line."""
    core, build_dir, _ = core_build
    if core.name != "m55":
        pytest.skip("checked once, on the M55 build")
    result = harness.run(build_dir / "runner_ds_cnn_missing_case.elf", core)
    assert result.returncode not in (0, 1), result.stdout
    assert "calls a kernel case this image does not link" in result.stdout, result.stdout
    assert "PASS" not in result.stdout and "output 0" not in result.stdout


# -- a program compiled with single rounding, on kernels built with it -------------------------

#: ds_cnn: a whole network; boundary: inputs on exact rounding ties, where the roundings differ
SINGLE_ROUNDING_MODELS = ("ds_cnn", "boundary")


@pytest.fixture(scope="module")
def single_rounding_build(request: pytest.FixtureRequest) -> tuple[Path, dict]:
    """Each model compiled through the front door with ``rounding="single"``, its expected
    outputs from ``Program.run``, and runners built on CMSIS-NN with single rounding (M55)."""
    from tests.target.models import TARGET_INPUTS

    import cortex_m_nn
    from cortex_m_nn.frontend.calibration import synthetic

    core = harness.CORES["m55"]
    root = Path(request.config.cache.mkdir("target-m55-single"))
    models_dir = root / "models"
    for stale in models_dir.glob("*"):
        stale.unlink()
    runs = {}
    for name in SINGLE_ROUNDING_MODELS:
        source = harness.model_source(name)
        samples = synthetic(source.example_inputs, count=8).samples
        program = cortex_m_nn.compile(
            source.module,
            source.example_inputs,
            calibration=samples,
            target=core.target,
            rounding="single",
        )
        gen = torch.Generator().manual_seed(3)
        inputs = tuple(torch.randn(x.shape, generator=gen) for x in source.example_inputs)
        if name in TARGET_INPUTS:
            inputs = TARGET_INPUTS[name](program.compiled.lowered, gen)
        expected = program.run(*inputs)
        runs[name] = (program, harness.ModelRun(name, program.compiled, inputs, expected))
        harness.write_model(runs[name][1], models_dir)
    harness.build(core, models_dir, root / "build", rounding="single")
    return root / "build", runs


def test_the_roundings_differ_on_the_boundary_inputs(single_rounding_build: tuple) -> None:
    """The comparison below can fail: on the boundary inputs the program's references under
    double rounding give other outputs than under its own single rounding."""
    from cortex_m_nn.core.abi import Rounding
    from cortex_m_nn.frontend.states import fresh
    from cortex_m_nn.ops.library import run_references

    program, run = single_rounding_build[1]["boundary"]
    double = run_references(fresh(program.compiled.io.graph), run.inputs, Rounding.DOUBLE)
    assert not all(map(torch.equal, double, run.expected))


@pytest.mark.parametrize("model", SINGLE_ROUNDING_MODELS)
def test_program_run_matches_the_device_with_single_rounding(
    single_rounding_build: tuple, model: str
) -> None:
    """``Program.run`` of a ``rounding="single"`` program gives, byte for byte, what the
    kernels built with CMSIS-NN's single rounding give on the emulated M55."""
    build_dir, runs = single_rounding_build
    program, run = runs[model]
    result = harness.run(build_dir / f"runner_{model}.elf", harness.CORES["m55"])
    assert result.returncode == 0, f"runner exit {result.returncode}:\n{result.stdout}"
    assert "PASS (bit-exact)" in result.stdout
    assert result.outputs() == harness.output_bytes(run.expected)
