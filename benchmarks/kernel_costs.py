"""The kernel cost model's measurements: our depthwise_conv_lanes_s8 and CMSIS-NN's
arm_depthwise_conv_wrapper_s8 on a grid of layer shapes, under QEMU on the M55 (MVE) or the
M33 (DSP).

Usage::

    PYTHONPATH=python:. python benchmarks/kernel_costs.py [--core m55|m33] [--write]
        [--build-dir DIR]

Runs ``tests/target/compute`` (one image: every grid case through both functions, each output
checked against the Python reference) with the instruction-count plugin, then fits each
function's instructions per count of its loops (``cortex_m_nn.plan.costs``: lanes_counts,
wrapper_counts) by least squares. Prints, per case, the measured and fitted instructions of
both and which one the compiler would choose, and the fit's worst relative error; ``--write``
stores the fit in ``python/cortex_m_nn/plan/kernel_costs.json`` under the core's ISA, which
``plan.paths`` reads.
Needs ``CMSIS_NN_PATH``, Debian's ``arm-none-eabi-gcc`` and ``qemu-system-arm``.
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

import numpy as np
from tests.target import compute_cases, harness

from cortex_m_nn.core.abi import Rounding
from cortex_m_nn.core.target import Isa
from cortex_m_nn.plan import costs

#: the cores measured, by ISA: the M4 runs the M33's code within 1 %
CORES = {"m55": Isa.MVE, "m33": Isa.DSP}

REPO = Path(__file__).resolve().parents[1]
#: the calls whose fit error is reported: below, a call's constant costs dominate and a choice
#: between the two functions changes a few hundred instructions
LARGE = 20_000


def grid() -> list[compute_cases.Case]:
    """Square images 4 to 48 wide and narrow ones (25 x 5, 49 x 10 and their transposes), 4 to
    256 channels, stride 1 and 2, padded by 1, tiles of 0 (no buffer), 1, 4 and every output
    row; images whose input and output fit the image's memory."""
    shapes = [(size, size) for size in (4, 6, 8, 12, 16, 24, 32, 48)]
    shapes += [(25, 5), (49, 10), (5, 25), (10, 40)]  # keyword spotters' narrow images
    cases = []
    for (h, w), channels, stride in itertools.product(shapes, (4, 8, 16, 32, 64, 128, 256), (1, 2)):
        if h * w * channels > 48 * 48 * 16:
            continue
        for tile in sorted({0, 1, 4, h}):
            cases.append(
                compute_cases.Case(
                    1, h, w, channels, (stride, stride), (1, 1, 1, 1), -3, 5, (-128, 127),
                    seed=len(cases) + 1, tile=tile,
                )
            )  # fmt: skip
    return cases


def batches(cases: list[compute_cases.Case], budget: int = 1 << 20) -> list[list]:
    """The cases in images whose expected outputs take at most ``budget`` bytes each (the
    M55 image keeps them in its 2 MB model region)."""
    found: list[list] = [[]]
    used = 0
    for case in cases:
        size = int(np.prod(case.output_shape))
        if found[-1] and used + size > budget:
            found.append([])
            used = 0
        found[-1].append(case)
        used += size
    return found


def counts(isa: Isa, cases: list[compute_cases.Case]) -> tuple[list[list[float]], list]:
    """Each case's counts of our function's loops and of the wrapper's on ``isa``."""
    ours = [costs.ours_counts(isa, c.input_shape, c.output_shape, c.stride, c.tile) for c in cases]
    theirs = [
        costs.theirs_counts(isa, c.input_shape, c.output_shape, c.stride, c.padding) for c in cases
    ]
    return ours, theirs


def fit(rows: list[list[float]], measured: list[int]) -> tuple[list[float], float, int]:
    """Instructions per count (least squares), the worst relative error of the fit on calls of
    at least :data:`LARGE` instructions (where a choice matters) and the case it is on."""
    a, y = np.array(rows), np.array(measured, dtype=float)
    weights = np.linalg.lstsq(a, y, rcond=None)[0]
    errors = np.where(y >= LARGE, np.abs(a @ weights - y) / y, 0.0)
    return [round(float(w), 4) for w in weights], float(errors.max()), int(errors.argmax())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="store the fit in plan/")
    parser.add_argument("--build-dir", type=Path, default=REPO / "build" / "kernel-costs")
    parser.add_argument("--core", choices=sorted(CORES), default="m55")
    args = parser.parse_args(argv)
    reason = harness.missing()
    if reason:
        print(f"kernel_costs: skipped: {reason}")
        return 0
    cases = grid()
    plugin = harness.build_plugin(args.build_dir / "plugin")
    core, isa = harness.CORES[args.core], CORES[args.core]
    outcomes: list[compute_cases.Outcome] = []
    for index, batch in enumerate(batches(cases)):
        build = args.build_dir / f"{args.core}-image-{index}"
        status, found = compute_cases.run(batch, core, build, Rounding.DOUBLE, plugin)
        wrong = [o.case for o in found if o.ours_differ or o.wrapper_differ]
        if status != 0 or len(found) != len(batch) or wrong:
            print(
                f"kernel_costs: image {index} failed (status {status}, {len(wrong)} cases differ)"
            )
            return 1
        outcomes += found
    lanes_rows, wrapper_rows = counts(isa, [o.case for o in outcomes])
    lanes, lanes_error, lanes_worst = fit(lanes_rows, [o.ours_instructions for o in outcomes])
    wrapper, wrapper_error, wrapper_worst = fit(
        wrapper_rows, [o.wrapper_instructions for o in outcomes]
    )
    head = f"{'input':>14} {'s':>2} {'tile':>4} {'ours':>10} {'fitted':>10} {'CMSIS-NN':>10} "
    print(head + f"{'fitted':>10} {'ours/CMSIS':>10}")
    for o, lr, wr in zip(outcomes, lanes_rows, wrapper_rows, strict=True):
        c = o.case
        fitted = (np.dot(lanes, lr), np.dot(wrapper, wr))
        print(
            f"{c.in_h:>4}x{c.in_w:<3}x{c.channels:<4} {c.stride[0]:>2} {c.tile:>4} "
            f"{o.ours_instructions:>10,} {fitted[0]:>10,.0f} {o.wrapper_instructions:>10,} "
            f"{fitted[1]:>10,.0f} {o.ours_instructions / o.wrapper_instructions:>10.3f}"
        )
    print(f"{len(outcomes)} cases bit exact; worst fit error (calls of {LARGE:,} instructions "
          f"or more): ours {lanes_error:.1%} "
          f"({outcomes[lanes_worst].case}), CMSIS-NN {wrapper_error:.1%} "
          f"({outcomes[wrapper_worst].case})")  # fmt: skip
    model = {
        "measured": f"benchmarks/kernel_costs.py on QEMU {core.machine} ({core.cpu}, {isa}, -O3)",
        "cases": len(outcomes),
        "lanes": {
            "counts": costs.COUNT_NAMES[isa][0],
            "instructions_per_count": lanes,
            "worst_error": round(lanes_error, 4),
        },
        "wrapper": {
            "counts": costs.COUNT_NAMES[isa][1],
            "instructions_per_count": wrapper,
            "worst_error": round(wrapper_error, 4),
        },
    }
    if args.write:
        models = json.loads(costs.MODEL.read_text())
        models[isa.value] = model
        costs.MODEL.write_text(json.dumps(models, indent=2) + "\n")
        print(f"wrote {costs.MODEL.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
