"""On target: each model compiled for each core (--target per core), embedded in the bare-metal
runner, run under QEMU; the outputs must be bit-identical to the Python reference (the lowered
graph's CMSIS-NN-exact references) on the same inputs.

Builds are cached in pytest's cache directory (ExecuTorch's runtime, CMSIS-NN and the kernels
compile once per core, a few minutes each on two cores).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.target import harness

from cortex_m_nn.pte import forward_plan, runtime_overhead

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
    harness.build(core, models_dir, root / "build")
    return core, root / "build", runs


@pytest.mark.parametrize("model", harness.MODEL_NAMES)
def test_bit_exact_on_target(core_build: tuple, model: str) -> None:
    core, build_dir, runs = core_build
    run = runs[model]
    result = harness.run(build_dir / f"runner_{model}.elf", core)
    assert result.returncode == 0, (
        f"runner exit {result.returncode}:\n{result.stdout}{result.stderr}"
    )
    assert "PASS (bit-exact)" in result.stdout
    # Independently of the runner's own comparison: the printed bytes against the reference.
    assert result.outputs() == harness.output_bytes(run.expected)
    # The method allocator, sized from the report's runtime-overhead count, was enough, and
    # the count is exactly what ExecuTorch's Method::load took from it.
    assert result.method_allocator_used() == runtime_overhead(run.compiled.pte).total
    # Model::run_profiled ran forward again, one kernel call at a time, with the same outputs.
    calls = sum(i.kind == "KernelCall" for i in forward_plan(run.compiled.pte).instructions)
    assert f"runner: {calls} kernel calls run one at a time" in result.stdout


def test_runner_fails_on_a_wrong_reference(core_build: tuple) -> None:
    """The runner's exit status can fail: one changed expected value gives exit 1."""
    core, build_dir, _ = core_build
    if core.name != "m55":
        pytest.skip("checked once, on the M55 build")
    result = harness.run(build_dir / "runner_ds_cnn_wrong_reference.elf", core)
    assert result.returncode == 1, result.stdout
    assert "FAIL (outputs differ)" in result.stdout
