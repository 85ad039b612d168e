"""The compile report: a table people read and a JSON document tools read."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from typing import Any

from cortex_m_nn.check.layer_snr import LayerSnr
from cortex_m_nn.check.verify import MAX_LSB, Verification
from cortex_m_nn.core.rewrites import rewrite_for
from cortex_m_nn.lower.records import OpRecord
from cortex_m_nn.pipeline import CompiledProgram
from cortex_m_nn.plan.memory_plan import CONSTANT_KINDS
from cortex_m_nn.serialize.io_spec import IoQuantization
from cortex_m_nn.serialize.program_io import ProgramIo
from cortex_m_nn.serialize.pte import (
    RUNTIME_OVERHEAD_FORMULA,
    constant_bytes,
    load_temp_bytes,
    runtime_overhead,
)
from cortex_m_nn.version import __version__


def memory(compiled: CompiledProgram) -> dict[str, Any]:
    """The memory plan: arena and its lower bound, scratch, constants, runtime overhead."""
    plan = compiled.memory
    return plan.as_dict() | {
        "constants": dict(plan.constants),
        "pte_constant_bytes": constant_bytes(compiled.pte),
        "runtime_overhead_bytes": runtime_overhead(compiled.pte).total,
        "load_temp_bytes": load_temp_bytes(compiled.pte),
        "runtime_overhead_is_estimate": True,
        "runtime_overhead_formula": RUNTIME_OVERHEAD_FORMULA,
    }


def row(record: OpRecord) -> dict[str, Any]:
    """A report row's fields; the refusal's kind shows as its advice (``rewrite``)."""
    fields = asdict(record)
    del fields["refusal"]
    return fields


def as_dict(
    compiled: CompiledProgram,
    verification: Verification | None,
    layers: list[LayerSnr] | None = None,
) -> dict[str, Any]:
    """The report; ``layers`` (from :func:`cortex_m_nn.check.layer_snr.layer_snr`) adds where the
    error enters."""
    records = compiled.records
    macs = sum(r.macs for r in records)
    lowered_macs = sum(r.macs for r in records if r.lowered)
    fallbacks = [r for r in records if not r.lowered]
    return {
        "cortex_m_nn_version": __version__,
        "model": compiled.model.name,
        "target": {
            "name": str(compiled.target),
            "core": compiled.target.core.value,
            "isa": compiled.target.isa.value,
        },
        "calibration": {
            "description": compiled.calibration.description,
            "synthetic": compiled.calibration.synthetic,
            "samples": len(compiled.calibration.samples),
            "skipped_nonfinite": compiled.calibration.skipped,
            "options": compiled.options.as_dict(),
        },
        "notes": compiled.notes,
        "io": io_dict(compiled.io),
        "operators": [
            row(r)
            | {
                "lowered": r.lowered,
                "fp32_macs": 0 if r.lowered else r.macs,
                "rewrite": None if r.lowered else rewrite_for(r.source_op, r.refusal),
                "max_lsb_vs_pt2e": None
                if verification is None
                else verification.per_node.get(r.output_node),
            }
            for r in records
        ],
        "totals": {
            "operators": len(records),
            "lowered": len(records) - len(fallbacks),
            "fallbacks": len(fallbacks),
            "macs": macs,
            "lowered_macs": lowered_macs,
            "lowered_macs_percent": 100.0 * lowered_macs / macs if macs else 100.0,
            "fp32_macs": macs - lowered_macs,
            "weight_bytes": sum(r.weight_bytes for r in records),
            "pte_bytes": len(compiled.pte),
            "arena_bytes": compiled.arena_bytes,
        },
        "pte_operators": sorted(set(compiled.operators)),
        "memory": memory(compiled),
        "fit": None,
        "memory_schedule": None,
        "compile_seconds": compiled.stages.seconds,
        "layers": None if layers is None else [layer_row(layer) for layer in layers],
        "verify": None if verification is None else verify_dict(verification),
    }


def verify_dict(verification: Verification) -> dict[str, Any]:
    return {
        "samples": verification.samples,
        "max_lsb_vs_pt2e": verification.max_lsb,
        "output_lsb_vs_pt2e": verification.output_lsb,
        "max_lsb_allowed": MAX_LSB,
        #: operators allowed more (an approximating kernel's bound): lowered node → LSB
        "max_lsb_allowed_by_operator": dict(verification.allowed),
        "exceeding": dict(verification.exceeding),
        "snr_db_vs_float": verification.snr_db,
        "io_mismatches": verification.io_mismatches,
        "passed": verification.passed,
    }


def precision_lines(plan: dict[str, Any]) -> list[str]:
    """``--precision auto``: the layers with an int16 case, the precision chosen and why."""
    title = (
        f"precision per layer (--precision auto): output SNR vs float {plan['snr_db']:.1f} dB "
        f"(target {plan['min_snr_db']:g}; all int8 {plan['int8_snr_db']:.1f}, all int16 "
        f"{plan['int16_snr_db']:.1f}), {plan['compiles']} compiles measured on calibration "
        "samples their ranges were not fitted to"
    )
    cells = [
        f"{layer['precision']:<9} {layer['gain_db_alone']:>+7.1f}  {layer['why']}"
        for layer in plan["layers"]
    ]
    return _per_layer(title, f"{'precision':<9} {'alone':>8}  why", plan["layers"], cells)


def weight_precision_lines(plan: dict[str, Any]) -> list[str]:
    """``--weights auto``: the layers with an int4 case, the weights chosen and why."""
    title = (
        f"weights per layer (--weights auto): output SNR vs float {plan['snr_db']:.1f} dB, "
        f"{plan['weight_bytes']:,} B of weights (target {plan['min_snr_db']:g}; all int8 "
        f"{plan['int8_snr_db']:.1f} dB {plan['int8_weight_bytes']:,} B, all int4 "
        f"{plan['int4_snr_db']:.1f} dB {plan['int4_weight_bytes']:,} B), {plan['compiles']} "
        "compiles measured on calibration samples their ranges were not fitted to; loss: dB "
        "its int4 weights cost (measured alone back in int8), saves: bytes they save"
    )
    headings = f"{'weights':<7} {'loss':>7} {'saves B':>8}  why"
    cells = [
        f"{layer['precision']:<7} {layer['loss_db_alone']:>+7.1f} {layer['saved_bytes']:>8,}  "
        f"{layer['why']}"
        for layer in plan["layers"]
    ]
    return _per_layer(title, headings, plan["layers"], cells)


def _per_layer(
    title: str, headings: str, layers: list[dict[str, Any]], cells: list[str]
) -> list[str]:
    """A per-layer search's lines: a blank line, ``title``, then a row per layer, its name
    and op followed by its ``cells`` (under ``headings``)."""
    rows = zip(layers, cells, strict=True)
    return [
        "",
        title,
        f"  {'layer':<18} {'op':<22} {headings}",
        *(f"  {layer['name'][:18]:<18} {layer['op'][:22]:<22} {cell}" for layer, cell in rows),
    ]


def _wider(verification: dict[str, Any]) -> str:
    """``; int16 softmax ≤ N``-style note for operators allowed more than 1 LSB."""
    wider = verification.get("max_lsb_allowed_by_operator") or {}
    return "".join(f"; {name} ≤ {lsb}" for name, lsb in sorted(wider.items()))


def io_dict(io: ProgramIo) -> dict[str, Any]:
    """What the program's inputs and outputs hold: dtype, the program's shape and, for int8,
    the quantization the caller applies (``real = scale * (q - zero_point)``)."""

    def entry(spec: IoQuantization | None) -> dict[str, Any]:
        if spec is None:
            return {"dtype": "float32", "layout": "model"}
        return {
            "dtype": "int8",
            "shape": list(spec.shape),
            "model_shape": list(spec.model_shape),
            "layout": spec.layout,
            "scale": spec.scale,
            "zero_point": spec.zero_point,
        }

    return {
        "type": io.type.value,
        "inputs": [entry(spec) for spec in io.inputs],
        "outputs": [entry(spec) for spec in io.outputs],
    }


def io_lines(io: dict[str, Any]) -> list[str]:
    """The human report's lines on the program's inputs and outputs."""
    if io["type"] == "float":
        return ["inputs and outputs: float32 in the model's layout (quantized inside the program)"]
    lines = ["inputs and outputs: int8, quantized by the caller: q = round(x / scale) + zero point"]
    for kind in ("input", "output"):
        for index, spec in enumerate(io[kind + "s"]):
            if spec["dtype"] != "int8":
                lines.append(f"  {kind} {index}: float32 in the model's layout")
                continue
            layout = {"model": "the model's order", "nhwc": "NHWC, channels-last"}.get(
                spec["layout"], spec["layout"]
            )
            model = f"; model {spec['model_shape']}" if spec["layout"] != "model" else ""
            lines.append(
                f"  {kind} {index}: int8 {spec['shape']} ({layout}{model}), scale "
                f"{spec['scale']:.9g}, zero point {spec['zero_point']}"
            )
    return lines


def layer_row(layer: LayerSnr) -> dict[str, Any]:
    """JSON-ready; an infinite SNR (no error) is given as None."""
    finite = None if math.isinf(layer.snr_db) else layer.snr_db
    return {
        "node": layer.name,
        "op": layer.op,
        "module": layer.module,
        "snr_db": finite,
        "drop_db": layer.drop_db,
    }


#: The text report marks this many layers that lose the most SNR.
WORST_LAYERS = 3


def layer_lines(layers: list[dict[str, Any]], samples: int) -> list[str]:
    """The per-layer SNR table, the layers that lose the most marked."""
    drops = sorted((row["drop_db"] or 0.0 for row in layers), reverse=True)
    threshold = max(drops[min(WORST_LAYERS, len(drops)) - 1], 0.5) if drops else math.inf
    lines = [
        "",
        f"where the error enters: SNR vs float of each quantized activation "
        f"({samples} calibration samples); drop = dB lost on the layer's input",
        f"{'#':>3}  {'op':<18} {'module':<34} {'SNR dB':>7} {'drop':>6}",
    ]
    for index, row in enumerate(layers, 1):
        snr = "exact" if row["snr_db"] is None else f"{row['snr_db']:.1f}"
        drop = "" if row["drop_db"] is None else f"{row['drop_db']:+.1f}"
        mark = "  <- most lost" if (row["drop_db"] or 0.0) >= threshold else ""
        lines.append(
            f"{index:>3}  {row['op'][:18]:<18} {(row['module'] or row['node'])[:34]:<34} "
            f"{snr:>7} {drop:>6}{mark}"
        )
    return lines


def to_json(report: dict[str, Any]) -> str:
    return json.dumps(report, indent=2, default=str) + "\n"


def to_text(report: dict[str, Any]) -> str:
    """The human report: one row per operator, then totals."""
    target = report["target"]
    lines = [
        f"cortex-m-nn {report['cortex_m_nn_version']}: {report['model']} → "
        f"{target['name']} ({target['isa']} path)",
        f"calibration: {report['calibration']['description']}; "
        + ", ".join(f"{k} {v}" for k, v in report["calibration"]["options"].items()),
        *(f"note: {note}" for note in report.get("notes", [])),
        *(io_lines(report["io"]) if report.get("io") else []),
        "",
        f"{'#':>3}  {'op':<22} {'became':<30} {'CMSIS-NN / note':<30} {'MACs':>11} "
        f"{'weight B':>9} {'Δ LSB':>5}",
    ]
    for index, row in enumerate(report["operators"], 1):
        became = row["kernel"] if row["lowered"] else "FALLBACK fp32"
        note = row["cmsis_function"] if row["lowered"] else row["fallback_reason"]
        lines.append(
            f"{index:>3}  {row['source_op'][:22]:<22} {became:<30} {str(note)[:30]:<30} "
            f"{row['macs']:>11,} {row['weight_bytes']:>9,} "
            f"{'' if row['max_lsb_vs_pt2e'] is None else row['max_lsb_vs_pt2e']:>5}"
        )
        if not row["lowered"]:
            lines.append(
                f"{'':>5} why: {row['fallback_reason']} [{row['location']}]; "
                f"{row['fp32_macs']:,} MACs left in fp32"
            )
            lines.append(f"{'':>5} rewrite: {row['rewrite']}")
    totals = report["totals"]
    lines += [
        "",
        f"operators: {totals['operators']} ({totals['lowered']} lowered, "
        f"{totals['fallbacks']} fallbacks)",
        f"MACs in cortex_m_nn ops: {totals['lowered_macs']:,} "
        f"({totals['lowered_macs_percent']:.1f} %), left in fp32: {totals['fp32_macs']:,}",
        f"weights and parameters: {totals['weight_bytes']:,} B",
        f".pte: {totals['pte_bytes']:,} B; planned arena (activations + scratch): "
        f"{totals['arena_bytes']:,} B",
    ]
    lines += memory_lines(report["memory"])
    lines += estimate_lines(report["operators"], report["target"]["isa"])
    if report.get("layers"):
        lines += layer_lines(report["layers"], report["calibration"]["samples"])
    if report.get("precision"):
        lines += precision_lines(report["precision"])
    if report.get("weight_precision"):
        lines += weight_precision_lines(report["weight_precision"])
    if report.get("fit") is not None:
        lines += fit_lines(report["fit"], report.get("memory_schedule"))
    if report["verify"] is not None:
        lines.append(verify_line(report["verify"]))
    return "\n".join(lines) + "\n"


def verify_line(verification: dict[str, Any]) -> str:
    """The verification's line of the human report."""
    verdict = "PASS" if verification["passed"] else "FAIL"
    io = verification.get("io_mismatches")
    return (
        f"verify ({verification['samples']} samples): per operator max |Δ| "
        f"{verification['max_lsb_vs_pt2e']} LSB vs PT2E reference "
        f"(≤ {verification['max_lsb_allowed']}{_wider(verification)}); model outputs "
        f"{verification['output_lsb_vs_pt2e']} LSB; SNR "
        f"{verification['snr_db_vs_float']:.1f} dB vs float"
        + (f"; int8 I/O program ≠ float program on {io} samples" if io else "")
        + f": {verdict}"
    )


def memory_lines(memory: dict[str, Any]) -> list[str]:
    """The memory block of the human report."""
    peak = memory["peak"]
    constants = memory["constants"]
    kinds = " · ".join(f"{k.replace('_', ' ')} {constants[k]:,}" for k in CONSTANT_KINDS)
    where = f"kernel call {peak['index'] + 1} ({peak['operator']})" if peak["operator"] else "—"
    return [
        "",
        "memory, planned at compile time (no allocation at run time):",
        f"  arena (RAM)          {memory['arena_bytes']:>10,} B  activations, I/O and scratch "
        f"in one buffer (planner: {memory['planner']})",
        f"  layer-by-layer bound {memory['lower_bound_bytes']:>10,} B  plan / bound = "
        f"{memory['arena_over_lower_bound']:.2f}; peak at {where}: "
        f"{peak['activation_bytes']:,} B tensors + {peak['scratch_bytes']:,} B scratch",
        f"  largest scratch      {memory['largest_scratch_bytes']:>10,} B  "
        f"{memory['scratch_buffers']} CMSIS-NN scratch buffers sized for the target ISA, "
        "shared in the arena",
        *state_lines(memory),
        *overlap_lines(memory),
        *path_lines(memory),
        *stage_lines(memory),
        f"  constants (.pte)     {constants['total']:>10,} B  {kinds}",
        f"  runtime overhead   ≈ {memory['runtime_overhead_bytes']:>10,} B  ExecuTorch method "
        f"allocator (estimate), and {memory['load_temp_bytes']:,} B of temporary allocator "
        "while loading",
    ]


def overlap_lines(memory: dict[str, Any]) -> list[str]:
    """The small schedule's line: the outputs that take their consumed inputs' bytes."""
    overlaps = memory.get("overlaps", [])
    if not overlaps:
        return []
    return [
        f"  overlaps             {len(overlaps):>10} ×  outputs over the consumed part of their "
        "inputs (--memory small; each at least its kernel's lead below the input): "
        + ", ".join(f"{o['output']} over {o['input']} ({o['lead']:,} B lead)" for o in overlaps[:3])
        + (f", +{len(overlaps) - 3}" if len(overlaps) > 3 else "")
    ]


#: Why a kernel path other than the wrapper's was chosen, by its function.
OURS = (
    "ours (kernels/compute), fewer instructions than CMSIS-NN's on these shapes by the "
    "measured cost model (plan.costs)"
)
PATH_REASONS = {
    "arm_convolve_1x1_s8": "row by row, so each output may take its input's bytes",
    "depthwise_conv_lanes_s8": OURS,
    "pointwise_conv_s8": OURS,
    "window_conv_s8": OURS,
    "fully_connected_quads_s8": OURS,
}
#: ISA → the MACs its widest multiply-accumulate instruction does: MVE's VMLADAVA.S8 (16 int8
#: pairs), DSP's SMLAD (two int16 pairs), a scalar MLA
PEAK_MACS = {"mve": ("VMLADAVA", 16), "dsp": ("SMLAD", 2), "scalar": ("MLA", 1)}


def path_lines(memory: dict[str, Any]) -> list[str]:
    """The calls given another function than the wrapper's choice (``plan.paths``)."""
    return [
        f"  kernel paths         {count:>10} ×  {function} instead of the wrapper's choice: "
        + PATH_REASONS.get(function, "")
        for function, count in memory.get("paths", {}).items()
    ]


def estimate_lines(operators: list[dict[str, Any]], isa: str) -> list[str]:
    """What the cost model expects of the calls given our kernels, summed, then per call with
    its MACs per instruction against the ISA's peak."""
    rows = [r for r in operators if r.get("expected_instructions")]
    if not rows:
        return []
    estimates = [r["expected_instructions"] for r in rows]
    ours, theirs = (sum(e[k] for e in estimates) for k in ("ours", "cmsis_nn"))
    instruction, peak = PEAK_MACS[isa]
    lines = [
        f"  expected             {ours:>10,} instructions in our kernels on those calls, "
        f"against {theirs:,} in CMSIS-NN's (plan.costs, measured under QEMU); MACs per "
        f"instruction, ours and CMSIS-NN's, where this ISA's peak is {peak} (one {instruction}):"
    ]
    for r, e in zip(rows, estimates, strict=True):
        rates = [r["macs"] / max(e[k], 1) for k in ("ours", "cmsis_nn")]
        lines.append(f"    {r['output_node']:<22} {rates[0]:>5.2f}  {rates[1]:>5.2f}")
    return lines


def stage_lines(memory: dict[str, Any]) -> list[str]:
    """The small schedule's patch-based stage (``plan.patch``), when the program runs one."""
    stage = memory.get("stage")
    if not stage:
        return []
    return [
        f"  stage in strips      {stage['calls']:>10} ×  the first calls ({stage['first']} … "
        f"{stage['last']}, output {'x'.join(map(str, stage['exit_shape'][1:]))}) run "
        f"{stage['rows_per_call']} row(s) a step, halos copied, not recomputed: one stage call "
        f"of {stage['kernel_calls']:,} steps"
        + "".join(f" ({n:,} run {f})" for f, n in stage.get("step_paths", {}).items())
        + f", {stage['macs_recomputed']:,} MACs "
        f"recomputed; arena and method allocator {stage['ram_bytes']:,} B, without it "
        f"{stage['ram_without_bytes']:,} B (arena {stage['arena_without_bytes']:,} B)"
    ]


def state_lines(memory: dict[str, Any]) -> list[str]:
    """The states' line (SVDF layers' states), when the program keeps any."""
    states = memory.get("state_bytes", 0)
    if not states:
        return []
    count = memory["states"]
    return [
        f"  states (in arena)    {states:>10,} B  {count} SVDF state(s) kept between inferences: "
        "planned for the program's lifetime, never shared, zero at load"
    ]


def fit_lines(fit: dict[str, Any], schedule: dict[str, Any] | None = None) -> list[str]:
    """The fit check's lines of the human report (and the memory schedule it chose)."""
    lines = [f"{'fits' if fit['fits'] else 'does NOT fit'} {fit['where']}:"]
    if schedule is not None:
        tried = "; ".join(
            f"{t['schedule']} {t['arena_bytes']:,} B (bound {t['lower_bound_bytes']:,} B, "
            f"{t['kernel_calls']:,} kernel calls, {t['macs_recomputed']:,} MACs recomputed, "
            f".pte {t['pte_bytes']:,} B)"
            for t in schedule["tried"]
        )
        lines.append(f"  memory schedule {schedule['why']} (tried: {tried})")
    for memory in (fit["flash"], fit["ram"]):
        if memory is None:
            continue
        lines.append(
            f"  {memory['role']:<5} {memory['region']:<24} {memory['needed_bytes']:>10,} B of "
            f"{memory['size_bytes']:>10,} B ({memory['share']:.0%}): {memory['what']}"
        )
    return lines
