"""The peer: ExecuTorch 1.5.1's own Cortex-M pipeline (``executorch.backends.cortex_m``).

Benchmarks compare cortex-m-nn against this; product code never imports it.

Benchmark-only dependency: the peer's pass manager imports ``executorch.backends.arm``,
which needs ``pip install tosa-tools==2026.5.0``. (Installing it pins numpy to 2.1.x.)

The flow replicates the peer's own AOT compiler (``backends/arm/scripts/aot_arm_compiler.py``,
``_to_edge_cortex_m``, legacy dim-order layout) and its test harness
(``backends/cortex_m/test/tester.py``: Quantize → Export → ToEdge → RunPasses → ToExecutorch):

1. ``torch.export.export(module, inputs).module()``
2. ``prepare_pt2e(graph, CortexMQuantizer())``, run calibration samples, ``convert_pt2e``
3. ``torch.export.export`` of the quantized graph
4. ``to_edge_transform_and_lower(ep, compile_config=cortex_m_edge_compile_config())``
5. ``CortexMPassManager(edge.exported_program(), target_config=...).transform()``, put back
   as the edge program's ``forward`` (as both their compiler and tester do)
6. ``to_executorch(ExecutorchBackendConfig(extract_delegate_segments=False))``

With ``channels_last=True`` the module and every input (example and calibration) are
converted to ``torch.channels_last`` before step 1, which the peer's compiler always does
and its model tests do for their inputs; with ``False`` the model is given as NCHW.

Run ``python benchmarks/peer.py`` to compile the built-in DS-CNN both ways.
"""

from __future__ import annotations

import collections
import copy
import re
import time
from dataclasses import dataclass
from typing import Any

import torch

PEER_TARGET = "cortex-m55"


def _to_channels_last(x: Any) -> Any:
    if isinstance(x, torch.Tensor) and x.dim() == 4:
        return x.to(memory_format=torch.channels_last)
    return x


def _pte_summary(buffer: bytes) -> dict[str, Any]:
    """Operators, kernel calls and planned arena of a serialized ``.pte``."""
    from executorch.exir._serialize._program import deserialize_pte_binary
    from executorch.exir.schema import KernelCall

    plan = deserialize_pte_binary(buffer).program.execution_plan[0]
    names = [f"{op.name}.{op.overload}" if op.overload else op.name for op in plan.operators]
    calls: collections.Counter[str] = collections.Counter()
    for chain in plan.chains:
        for instruction in chain.instructions:
            if isinstance(instruction.instr_args, KernelCall):
                calls[names[instruction.instr_args.op_index]] += 1
    return {
        "pte_bytes": len(buffer),
        # Buffer 0 is reserved by the memory planner and always 0 bytes.
        "arena_bytes": sum(plan.non_const_buffer_sizes),
        "operators": names,
        "kernel_calls": dict(calls),
        "fp32_convolutions": sum(
            n for name, n in calls.items() if name.startswith("aten::convolution")
        ),
        "cortex_m_operators": sum(n for name, n in calls.items() if name.startswith("cortex_m::")),
        "other_operators": sum(n for name, n in calls.items() if not name.startswith("cortex_m::")),
    }


def _root_cause(error: BaseException) -> str:
    """The innermost exception behind ``error`` (the peer's pass manager wraps them), as one
    line."""
    seen, where = {id(error)}, ""
    while True:
        found = re.search(r"running the '(\w+)' pass", str(error))
        where = found.group(1) + ": " if found else where
        inner = error.__cause__ or error.__context__
        if inner is None or id(inner) in seen:
            break
        seen.add(id(inner))
        error = inner
    message = str(error).strip().splitlines()
    return f"{where}{type(error).__name__}: {message[0] if message else ''}"


@dataclass
class Progress:
    """The peer's step now running (named in the result when it fails)."""

    stage: str = "import"


def lower_with_peer(
    module: torch.nn.Module,
    example_inputs: tuple[torch.Tensor, ...],
    calibration: list[tuple[torch.Tensor, ...]],
    channels_last: bool,
    target: str = PEER_TARGET,
    progress: Progress | None = None,
) -> Any:
    """Steps 1–5: the peer's edge program manager after its Cortex-M passes (raises).

    Its graph holds the peer's ``cortex_m::`` operators, whose Python implementations are the
    peer's own references of what its kernels compute: ``.exported_program().module()`` runs
    them (``benchmarks/accuracy.py`` scores the peer's lowered graph that way).
    """
    progress = progress or Progress()
    progress.stage = "import"
    from executorch.backends.cortex_m.edge_compile_config import cortex_m_edge_compile_config
    from executorch.backends.cortex_m.passes.cortex_m_pass_manager import CortexMPassManager
    from executorch.backends.cortex_m.quantizer.quantizer import CortexMQuantizer
    from executorch.backends.cortex_m.target_config import CortexMTargetConfig
    from executorch.exir import to_edge_transform_and_lower
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    progress.stage = "export"
    module = copy.deepcopy(module).eval()
    inputs = tuple(example_inputs)
    samples = [tuple(s) for s in calibration] or [inputs]
    if channels_last:
        module = module.to(memory_format=torch.channels_last)
        inputs = tuple(_to_channels_last(x) for x in inputs)
        samples = [tuple(_to_channels_last(x) for x in s) for s in samples]
    # torch drops the input-guard submodule when .module() is called from executorch's
    # own files (their compiler and tester); do the same explicitly from here.
    graph = torch.export.export(module, inputs, strict=True).module(check_guards=False)

    progress.stage = "quantize"
    prepared = prepare_pt2e(graph, CortexMQuantizer())
    with torch.no_grad():
        for sample in samples:
            prepared(*sample)
    quantized = convert_pt2e(prepared)

    progress.stage = "to_edge"
    program = torch.export.export(quantized, inputs, strict=True)
    edge = to_edge_transform_and_lower(program, compile_config=cortex_m_edge_compile_config())

    progress.stage = "passes"
    passes = CortexMPassManager(
        edge.exported_program(), target_config=CortexMTargetConfig.from_target_string(target)
    )
    edge._edge_programs["forward"] = passes.transform()
    return edge


def compile_with_peer(
    module: torch.nn.Module,
    example_inputs: tuple[torch.Tensor, ...],
    calibration: list[tuple[torch.Tensor, ...]],
    channels_last: bool,
    target: str = PEER_TARGET,
) -> dict[str, Any]:
    """Compile ``module`` with the peer's 8-bit Cortex-M pipeline and measure the ``.pte``.

    Returns ``compile_seconds`` (export through serialization, calibration included),
    ``pte_bytes``, ``arena_bytes`` (sum of the forward plan's ``non_const_buffer_sizes``),
    ``operators`` (the ``.pte``'s operator table), ``kernel_calls`` (per-operator call
    counts), ``fp32_convolutions`` (``aten::convolution`` calls left, i.e. float fallbacks)
    and ``cortex_m_operators`` (``cortex_m::`` calls). If the peer fails, the dict holds
    ``error``, its innermost ``cause`` (one line) and ``stage`` instead of the measurements;
    it never raises.
    """
    progress = Progress()
    start = time.perf_counter()
    try:
        edge = lower_with_peer(module, example_inputs, calibration, channels_last, target, progress)
        progress.stage = "to_executorch"
        from executorch.exir import ExecutorchBackendConfig

        buffer = edge.to_executorch(
            config=ExecutorchBackendConfig(extract_delegate_segments=False)
        ).buffer
        seconds = time.perf_counter() - start
    except Exception as error:  # the peer failing on a model is a measurement too
        return {
            "error": f"{type(error).__name__}: {error}",
            "cause": _root_cause(error),
            "stage": progress.stage,
            "compile_seconds": time.perf_counter() - start,
        }
    return {"compile_seconds": seconds, "pte": buffer, **_pte_summary(buffer)}


def _main() -> None:
    import json
    import logging

    from cortex_m_nn.frontend.models import BUILTIN_MODELS, DEFAULT_MODEL

    logging.disable(logging.WARNING)  # the peer logs a line per quantized node
    module, example_inputs = BUILTIN_MODELS[DEFAULT_MODEL]()
    generator = torch.Generator().manual_seed(1)
    calibration = [
        tuple(torch.randn(x.shape, generator=generator) for x in example_inputs) for _ in range(8)
    ]
    for channels_last in (False, True):
        result = compile_with_peer(module, example_inputs, calibration, channels_last)
        print(f"{DEFAULT_MODEL} channels_last={channels_last}")
        result.pop("pte", None)
        print(json.dumps(result, indent=2))


if __name__ == "__main__":
    _main()
