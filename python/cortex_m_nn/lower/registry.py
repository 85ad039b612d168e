"""The rule registry: which ATen targets a rule lowers, and what a rule takes and gives.

Rules register themselves with :func:`rule` (and :func:`reads_through`) when their module is
imported; ``cortex_m_nn.lower.rules`` imports them all, and the pipeline imports that. This
module imports no rule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.fx import Node

from cortex_m_nn.core.cmsis_nn import Case
from cortex_m_nn.lower.context import LoweringContext
from cortex_m_nn.lower.graph_values import QValue


@dataclass
class Lowered:
    """What a rule produced: the output value and its report row's numbers."""

    value: QValue
    kernel: str
    cmsis_function: str
    macs: int = 0
    weight_bytes: int = 0
    #: LSB ``verify`` allows against the PT2E reference: None, the standard bound, or an
    #: approximating kernel's, which its rule derives
    allowed_lsb: int | None = None
    #: whether the call runs CMSIS-NN's int4-weight case (its activations give the rest)
    int4_weights: bool = False

    @property
    def case(self) -> Case:
        """The call's dtype case: int4 weights, else its output's activations."""
        if self.int4_weights:
            return Case.S4
        return Case.S16 if self.value.dtype is torch.int16 else Case.S8


@dataclass
class Pattern:
    """``op [→ activation] → quantize``: the float op, its fused activation, the output qparams
    and dtype (int16 only for an op with an int16 case, ``cortex_m_nn.core.precision``)."""

    op: Node
    activation: Node | None
    scale: float
    zero_point: int
    shape: tuple[int, ...]
    dtype: torch.dtype = torch.int8


Rule = Callable[[LoweringContext, Pattern], Lowered]
RULES: dict[object, Rule] = {}
#: target → the activation ``quantize`` nodes a rule for it reads *through*: it uses the value
#: before the op that quantize closes (e.g. batch_matmul takes ``k`` for ``k.transpose(-2, -1)``).
ReadThrough = Callable[[Node], list[Node]]
READS_THROUGH: dict[object, ReadThrough] = {}


#: target → why the quantizer left a call of it in float (None: no reason of its own), for ops
#: a rule lowers only in some forms (an ``nn.LSTM`` CMSIS-NN cannot run stays ``aten.lstm``)
Explain = Callable[[Node], str | None]
WHY_FLOAT: dict[object, Explain] = {}


def explains(*targets: object) -> Callable[[Explain], Explain]:
    """Register why calls of ``targets`` stay in float (the report's and error's reason)."""

    def register(function: Explain) -> Explain:
        for target in targets:
            WHY_FLOAT[target] = function
        return function

    return register


def rule(*targets: object) -> Callable[[Rule], Rule]:
    """Register a lowering rule for ATen targets."""

    def register(function: Rule) -> Rule:
        for target in targets:
            RULES[target] = function
        return function

    return register


def reads_through(*targets: object) -> Callable[[ReadThrough], ReadThrough]:
    """Register which producers a rule reads through; they are lowered only when needed.

    A producer (a ``quantize`` node and the op it closes) is skipped when every use of its
    value is by ops reading through it. Should such an op fall back to float, the producer is
    lowered then, as it would have been in order (see ``passes.walk``).
    """

    def register(function: ReadThrough) -> ReadThrough:
        for target in targets:
            READS_THROUGH[target] = function
        return function

    return register
