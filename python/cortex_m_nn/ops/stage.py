"""``cortex_m_nn::stage``: a patch-based stage in one call (:mod:`cortex_m_nn.plan.patch`): the
stage's kernel calls, strip by strip, on buffers inside three tensors — the stage's input, its
output and a scratch tensor holding every strip buffer (and each call's CMSIS-NN scratch).

Which calls, on which bytes, is the *program*: an int32 constant written by
:mod:`cortex_m_nn.plan.fold`. Each step is one call of one of :data:`STEP_OPERATORS` — the same
operator, with the same arguments, as the call it replaces in a graph of strips — whose tensors
are *views* (:class:`View`: a tensor's bytes at an offset in one of the three, with a shape) or
the stage's constants (weights, biases, requantization, tables, by index). A step's words::

    step    = operator code (1 + index in STEP_OPERATORS), word count, argument...
    Tensor  = source (0 input, 1 output, 2 scratch), byte offset, rank, size...  (a view)
            | 3 + k, 0, 0                                                     (constant k)
    int     = value
    int[]   = count, value...

followed by its ``out`` view and, for an operator with scratch, its ``scratch`` view. The
strips of one layer differ only in a few words (their views' offsets and rows, the pads at the
image's border, the scratch), so the program stores each layer's step once, as a *template*
with the positions that differ (its *holes*), and each step as its template's index and the
values of the holes (about a fifth of the words)::

    program  = MAGIC, template count T, step count, index of the first step's word,
               offset of template 0 … T-1, template…, step…
    template = word count W, hole count H, hole positions (H words), words (W)
    step     = template index, hole values (H words)

The kernel (``kernels/op_stage.cpp``) checks every step against the three tensors' bytes and
the operator's own checks when the call's arguments are checked, then runs each step's kernel;
ExecuTorch sees one call, so its method allocator holds one argument list instead of one per
strip call. The reference runs each step's reference on the same bytes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from cortex_m_nn.core.abi import Rounding
from cortex_m_nn.core.operators import STAGE_STEP_OPERATORS
from cortex_m_nn.ops.library import FUNCTIONALS, SCHEMAS, define_operator

#: "STG2": the program's first word.
MAGIC = 0x53544732
#: Most words of one step (the kernel fills a step's template in a fixed buffer).
MAX_STEP_WORDS = 64
#: The operators a step may call (the code of operator ``i`` is ``i + 1``).
STEP_OPERATORS = STAGE_STEP_OPERATORS
#: Operators whose call also takes a scratch tensor.
WITH_SCRATCH = frozenset({"conv2d", "depthwise_conv2d"})
INPUT, OUTPUT, SCRATCH, CONSTANTS = 0, 1, 2, 3
#: Most dims of a view (the kernel's views are fixed arrays).
MAX_RANK = 4


@dataclass(frozen=True)
class View:
    """``sizes`` int8 elements at ``offset`` bytes into tensor ``source`` (INPUT, OUTPUT or
    SCRATCH)."""

    source: int
    offset: int
    sizes: tuple[int, ...]

    @property
    def nbytes(self) -> int:
        return math.prod(self.sizes)


@dataclass(frozen=True)
class Constant:
    """The stage's constant ``index``."""

    index: int


Argument = View | Constant | int | list[int]


@dataclass(frozen=True)
class Step:
    """One call: ``operator`` with its schema's arguments, writing ``out`` (and ``scratch``)."""

    operator: str
    arguments: tuple[Argument, ...]
    out: View
    scratch: View | None = None


def kinds(operator: str) -> list[str]:
    """The schema's argument kinds of a step operator (``Tensor``, ``int``, ``int[]``)."""
    return [part.strip().rsplit(" ", 1)[0] for part in SCHEMAS[operator].split(",")]


def _tensor(argument: Argument) -> list[int]:
    if isinstance(argument, Constant):
        return [CONSTANTS + argument.index, 0, 0]
    if not isinstance(argument, View) or not 1 <= len(argument.sizes) <= MAX_RANK:
        raise ValueError(f"a step's tensor must be a view of rank 1-{MAX_RANK} or a constant")
    return [argument.source, argument.offset, len(argument.sizes), *argument.sizes]


def step_words(step: Step) -> list[int]:
    """One step's words: operator code, word count, arguments, out (and scratch)."""
    body: list[int] = []
    for kind, argument in zip(kinds(step.operator), step.arguments, strict=True):
        if kind == "Tensor":
            body += _tensor(argument)
        elif kind == "int":
            body.append(int(argument))  # type: ignore[arg-type]
        else:
            body += [len(argument), *argument]  # type: ignore[arg-type]
    body += _tensor(step.out)
    if step.operator in WITH_SCRATCH:
        body += _tensor(step.scratch)  # type: ignore[arg-type]
    words = [STEP_OPERATORS.index(step.operator) + 1, 2 + len(body), *body]
    if len(words) > MAX_STEP_WORDS:
        raise ValueError(f"a {step.operator} step of {len(words)} words (at most {MAX_STEP_WORDS})")
    return words


def encode(steps: Sequence[Step]) -> list[int]:
    """The program's words. Steps of one layer (one operator, word count and constants) share a
    template: its words, with the positions where they differ (*holes*); each step is its
    template's index and its holes' values."""
    expanded = [step_words(step) for step in steps]
    groups: dict[tuple[int, ...], int] = {}
    members: list[list[list[int]]] = []
    chosen = []
    for step, words in zip(steps, expanded, strict=True):
        constants = tuple(a.index for a in step.arguments if isinstance(a, Constant))
        index = groups.setdefault((words[0], len(words), *constants), len(members))
        if index == len(members):
            members.append([])
        members[index].append(words)
        chosen.append(index)
    templates = []
    for group in members:
        first = group[0]
        templates.append(
            (first, [p for p in range(len(first)) if any(w[p] != first[p] for w in group)])
        )
    body: list[int] = []
    offsets = []
    start = 4 + len(templates)
    for words, holes in templates:
        offsets.append(start + len(body))
        body += [len(words), len(holes), *holes, *words]
    stream = []
    for index, words in zip(chosen, expanded, strict=True):
        stream += [index, *(words[p] for p in templates[index][1])]
    header = [MAGIC, len(templates), len(steps), start + len(body)]
    return header + offsets + body + stream


class _Reader:
    def __init__(self, words: list[int]) -> None:
        self.words, self.at = words, 0

    def take(self, count: int = 1) -> list[int]:
        if count < 0 or self.at + count > len(self.words):
            raise ValueError("stage program ends inside a step")
        taken = self.words[self.at : self.at + count]
        self.at += count
        return taken

    def tensor(self) -> View | Constant:
        source, offset, rank = self.take(3)
        if source >= CONSTANTS:
            return Constant(source - CONSTANTS)
        if source < 0 or offset < 0 or not 1 <= rank <= MAX_RANK:
            raise ValueError(f"stage program has a bad view ({source}, {offset}, rank {rank})")
        return View(source, offset, tuple(self.take(rank)))


def _parse_step(words: list[int]) -> Step:
    """A step from its words (all of them)."""
    reader = _Reader(words)
    code, length = reader.take(2)
    if not 1 <= code <= len(STEP_OPERATORS):
        raise ValueError(f"stage program has an unknown step operator {code}")
    name = STEP_OPERATORS[code - 1]
    arguments: list[Argument] = []
    for kind in kinds(name):
        if kind == "Tensor":
            arguments.append(reader.tensor())
        elif kind == "int":
            arguments.append(reader.take()[0])
        else:
            arguments.append(reader.take(reader.take()[0]))
    out = reader.tensor()
    scratch = reader.tensor() if name in WITH_SCRATCH else None
    if not isinstance(out, View) or out.source == INPUT or isinstance(scratch, Constant):
        raise ValueError("a step writes a constant or the stage's input")
    if reader.at != length or length != len(words):
        raise ValueError(f"stage program's {name} step is {length} words, not {reader.at}")
    return Step(name, tuple(arguments), out, scratch)


def _templates(words: list[int], count: int, stream: int) -> list[tuple[list[int], list[int]]]:
    """The program's templates: (words, holes) each."""
    templates = []
    for index in range(count):
        at = words[4 + index]
        if not 4 + count <= at <= stream - 2:
            raise ValueError(f"stage program's template {index} is not before its steps")
        length, holes = words[at], words[at + 1]
        if not (0 <= holes and 2 <= length <= MAX_STEP_WORDS) or at + 2 + holes + length > stream:
            raise ValueError(f"stage program's template {index} is damaged")
        positions = words[at + 2 : at + 2 + holes]
        if any(not 0 <= p < length for p in positions):
            raise ValueError(f"stage program's template {index} has a hole outside it")
        templates.append((words[at + 2 + holes : at + 2 + holes + length], positions))
    return templates


def decode(words: list[int]) -> list[Step]:
    """The steps of a program; ValueError when it is not one."""
    if len(words) < 4 or words[0] != MAGIC or min(words[1:4]) < 0:
        raise ValueError("not a stage program (magic word or counts)")
    count, steps_count, stream = words[1], words[2], words[3]
    if 4 + count > stream or stream > len(words):
        raise ValueError("stage program's templates do not fit before its steps")
    templates = _templates(words, count, stream)
    reader = _Reader(words)
    reader.at = stream
    steps = []
    for _ in range(steps_count):
        index = reader.take()[0]
        if not 0 <= index < count:
            raise ValueError(f"stage program's step names template {index} of {count}")
        filled, holes = list(templates[index][0]), templates[index][1]
        for position, value in zip(holes, reader.take(len(holes)), strict=True):
            filled[position] = value
        steps.append(_parse_step(filled))
    if reader.at != len(words):
        raise ValueError("stage program has words after its last step")
    return steps


def lead(steps: Sequence[Step]) -> int:
    """How far below the input's first byte the output may start (``plan.overlap``'s lead):
    every output byte a step writes lies below every input byte it or a later step reads.
    Within a step the kernel may write before it reads, so a step's own reads count."""
    found, written = -(2**31), 0
    lowest = [2**31] * (len(steps) + 1)  # the lowest input byte read from step i on
    for index in reversed(range(len(steps))):
        reads = [
            a.offset for a in steps[index].arguments if isinstance(a, View) and a.source == INPUT
        ]
        lowest[index] = min([lowest[index + 1], *reads])
    for index, step in enumerate(steps):
        if step.out.source == OUTPUT:
            written = max(written, step.out.offset + step.out.nbytes)
            found = max(found, written - lowest[index])
    return found


def _fake(
    input: torch.Tensor,
    constants: list[torch.Tensor],
    program: torch.Tensor,
    out_shape: list[int],
) -> torch.Tensor:
    return input.new_empty(list(out_shape), dtype=torch.int8)


@define_operator(
    "stage",
    "Tensor input, Tensor[] constants, Tensor program, int[] out_shape, int scratch_bytes",
    _fake,
    scratch=True,
)
def stage(
    input: torch.Tensor,
    constants: list[torch.Tensor],
    program: torch.Tensor,
    out_shape: list[int],
    *,
    rounding: Rounding,
) -> torch.Tensor:
    """Reference: every step's reference on the bytes of the three tensors, in order."""
    steps = decode([int(w) for w in program.reshape(-1).tolist()])
    if input.dtype is not torch.int8:
        raise ValueError("a stage reads an int8 tensor")
    scratch_bytes = max(
        (v.offset + v.nbytes for s in steps for v in _views(s) if v.source == SCRATCH),
        default=0,
    )
    memory = [
        input.reshape(-1).clone(),
        torch.zeros(math.prod(out_shape), dtype=torch.int8),
        torch.zeros(scratch_bytes, dtype=torch.int8),
    ]

    def read(argument: Argument) -> Any:
        if isinstance(argument, Constant):
            return constants[argument.index]
        if isinstance(argument, View):
            return _region(memory, argument).reshape(argument.sizes).clone()
        return argument

    for step in steps:
        result = FUNCTIONALS[step.operator](rounding, *(read(a) for a in step.arguments))
        result = result[0] if isinstance(result, tuple) else result
        if tuple(result.shape) != step.out.sizes:
            raise ValueError(
                f"{step.operator} step makes {list(result.shape)}, not {step.out.sizes}"
            )
        _region(memory, step.out)[:] = result.reshape(-1)
    return memory[OUTPUT].reshape(out_shape)


def _region(memory: list[torch.Tensor], view: View) -> torch.Tensor:
    """The view's bytes; ValueError when they are not inside its tensor."""
    if view.source > SCRATCH or view.offset + view.nbytes > memory[view.source].numel():
        raise ValueError(f"stage view {view} is not inside its tensor")
    return memory[view.source][view.offset : view.offset + view.nbytes]


def _views(step: Step) -> list[View]:
    found = [a for a in step.arguments if isinstance(a, View)] + [step.out]
    return found + ([step.scratch] if step.scratch is not None else [])
