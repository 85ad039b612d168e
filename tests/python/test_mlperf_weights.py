"""benchmarks/mlperf_weights.py: the MLPerf Tiny trained models as our programs.

With the checkouts (``TFLM_ROOT``, ``MLPERF_TINY_ROOT``), each of the four programs must carry
the ``.tflite``'s integers exactly and compute, on TFLM's input pattern, the outputs TensorFlow
Lite Micro computed (recorded from ``benchmarks/peer_tflm.py`` on emulated Cortex-M55, TFLM of
August 2026 with CMSIS-NN: the length and FNV-1a hash of each output).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import mlperf_weights  # noqa: E402
from tests.target import harness  # noqa: E402

#: TFLM's outputs on its input pattern: (bytes, FNV-1a of them)
TFLM_OUTPUTS = {
    "ds_cnn": (12, 0xF0B57151),
    "resnet8": (10, 0xE5B25901),
    "mobilenet_v1_025": (2, 0x6962079D),
    "autoencoder": (640, 0x1FD3ED06),
}


def fnv1a(data: bytes) -> int:
    h = 2166136261
    for byte in data:
        h = ((h ^ byte) * 16777619) & 0xFFFFFFFF
    return h


def test_tflm_input_is_the_lcg_high_byte() -> None:
    """The pattern of peer_tflm/main.cc's ``fill``, computed here with numpy's wrapping uint32."""
    state = np.uint32(12345)
    expected = []
    with np.errstate(over="ignore"):
        for _ in range(6 * 5):
            state = state * np.uint32(1664525) + np.uint32(1013904223)
            expected.append(int(state >> np.uint32(24)))
    got = mlperf_weights.tflm_input((1, 6, 5)).view(torch.uint8).flatten().tolist()
    assert got == expected


needs_files = pytest.mark.skipif(
    bool(mlperf_weights.status()),
    reason=f"set TFLM_ROOT and MLPERF_TINY_ROOT: {mlperf_weights.status()}",
)


@needs_files
@pytest.mark.parametrize("name", list(TFLM_OUTPUTS))
def test_program_is_the_tflite_model(name: str) -> None:
    ref = mlperf_weights.reference(name)
    run = mlperf_weights.compile_run(name, harness.CORES["m55"], None)
    try:
        lowered = run.compiled.lowered
        weighted = [x for x in ref.layers if x.kind in mlperf_weights.WEIGHTED]
        calls = [
            n
            for n in lowered.graph.nodes
            if str(n.target).split(".")[1:2] in (["conv2d"], ["depthwise_conv2d"], ["linear"])
        ]
        assert len(calls) == len(weighted)
        for call, layer in zip(calls, weighted, strict=True):
            weight = getattr(lowered, call.args[1].target)
            theirs = torch.from_numpy(layer.inputs[1].values.copy())
            if layer.kind == "DEPTHWISE_CONV_2D":
                assert torch.equal(weight, theirs)  # CMSIS-NN's [1, KH, KW, C] both
            else:
                assert torch.equal(weight.reshape(theirs.shape), theirs)
            if call.args[2] is not None:  # MVE's linear has it in its kernel sums
                bias = getattr(lowered, call.args[2].target).to(torch.int64)
                theirs = torch.from_numpy(layer.inputs[2].values.astype(np.int64))
                # the float model holds biases in float32: exact below 2**24 accumulator units;
                # above (VWW's one dead channel, 1,073,741,760) within float32's resolution
                exact = theirs.abs() < 2**24
                assert torch.equal(bias[exact], theirs[exact])
                assert ((bias - theirs).abs() <= theirs.abs() * 2.0**-23).all()
        (out,) = run.expected
        data = out.contiguous().view(torch.uint8).flatten().numpy().tobytes()
        assert (len(data), fnv1a(data)) == TFLM_OUTPUTS[name]
    finally:
        harness.SOURCES.pop(name, None)
