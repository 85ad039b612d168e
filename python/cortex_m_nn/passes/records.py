"""The report's rows: one :class:`OpRecord` per operator of the model, and where it came from.

The walk fills them in as it lowers; :mod:`cortex_m_nn.passes.hygiene` marks the rows whose
lowered node turned out to be dead code.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from torch.fx import GraphModule, Node

from cortex_m_nn.core.refusals import Refusal
from cortex_m_nn.nn import FLOAT_NAMESPACE

#: The report's kernel for an operator whose lowered node turned out to be dead code.
REMOVED = "removed (no kernel)"
#: Why a float op the quantizer left alone stays float.
NOT_QUANTIZED = "not quantized (no cortex_m_nn lowering for this op)"


@dataclass
class OpRecord:
    """One row of the report: an operator of the model and what it became."""

    name: str
    source_op: str
    kernel: str | None
    cmsis_function: str | None = None
    macs: int = 0
    weight_bytes: int = 0
    fallback_reason: str | None = None
    location: str = ""
    #: name of the lowered graph's node holding this op's int8 output (verification keys)
    output_node: str | None = None
    #: ``path:line`` of the model code the op comes from ("" when the graph has no trace)
    source_line: str = ""
    #: the kind of ``fallback_reason`` (the rewrite advice is looked up by it)
    refusal: Refusal | None = None
    #: how many LSB ``verify`` allows this op against the PT2E reference: None, its standard
    #: bound (``verify.MAX_LSB``), or an approximating kernel's (the int16 softmax's tables)
    allowed_lsb: int | None = None

    @property
    def lowered(self) -> bool:
        return self.fallback_reason is None


@dataclass
class LoweringResult:
    graph_module: GraphModule
    records: list[OpRecord]
    #: lowered node name → (name of the PT2E quantize node it computes, stored channels-last)
    value_sources: dict[str, tuple[str, bool]] = field(default_factory=dict)
    #: lowered dequantize node name → (the PT2E dequantize node it computes, its scale)
    float_sources: dict[str, tuple[str, float]] = field(default_factory=dict)

    @property
    def fallbacks(self) -> list[OpRecord]:
        return [r for r in self.records if not r.lowered]


def op_name(target: object) -> str:
    """``aten.conv2d``; our float operators by their own name (``svdf_memory``)."""
    name = getattr(target, "_name", None) or str(target)
    name = name.replace("::", ".").removesuffix(".default")
    return name.removeprefix(f"{FLOAT_NAMESPACE}.")


def boundary(node: Node, source_op: str, kernel: str, function: str) -> OpRecord:
    """The row of an operator the lowering adds itself (a boundary quantize, a requantize)."""
    return OpRecord(node.name, source_op, kernel, function, output_node=node.name)


def of_source(node: Node, kernel: str | None = None, function: str | None = None) -> OpRecord:
    """The row of an operator of the model, with where in the model's code it comes from."""
    return OpRecord(
        node.name,
        op_name(node.target),
        kernel,
        function,
        location=source_location(node),
        source_line=source_line(node),
    )


_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)\n\s*(.*)')


def _model_frame(node: Node) -> tuple[str, str, str] | None:
    """(file, line, code) of the innermost frame of the model's own code in the trace."""
    frames = _FRAME.findall(node.meta.get("stack_trace") or "")
    user = [f for f in frames if "/torch/" not in f[0]] or frames
    if not user:
        return None
    file, line, _, code = user[-1]
    return file, line, code.strip()


def module_of(node: Node) -> str:
    """``norm (LayerNorm)``: the innermost module the op was called in."""
    module_stack = node.meta.get("nn_module_stack") or {}
    if not module_stack:
        return ""
    path, kind = list(module_stack.values())[-1]
    return f"{path or 'model'} ({kind.rsplit('.', 1)[-1]})"


def source_line(node: Node) -> str:
    """``path/to/model.py:51``, the path relative to the working directory when inside it."""
    frame = _model_frame(node)
    if frame is None:
        return ""
    file, line, _ = frame
    path = Path(file)
    if path.is_absolute():
        try:
            file = os.path.relpath(path) if path.is_relative_to(Path.cwd()) else file
        except (OSError, ValueError):
            pass
    return f"{file}:{line}"


def source_location(node: Node) -> str:
    """Where the op comes from: the module path and the innermost model frame."""
    parts = [module_of(node)] if module_of(node) else []
    frame = _model_frame(node)
    if frame is not None:
        file, line, code = frame
        parts.append(f"{file.rsplit('/', 1)[-1]}:{line}: {code}")
    return ", ".join(parts)
