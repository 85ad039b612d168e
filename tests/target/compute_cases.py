"""Our compute functions (``kernels/compute``) on the target, a few hundred layer shapes in one
image (``tests/target/compute``): each case's tensors come from a seeded 32-bit generator that
the image and :func:`tensors` both run, the Python reference computes the expected bytes, the
image runs our function and the CMSIS-NN function it stands in for between bench markers.
Shared by ``tests/target/test_compute.py`` (the proof) and ``benchmarks/kernel_costs.py`` (the
cost model's measurements).
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tests.target import harness

from cortex_m_nn.core import compute
from cortex_m_nn.core.abi import Rounding
from cortex_m_nn.core.cmsis_nn import LANES, POINTWISE, QUADS, WINDOW
from cortex_m_nn.core.target import Isa
from cortex_m_nn.ops.conv2d import conv2d
from cortex_m_nn.ops.depthwise_conv2d import depthwise_conv2d
from cortex_m_nn.ops.linear import linear

SOURCE = harness.REPO / "tests" / "target" / "compute"


@dataclass(frozen=True)
class Case:
    """One depthwise_conv_lanes_s8 call: shapes, window, offsets, range, generator seed, and
    the tile of output rows its buffer is sized for."""

    batch: int
    in_h: int
    in_w: int
    channels: int
    stride: tuple[int, int]
    padding: tuple[int, int, int, int]  # top, left, bottom, right
    input_offset: int
    output_offset: int
    activation: tuple[int, int]
    seed: int
    tile: int = 1

    @property
    def out_hw(self) -> tuple[int, int]:
        top, left, bottom, right = self.padding
        out_h = (self.in_h + top + bottom - 3) // self.stride[0] + 1
        out_w = (self.in_w + left + right - 3) // self.stride[1] + 1
        return out_h, out_w

    @property
    def output_shape(self) -> tuple[int, int, int, int]:
        return (self.batch, *self.out_hw, self.channels)

    @property
    def input_shape(self) -> tuple[int, int, int, int]:
        return (self.batch, self.in_h, self.in_w, self.channels)

    def buffer_bytes(self, isa: Isa) -> int:
        return compute.lanes_buffer_bytes(isa, self.output_shape, self.stride, self.tile)


@dataclass(frozen=True)
class ConvCase:
    """One call of our pixel-pair convolutions: ``depth`` input channels into ``channels``,
    offsets, range, generator seed; ``window``: window_conv_s8 with its kernel, stride and
    padding (top, left, bottom, right), else pointwise_conv_s8 (1x1, stride 1)."""

    batch: int
    in_h: int
    in_w: int
    depth: int
    channels: int
    input_offset: int
    output_offset: int
    activation: tuple[int, int]
    seed: int
    window: bool = False
    kernel: tuple[int, int] = (1, 1)
    stride: tuple[int, int] = (1, 1)
    padding: tuple[int, int, int, int] = (0, 0, 0, 0)

    @property
    def out_hw(self) -> tuple[int, int]:
        top, left, bottom, right = self.padding
        out_h = (self.in_h + top + bottom - self.kernel[0]) // self.stride[0] + 1
        out_w = (self.in_w + left + right - self.kernel[1]) // self.stride[1] + 1
        return out_h, out_w

    @property
    def input_shape(self) -> tuple[int, int, int, int]:
        return (self.batch, self.in_h, self.in_w, self.depth)

    @property
    def output_shape(self) -> tuple[int, int, int, int]:
        return (self.batch, *self.out_hw, self.channels)

    @property
    def weight_shape(self) -> tuple[int, int, int, int]:
        return (self.channels, *self.kernel, self.depth)

    def buffer_bytes(self, isa: Isa) -> int:
        if self.window:
            return compute.window_buffer_bytes(isa, self.weight_shape)
        return compute.pointwise_buffer_bytes(isa, self.depth)


@dataclass(frozen=True)
class LinearCase:
    """One fully_connected_quads_s8 call: ``batch`` rows of ``depth`` inputs into ``features``,
    offsets, range, generator seed; per tensor the first channel's multiplier and shift, else
    (``per_channel``, fully_connected_quads_per_channel_s8) each feature's."""

    batch: int
    depth: int
    features: int
    input_offset: int
    output_offset: int
    activation: tuple[int, int]
    seed: int
    per_channel: bool = False

    @property
    def input_shape(self) -> tuple[int, int]:
        return (self.batch, self.depth)

    @property
    def output_shape(self) -> tuple[int, int]:
        return (self.batch, self.features)

    @property
    def weight_shape(self) -> tuple[int, int]:
        return (self.features, self.depth)

    @property
    def channels(self) -> int:
        return self.features

    def buffer_bytes(self, isa: Isa) -> int:
        del isa  # none on any ISA
        return 0


class _Numbers:
    """The image's generator (main.cpp ``Numbers``)."""

    def __init__(self, seed: int) -> None:
        self.state = seed

    def next(self, count: int) -> np.ndarray:
        out = np.empty(count, dtype=np.uint32)
        state = self.state
        for i in range(count):
            state = (state * 1664525 + 1013904223) & 0xFFFFFFFF
            out[i] = state
        self.state = state
        return out


def tensors(case: Case | ConvCase | LinearCase) -> dict[str, torch.Tensor]:
    """The case's input, weight, bias, multipliers and shifts, drawn as the image draws them
    (weights: 9 per channel, or ``depth`` per output channel)."""
    numbers = _Numbers(case.seed)
    pointwise = isinstance(case, (ConvCase, LinearCase))
    c = case.channels
    raw = numbers.next(int(np.prod(case.input_shape)))
    input_ = (raw >> 24).astype(np.uint8).view(np.int8).reshape(case.input_shape)
    count = int(np.prod(case.weight_shape)) if pointwise else 9 * c
    weight = (((numbers.next(count) >> 8) % 255).astype(np.int32) - 127).astype(np.int8)
    drawn = numbers.next(3 * c).reshape(c, 3)
    bias = (drawn[:, 0] >> 16).astype(np.int32) - 32768
    multipliers = (0x40000000 + (drawn[:, 1] >> 2)).astype(np.int64).astype(np.int32)
    shifts = (drawn[:, 2] % 14).astype(np.int32) - 11
    shape = case.weight_shape if pointwise else (1, 3, 3, c)
    return {
        "input": torch.from_numpy(input_.copy()),
        "weight": torch.from_numpy(weight.reshape(shape).copy()),
        "bias": torch.from_numpy(bias),
        "multipliers": torch.from_numpy(multipliers),
        "shifts": torch.from_numpy(shifts),
    }


def expected(case: Case | ConvCase | LinearCase, rounding: Rounding) -> bytes:
    """The Python reference's output bytes for the case."""
    t = tensors(case)
    if isinstance(case, LinearCase):
        numbers = (case.input_offset, case.output_offset)
        channels = (t["multipliers"], t["shifts"], 0, 0)
        if not case.per_channel:
            channels = (None, None, int(t["multipliers"][0]), int(t["shifts"][0]))
        out = linear(
            t["input"], t["weight"], t["bias"], None, *channels[:2], *numbers, *channels[2:],
            *case.activation, QUADS, rounding=rounding,
        )  # fmt: skip
        return out.contiguous().numpy().tobytes()
    weights = (t["input"], t["weight"], t["bias"], t["multipliers"], t["shifts"])
    if isinstance(case, ConvCase):
        numbers = (case.input_offset, case.output_offset, *case.activation)
        need = case.buffer_bytes(Isa.DSP)
        window = (list(case.stride), list(case.padding), [1, 1])
        path = WINDOW if case.window else POINTWISE
        out = conv2d(*weights, *window, *numbers, path, need, rounding=rounding)
        return out.contiguous().numpy().tobytes()
    out = depthwise_conv2d(
        *weights, list(case.stride), list(case.padding), [1, 1], 1, case.input_offset,
        case.output_offset, *case.activation, LANES, case.buffer_bytes(Isa.MVE), rounding=rounding,
    )  # fmt: skip
    return out.contiguous().numpy().tobytes()


def _activation(draw: random.Random) -> tuple[int, int]:
    """A random activation range: two in three reach -128 and 127."""
    low = draw.choice([-128, -128, draw.randint(-128, 0)])
    return low, draw.choice([127, 127, draw.randint(low + 1, 127)])


def random_cases(count: int, seed: int) -> list[Case]:
    """``count`` random calls the lanes kernel computes: images up to 16 x 16, 4 to 64 channels,
    stride 1 or 2 across and 1 to 3 down, pads 0 to 2 on each side, a tile of 0 (no buffer) to
    4 rows, a random activation range, one in ten of two images."""
    draw = random.Random(seed)
    cases: list[Case] = []
    while len(cases) < count:
        padding = tuple(draw.randint(0, 2) for _ in range(4))
        stride = (draw.randint(1, 3), draw.randint(1, 2))
        in_h, in_w = draw.randint(1, 16), draw.randint(1, 16)
        if in_h + padding[0] + padding[2] < 3 or in_w + padding[1] + padding[3] < 3:
            continue
        low, high = _activation(draw)
        case = Case(
            2 if draw.random() < 0.1 else 1, in_h, in_w, 4 * draw.randint(1, 16), stride,
            padding, draw.randint(-127, 128), draw.randint(-128, 127), (low, high),
            draw.getrandbits(32), draw.randint(0, 4),
        )  # fmt: skip
        cases.append(case)
    return cases


def random_pointwise_cases(count: int, seed: int) -> list[ConvCase]:
    """``count`` random calls pointwise_conv_s8 computes: images up to 8 x 8, 1 to 80 input and
    1 to 40 output channels (odd counts, depths with and without a tail of fewer than four), a
    random activation range, one in ten of two images."""
    draw = random.Random(seed)
    cases = []
    for _ in range(count):
        low, high = _activation(draw)
        cases.append(
            ConvCase(
                2 if draw.random() < 0.1 else 1, draw.randint(1, 8), draw.randint(1, 8),
                draw.randint(1, 80), draw.randint(1, 40), draw.randint(-127, 128),
                draw.randint(-128, 127), (low, high), draw.getrandbits(32),
            )
        )  # fmt: skip
    return cases


def random_window_cases(count: int, seed: int, any_depth: bool = False) -> list[ConvCase]:
    """``count`` random calls window_conv_s8 computes: images up to 10 x 10, kernels 1 to 5
    each way, stride 1 to 3, pads 0 to 2 on each side, 4 to 32 input channels (a multiple of
    4; ``any_depth``: 1 to 20, which it computes on MVE), 1 to 24 output channels, a random
    activation range, one in ten of two images."""
    draw = random.Random(seed)
    cases: list[ConvCase] = []
    while len(cases) < count:
        kernel = (draw.randint(1, 5), draw.randint(1, 5))
        padding = tuple(draw.randint(0, 2) for _ in range(4))
        size = (draw.randint(1, 10), draw.randint(1, 10))
        if any(size[i] + padding[i] + padding[i + 2] < kernel[i] for i in (0, 1)):
            continue
        if any(padding[i + 2] not in (padding[i], *range(kernel[i])) for i in (0, 1)):
            continue  # an end that differs from its start pads within the kernel's extent
        low, high = _activation(draw)
        cases.append(
            ConvCase(
                2 if draw.random() < 0.1 else 1, *size,
                draw.randint(1, 20) if any_depth else 4 * draw.randint(1, 8),
                draw.randint(1, 24), draw.randint(-127, 128), draw.randint(-128, 127),
                (low, high), draw.getrandbits(32), True, kernel,
                (draw.randint(1, 3), draw.randint(1, 3)), padding,  # type: ignore[arg-type]
            )
        )  # fmt: skip
    return cases


def random_linear_cases(count: int, seed: int) -> list[LinearCase]:
    """``count`` random calls fully_connected_quads_s8 computes: 1 to 3 rows, 1 to 300 inputs,
    1 to 40 output features, a random activation range, half of them per channel."""
    draw = random.Random(seed)
    cases = []
    for _ in range(count):
        low, high = _activation(draw)
        cases.append(
            LinearCase(
                draw.randint(1, 3), draw.randint(1, 300), draw.randint(1, 40),
                draw.randint(-127, 128), draw.randint(-128, 127), (low, high),
                draw.getrandbits(32), draw.random() < 0.5,
            )
        )  # fmt: skip
    return cases


def _expected_array(name: str, data: bytes) -> str:
    values = ",".join(str(b) for b in np.frombuffer(data, dtype=np.int8))
    # in the region the runner keeps for models: larger than the M55's code memory
    section = '__attribute__((section(".cortex_m_nn_model"), aligned(4)))'
    return f"static const int8_t {name}[] {section} = {{{values}}};"


def _table(
    kind: str, fields: str, cases: list, numbers: Callable[[Any], list[int]], rounding: Rounding
) -> list[str]:
    """cases.h's table of one kind of case: its struct (``fields``, then the seed and the
    expected output), each case's expected bytes and ``numbers``, and the count."""
    lines = [f"struct {kind}Case {{", *[f"  int32_t {name};" for name in fields.split()]]
    lines += ["  uint32_t seed;", "  const int8_t* expected;", "};"]
    rows = []
    for index, case in enumerate(cases):
        lines.append(_expected_array(f"k{kind}Expected{index}", expected(case, rounding)))
        row = ", ".join(map(str, numbers(case)))
        rows.append(f"  {{{row}, {case.seed}u, k{kind}Expected{index}}},")
    lines += [f"static const {kind}Case k{kind}Cases[] = {{", *(rows or ["  {}"]), "};"]
    lines.append(f"constexpr int32_t k{kind}Count = {len(cases)};")
    return lines


def _compute_numbers(case: Case) -> list[int]:
    out_h, out_w = case.out_hw
    numbers = [case.batch, case.in_h, case.in_w, case.channels, *case.stride]
    numbers += [case.padding[0], case.padding[1], out_h, out_w, case.input_offset]
    return [*numbers, case.output_offset, *case.activation, case.tile]


def _conv_numbers(case: ConvCase) -> list[int]:
    numbers = [case.batch, case.in_h, case.in_w, case.depth, case.channels]
    numbers += [case.input_offset, case.output_offset, *case.activation, int(case.window)]
    return [*numbers, *case.kernel, *case.stride, case.padding[0], case.padding[1], *case.out_hw]


def _linear_numbers(case: LinearCase) -> list[int]:
    numbers = [case.batch, case.depth, case.features, case.input_offset]
    return [*numbers, case.output_offset, *case.activation, int(case.per_channel)]


def header(
    cases: list[Case], rounding: Rounding, extra: list[ConvCase | LinearCase] | None = None
) -> str:
    """cases.h: the cases (``extra``: the convolution and fully connected ones) and their
    expected outputs."""
    convs = [c for c in extra or [] if isinstance(c, ConvCase)]
    linears = [c for c in extra or [] if isinstance(c, LinearCase)]
    lines = ["// Generated by tests/target/compute_cases.py. Do not edit.", "#pragma once", ""]
    lines.append("#include <stdint.h>")
    fields = "batch in_h in_w channels stride_h stride_w pad_h pad_w out_h out_w input_offset "
    fields += "output_offset activation_min activation_max tile"
    lines += _table("Compute", fields, cases, _compute_numbers, rounding)
    fields = "batch in_h in_w depth channels input_offset output_offset activation_min "
    fields += "activation_max window kernel_h kernel_w stride_h stride_w pad_h pad_w out_h out_w"
    lines += _table("Conv", fields, convs, _conv_numbers, rounding)
    fields = "batch depth features input_offset output_offset activation_min activation_max "
    lines += _table("Linear", fields + "per_channel", linears, _linear_numbers, rounding)
    both: list[Case | ConvCase | LinearCase] = [*cases, *convs, *linears]
    largest = {
        "kMaxInput": max(int(np.prod(c.input_shape)) for c in both),
        "kMaxWeight": max(
            [9 * c.channels for c in cases]
            + [int(np.prod(c.weight_shape)) for c in [*convs, *linears]]
        ),
        "kMaxChannels": max(c.channels for c in both),
        "kMaxOutput": max(int(np.prod(c.output_shape)) for c in both),
        "kMaxBuffer": max(max(c.buffer_bytes(i) for c in both for i in Isa), 4 * 124 * 9 * 2),
    }
    lines += [f"constexpr int32_t {name} = {value};" for name, value in largest.items()]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Outcome:
    """One case on the target: bytes of ours and of CMSIS-NN's that differ from the reference,
    each call's instructions, and the buffer the C++ sized for the case (a tile's)."""

    case: Case | ConvCase | LinearCase
    ours_differ: int
    wrapper_differ: int
    ours_instructions: int
    wrapper_instructions: int
    buffer_bytes: int


def run(
    cases: list[Case],
    core: harness.Core,
    build_dir: Path,
    rounding: Rounding,
    plugin: Path,
    extra: list[ConvCase | LinearCase] | None = None,
) -> tuple[int, list[Outcome]]:
    """Build the image for ``core`` with ``cases`` (and the convolution and fully connected
    ``extra`` cases after them) and run it with the instruction-count plugin: (exit status,
    one outcome per case reported, in the image's order: depthwise, convolution, linear)."""
    extra = extra or []
    build_dir.mkdir(parents=True, exist_ok=True)
    written = header(cases, rounding, extra)
    target = build_dir / "cases.h"
    if not target.exists() or target.read_text() != written:
        target.write_text(written)
    definitions = [
        f"-DCMSIS_NN_PATH={os.environ['CMSIS_NN_PATH']}",
        f"-DCOMPUTE_CASES_DIR={build_dir}",
        f"-DCORTEX_M_NN_ROUNDING={rounding.value}",
    ]
    harness.cmake_build(SOURCE, build_dir / "build", core, definitions)
    result = harness.run(build_dir / "build" / "compute_cases.elf", core, str(plugin))
    regions = [int(n) for n in re.findall(r"region \d+ = (\d+) insns", result.stderr)]
    kinds: dict[str, list] = {
        "case": cases,
        "conv": [c for c in extra if isinstance(c, ConvCase)],
        "linear": [c for c in extra if isinstance(c, LinearCase)],
    }
    first = {"case": 0, "conv": len(kinds["case"])}
    first["linear"] = first["conv"] + len(kinds["conv"])
    pattern = r"^(case|conv|linear) (\d+) ours (\d+) wrapper (\d+) of \d+ bytes differ, "
    pattern += r"buffer (\d+)"
    outcomes = []
    for kind, i, ours, wrapper, buffer in re.findall(pattern, result.stdout, re.M):
        index = first[kind] + int(i)
        counts = regions[2 * index : 2 * index + 2]
        outcomes.append(Outcome(kinds[kind][int(i)], int(ours), int(wrapper), *counts, int(buffer)))
    return result.returncode, outcomes
