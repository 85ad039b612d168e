"""The kernel cost model's measurements: our depthwise_conv_lanes_s8 and CMSIS-NN's
arm_depthwise_conv_wrapper_s8 on a grid of layer shapes, under QEMU on the M55 (MVE) or the
M33 (DSP), and our pointwise_conv_s8, window_conv_s8 and fully_connected_quads_s8 against the
wrapper's arm_convolve_1x1_s8_fast and arm_convolve_s8 and arm_fully_connected_s8.

Usage::

    PYTHONPATH=python:. python benchmarks/kernel_costs.py [--core m55|m33] [--write]
        [--build-dir DIR] [--kernels depthwise,pointwise,window,linear] [--models NAMES]

Runs ``tests/target/compute`` (images of grid cases, each through both functions, each output
checked against the Python reference) with the instruction-count plugin, then fits each
function's instructions per count of its loops (``cortex_m_nn.plan.costs``: ours_counts,
theirs_counts; ``cortex_m_nn.plan.product_costs.PRODUCTS``, per ISA) by least squares. Prints,
per case, the measured and fitted instructions of both and which one the compiler would
choose, and the fit's worst relative error; ``--write`` stores the fit in
``python/cortex_m_nn/plan/kernel_costs.json`` under the core's ISA, which ``plan.paths`` reads
(the kernels measured replace their entries; the others stay).
``--models`` instead runs the shapes of those models' calls that the compiler gives our matrix
products on the core through both functions and prints the per-kernel table of
``benchmarks/README.md`` (MACs, instructions and MACs per instruction, ours against CMSIS-NN's).
Needs ``CMSIS_NN_PATH``, Debian's ``arm-none-eabi-gcc`` and ``qemu-system-arm``.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
from pathlib import Path

import numpy as np
from tests.target import compute_cases, harness

from cortex_m_nn.core.abi import Rounding
from cortex_m_nn.core.target import Isa
from cortex_m_nn.plan import costs, product_costs

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


def pointwise_grid() -> list[compute_cases.ConvCase]:
    """1x1 convolutions of 1 to 48 x 48 pixels (and keyword spotters' 25 x 5), depths that are
    multiples of four from 4 to 256, 4 to 256 output channels (and a few odd counts); images
    whose input, output and weights fit the image's memory."""
    images = [(1, 1), (1, 3), (3, 3), (5, 5), (6, 6), (12, 12), (24, 24), (48, 48), (25, 5)]
    cases = []
    for (h, w), depth, channels in itertools.product(
        images, (4, 8, 16, 32, 64, 128, 256), (4, 8, 16, 33, 64, 128, 256)
    ):
        largest = max(h * w * depth, h * w * channels)
        if largest > 48 * 48 * 16 or depth * channels > 256 * 256:
            continue
        case = compute_cases.ConvCase(
            1, h, w, depth, channels, 3, -5, (-128, 127), seed=len(cases) + 1
        )
        cases.append(case)
    return cases


def window_grid(isa: Isa) -> list[compute_cases.ConvCase]:
    """Convolutions the wrapper runs through ``arm_convolve_s8``: 3x3 (padded by 1, stride
    1 and 2) and 5x5 (padded by 2) on 4x4 to 32x32 images, and keyword spotters' 25 x 5 and
    49 x 10 images, 4 to 64 input channels (multiples of four; on MVE also first layers' 1 and
    3, and DS-CNN's 10x4 window of stride 2) into 4 to 64 output channels (and an odd count);
    images whose input, output and weights fit the image's memory."""
    images = [(4, 4), (8, 8), (12, 12), (16, 16), (32, 32), (25, 5), (49, 10)]
    windows = [((3, 3), 1, (1, 1, 1, 1)), ((3, 3), 2, (1, 1, 1, 1)), ((5, 5), 1, (2, 2, 2, 2))]
    depths = (4, 8, 16, 32, 64)
    if isa is Isa.MVE:
        windows.append(((10, 4), 2, (4, 1, 5, 2)))
        depths = (1, 3, *depths)
    cases = []
    for (h, w), (kernel, stride, pad), depth, channels in itertools.product(
        images, windows, depths, (4, 16, 33, 64)
    ):
        if h * w * max(depth, channels) > 32 * 32 * 16 or kernel[0] * kernel[1] * depth > 600:
            continue
        if h + pad[0] + pad[2] < kernel[0] or w + pad[1] + pad[3] < kernel[1]:
            continue
        case = compute_cases.ConvCase(
            1, h, w, depth, channels, 3, -5, (-128, 127), len(cases) + 1, True, kernel,
            (stride, stride), pad,
        )  # fmt: skip
        cases.append(case)
    return cases


def linear_grid() -> list[compute_cases.LinearCase]:
    """Fully connected layers of 1 and 2 rows, 4 to 640 inputs (and odd counts) into 4 to 640
    output features (and odd counts), per tensor and per channel; weights that fit the image's
    memory."""
    depths = (4, 8, 16, 33, 64, 128, 256, 640)
    features = (4, 8, 13, 32, 64, 128, 256, 640)
    cases = []
    for rows, depth, count, channels in itertools.product((1, 2), depths, features, (False, True)):
        if depth * count <= 640 * 256:
            seed = len(cases) + 1
            cases.append(
                compute_cases.LinearCase(rows, depth, count, 3, -5, (-128, 127), seed, channels)
            )
    return cases


def batches(cases: list, budget: int = 1 << 20) -> list[list]:
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


def counts(isa: Isa, kernel: str, cases: list) -> tuple[list[list[float]], list]:
    """Each case's counts of our function's loops and of CMSIS-NN's on ``isa``."""
    if kernel != "depthwise":
        product = product_costs.PRODUCTS[isa][PRODUCT[kernel]]
        shapes = [_shape(kernel, c) for c in cases]
        return [product.ours_counts(*s) for s in shapes], [
            product.theirs_counts(*s) for s in shapes
        ]
    ours = [costs.ours_counts(isa, c.input_shape, c.output_shape, c.stride, c.tile) for c in cases]
    theirs = [
        costs.theirs_counts(isa, c.input_shape, c.output_shape, c.stride, c.padding) for c in cases
    ]
    return ours, theirs


#: a kernel of the grid → its product in ``product_costs.PRODUCTS``
PRODUCT = {"pointwise": "pointwise", "window": "window", "linear": "quads"}


def _shape(kernel: str, case: compute_cases.ConvCase | compute_cases.LinearCase) -> tuple:
    """The shape arguments of ``kernel``'s product model for ``case``."""
    if isinstance(case, compute_cases.LinearCase):
        return case.input_shape, case.weight_shape, case.per_channel
    if kernel == "window":
        return case.weight_shape, case.output_shape
    return case.input_shape, case.channels


def fit(rows: list[list[float]], measured: list[int]) -> tuple[list[float], float, int]:
    """Instructions per count (least squares), the worst relative error of the fit on calls of
    at least :data:`LARGE` instructions (where a choice matters) and the case it is on."""
    a, y = np.array(rows), np.array(measured, dtype=float)
    weights = np.linalg.lstsq(a, y, rcond=None)[0]
    errors = np.where(y >= LARGE, np.abs(a @ weights - y) / y, 0.0)
    return [round(float(w), 4) for w in weights], float(errors.max()), int(errors.argmax())


def measure(
    kernel: str, args: argparse.Namespace, plugin: Path
) -> list[compute_cases.Outcome] | None:
    """Every case of ``kernel``'s grid run on the core, in batches; None (and a line) if an
    image failed or a case differs from the reference."""
    grids = {
        "depthwise": grid, "pointwise": pointwise_grid,
        "window": lambda: window_grid(CORES[args.core]), "linear": linear_grid,
    }  # fmt: skip
    core = harness.CORES[args.core]
    outcomes: list[compute_cases.Outcome] = []
    for index, batch in enumerate(batches(grids[kernel]())):
        build = args.build_dir / f"{args.core}-{kernel}-image-{index}"
        cases, extra = (batch, []) if kernel == "depthwise" else ([], batch)
        status, found = compute_cases.run(cases, core, build, Rounding.DOUBLE, plugin, extra)
        wrong = [o.case for o in found if o.ours_differ or o.wrapper_differ]
        if status != 0 or len(found) != len(batch) or wrong:
            print(
                f"kernel_costs: {kernel} image {index} failed (status {status}, "
                f"{len(wrong)} cases differ)"
            )
            return None
        outcomes += found
    return outcomes


def describe(
    case: compute_cases.Case | compute_cases.ConvCase | compute_cases.LinearCase,
) -> str:
    """A case's shape, as the table prints it."""
    if isinstance(case, compute_cases.LinearCase):
        return f"{case.batch:>4}x{case.depth:<4}->{case.features:<4}"
    if isinstance(case, compute_cases.ConvCase):
        window = f" k{case.kernel[0]}s{case.stride[0]}" if case.window else ""
        return f"{case.in_h:>4}x{case.in_w:<3}x{case.depth:<4}->{case.channels:<4}{window}"
    shape = f"{case.in_h:>4}x{case.in_w:<3}x{case.channels:<4}"
    return f"{shape} s{case.stride[0]} t{case.tile:<3}"


def model_of(kernel: str, isa: Isa, outcomes: list[compute_cases.Outcome]) -> dict:
    """The fit of ``kernel``'s two functions to ``outcomes``, printing each case's measured and
    fitted instructions and the worst errors."""
    ours_rows, theirs_rows = counts(isa, kernel, [o.case for o in outcomes])
    ours, ours_error, ours_worst = fit(ours_rows, [o.ours_instructions for o in outcomes])
    theirs, theirs_error, theirs_worst = fit(
        theirs_rows, [o.wrapper_instructions for o in outcomes]
    )
    print(f"{'case':>22} {'ours':>10} {'fitted':>10} {'CMSIS-NN':>10} {'fitted':>10} "
          f"{'ours/CMSIS':>10}")  # fmt: skip
    for o, ours_row, theirs_row in zip(outcomes, ours_rows, theirs_rows, strict=True):
        fitted = (np.dot(ours, ours_row), np.dot(theirs, theirs_row))
        print(
            f"{describe(o.case):>22} {o.ours_instructions:>10,} {fitted[0]:>10,.0f} "
            f"{o.wrapper_instructions:>10,} {fitted[1]:>10,.0f} "
            f"{o.ours_instructions / o.wrapper_instructions:>10.3f}"
        )
    print(f"{kernel}: {len(outcomes)} cases bit exact; worst fit error (calls of {LARGE:,} "
          f"instructions or more): ours {ours_error:.1%} ({outcomes[ours_worst].case}), "
          f"CMSIS-NN {theirs_error:.1%} ({outcomes[theirs_worst].case})")  # fmt: skip
    if kernel == "depthwise":
        names, keys = costs.COUNT_NAMES[isa], ("lanes", "wrapper")
    else:
        product = product_costs.PRODUCTS[isa][PRODUCT[kernel]]
        names = (product.ours_names, product.theirs_names)
        keys = (product.ours, product.theirs)
    return {
        keys[0]: {
            "counts": names[0],
            "instructions_per_count": ours,
            "worst_error": round(ours_error, 4),
        },
        keys[1]: {
            "counts": names[1],
            "instructions_per_count": theirs,
            "worst_error": round(theirs_error, 4),
        },
        f"{kernel}_cases": len(outcomes),
    }


def model_cases(
    names: list[str], core: str
) -> list[tuple[str, compute_cases.ConvCase | compute_cases.LinearCase]]:
    """The calls of models ``names`` (int8 I/O, ``fast``) that ``core``'s compiler gives our
    matrix products, as cases of their shapes (the image draws its own numbers), each with
    its model's name, a shape once per model."""
    from cortex_m_nn.core.cmsis_nn import POINTWISE, QUADS, WINDOW
    from cortex_m_nn.core.options import IoType
    from cortex_m_nn.plan.stage import OPS

    found: list[tuple[str, compute_cases.ConvCase | compute_cases.LinearCase]] = []
    conv2d = OPS.conv2d.default
    for name in names:
        graph = harness.compile_for(name, harness.CORES[core], io=IoType.INT8).compiled.io.graph
        for call in graph.graph.nodes:
            if call.op != "call_function" or call.target not in (OPS.linear.default, conv2d):
                continue
            values = [a.meta["val"] for a in call.args[:2]]
            shapes = [tuple((v[0] if isinstance(v, tuple) else v).shape) for v in values]
            seed = len(found) + 1
            if call.target is OPS.linear.default and call.args[-1] == QUADS:
                rows = int(np.prod(shapes[0])) // shapes[1][1]
                case: compute_cases.ConvCase | compute_cases.LinearCase = compute_cases.LinearCase(
                    rows, shapes[1][1], shapes[1][0], 3, -5, (-128, 127), seed,
                    call.args[4] is not None,
                )  # fmt: skip
            elif call.target is conv2d and call.args[-2] in (POINTWISE, WINDOW):
                (_, h, w, depth), (channels, kh, kw, _) = shapes
                padding = tuple(int(v) for v in call.args[6])
                padding = padding * 2 if len(padding) == 2 else padding  # top, left, bottom, right
                case = compute_cases.ConvCase(
                    1, h, w, depth, channels, 3, -5, (-128, 127), seed,
                    call.args[-2] == WINDOW, (kh, kw), tuple(call.args[5]), padding,
                )  # fmt: skip
            else:
                continue
            shape = dataclasses.replace(case, seed=0)
            if all(shape != dataclasses.replace(c, seed=0) for _, c in found):
                found.append((name, case))
    return found


def macs(case: compute_cases.ConvCase | compute_cases.LinearCase) -> int:
    """The multiply-accumulates of a case."""
    if isinstance(case, compute_cases.LinearCase):
        return case.batch * case.depth * case.features
    return int(np.prod(case.output_shape)) * int(np.prod(case.weight_shape[1:]))


def models_table(args: argparse.Namespace, plugin: Path) -> int:
    """Run the models' shapes where the compiler chooses ours through ours and CMSIS-NN's on
    the core, and print the per-kernel table (benchmarks/README.md)."""
    found = model_cases(args.models.split(","), args.core)
    # the image's order: the convolutions, then the fully connected calls
    found.sort(key=lambda named: isinstance(named[1], compute_cases.LinearCase))
    cases = [c for _, c in found]
    build = args.build_dir / f"{args.core}-models"
    status, outcomes = compute_cases.run([], harness.CORES[args.core], build, Rounding.DOUBLE,
                                         plugin, cases)  # fmt: skip
    ordered = [o.case for o in outcomes] == cases
    if status != 0 or not ordered or any(o.ours_differ or o.wrapper_differ for o in outcomes):
        print(f"kernel_costs: the models' image failed (status {status})")
        return 1
    print("| layer (model) | our function | MACs | CMSIS-NN | MACs/insn | ours | MACs/insn "
          "| ours ÷ CMSIS-NN |\n|---|---|---|---|---|---|---|---|")  # fmt: skip
    for (name, case), o in zip(found, outcomes, strict=True):
        function = "fully_connected_quads_s8"
        if isinstance(case, compute_cases.ConvCase):
            function = "window_conv_s8" if case.window else "pointwise_conv_s8"
        n = macs(case)
        print(f"| {describe(case).strip()} ({name}) | `{function}` | {n:,} | "
              f"{o.wrapper_instructions:,} | {n / o.wrapper_instructions:.2f} | "
              f"{o.ours_instructions:,} | {n / o.ours_instructions:.2f} | "
              f"{o.ours_instructions / o.wrapper_instructions:.3f} |")  # fmt: skip
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="store the fit in plan/")
    parser.add_argument("--build-dir", type=Path, default=REPO / "build" / "kernel-costs")
    parser.add_argument("--core", choices=sorted(CORES), default="m55")
    parser.add_argument(
        "--kernels",
        default="depthwise,pointwise,window,linear",
        help="of depthwise, pointwise, window and linear",
    )
    parser.add_argument(
        "--models",
        help="instead: these models' shapes where the compiler chooses our matrix products "
        "(e.g. ds_cnn,resnet8,mobilenet_v1_025,autoencoder), ours against CMSIS-NN's",
    )
    args = parser.parse_args(argv)
    reason = harness.missing()
    if reason:
        print(f"kernel_costs: skipped: {reason}")
        return 0
    plugin = harness.build_plugin(args.build_dir / "plugin")
    if args.models:
        return models_table(args, plugin)
    core, isa = harness.CORES[args.core], CORES[args.core]
    kernels = args.kernels.split(",")
    model: dict = {
        "measured": f"benchmarks/kernel_costs.py on QEMU {core.machine} ({core.cpu}, {isa}, -O3)"
    }
    for kernel in kernels:
        outcomes = measure(kernel, args, plugin)
        if outcomes is None:
            return 1
        model.update(model_of(kernel, isa, outcomes))
    if args.write:
        models = json.loads(costs.MODEL.read_text())
        models[isa.value] = {**models.get(isa.value, {}), **model}
        costs.MODEL.write_text(json.dumps(models, indent=2) + "\n")
        print(f"wrote {costs.MODEL.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
