"""The prepared-call table ``cortex-m-compile embed`` writes (``cortex_m_nn.embed.prepared``): its
kinds are the C header's, and its entries hold the geometry of each call as worked out by hand
for a model of known shapes. (That every entry equals what the kernel derives, byte for byte,
is checked by the proof pass of every program in ``tests/target``.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cortex_m_nn.core.operators import load_yaml
from cortex_m_nn.embed import prepared
from cortex_m_nn.embed import pte_source as embed

from .test_cli import invoke

ROOT = Path(__file__).resolve().parents[2]
HEADERS = ROOT / "kernels" / "include" / "cortex_m_nn"
MODELS = Path(__file__).with_name("models.py")


def test_kinds_are_the_headers_and_the_yamls() -> None:
    header = (HEADERS / "prepared.h").read_text()
    enum = {n: int(v) for n, v in re.findall(r"(CORTEX_M_NN_PREPARED_\w+) = (\d+)", header)}
    kinds = {op.name: op.prepared for op in load_yaml()[1] if op.prepared}
    named = {prepared.PreparedCall(op, kind, None).kind_name: kind for op, kind in kinds.items()}
    assert enum == {"CORTEX_M_NN_PREPARED_NONE": 0, **named}
    assert set(kinds) == set(prepared.ENTRIES)


@pytest.fixture(scope="module")
def calls(tmp_path_factory: pytest.TempPathFactory) -> list[prepared.PreparedCall]:
    pte = tmp_path_factory.mktemp("prepared") / "mix.pte"
    # the M3: CMSIS-NN's wrapper on every call (on the M33 the depthwise call runs our kernel,
    # which takes no entry), so that each operator's entry is there to check
    result = invoke(f"{MODELS}:prepared_mix", "--target", "cortex-m3", "-o", pte, "-q")
    assert result.status == 0, result.err
    return list(embed.model_facts(pte.read_bytes()).prepared)


def _struct_fields(name: str) -> list[str]:
    text = (HEADERS / "prepared_entries.h").read_text()
    body = re.search(r"typedef struct \{([^}]*)\} cortex_m_nn_" + name + "_prepared;", text)
    assert body, name
    return re.findall(r"(\w+);", body.group(1))


def _dims(n: int, h: int, w: int, c: int) -> dict[str, int]:
    return {"n": n, "h": h, "w": w, "c": c}


def test_entries_hold_each_calls_geometry(calls: list[prepared.PreparedCall]) -> None:
    entries = {call.operator: call.fields for call in calls if call.kind}
    assert sorted(entries) == [
        "add", "avg_pool2d", "conv2d", "depthwise_conv2d", "linear", "softmax"]  # fmt: skip
    for name, fields in entries.items():
        assert list(fields) == _struct_fields(name), name
    conv = entries["conv2d"]
    assert (conv["input"], conv["filter"]) == (_dims(1, 16, 16, 3), _dims(8, 3, 3, 3))
    assert (conv["bias"], conv["output"]) == (_dims(1, 1, 1, 8), _dims(1, 8, 8, 8))
    window = {k: conv["params"][k] for k in ("stride", "padding", "dilation")}
    assert window == {"stride": {"w": 2, "h": 2}, "padding": {"w": 1, "h": 1},
                      "dilation": {"w": 1, "h": 1}}  # fmt: skip
    assert conv["direct"] == 0  # the M3 has no MVE path to avoid
    depthwise = entries["depthwise_conv2d"]
    assert depthwise["params"]["ch_mult"] == 1
    assert (depthwise["filter"], depthwise["output"]) == (_dims(1, 3, 3, 8), _dims(1, 8, 8, 8))
    pool = entries["avg_pool2d"]
    assert (pool["filter"], pool["output"]) == (_dims(1, 2, 2, 1), _dims(1, 4, 4, 8))
    assert pool["params"]["stride"] == {"w": 2, "h": 2}
    linear = entries["linear"]
    assert (linear["input"], linear["filter"]) == (_dims(1, 1, 1, 128), _dims(128, 1, 1, 5))
    assert (linear["bias"], linear["output"]) == (_dims(1, 1, 1, 5), _dims(1, 1, 1, 5))
    assert linear["params"]["filter_offset"] == 0
    assert entries["add"]["size"] == 8 * 8 * 8
    assert 0 <= entries["add"]["left_shift"] <= 30
    assert (entries["softmax"]["rows"], entries["softmax"]["row"]) == (1, 5)
    for name, fields in entries.items():  # ReLU or none: the range reaches int8's top end
        if name == "softmax":
            continue  # no activation range: its output range is fixed
        activation = fields["params"]["activation"] if "params" in fields else {
            "min": fields["activation_min"], "max": fields["activation_max"]}  # fmt: skip
        assert -128 <= activation["min"] <= activation["max"] == 127


def test_table_has_a_row_per_kernel_call(calls: list[prepared.PreparedCall]) -> None:
    text = prepared.c_table(calls, "model")
    rows = re.findall(r"^    \{(CORTEX_M_NN_PREPARED_\w+), (NULL|&model_call_\d+)\}", text, re.M)
    assert [c.kind_name for c in calls] == [kind for kind, _ in rows]
    pairs = zip(calls, rows, strict=True)
    assert all((entry == "NULL") == (call.kind == 0) for call, (_, entry) in pairs)
    assert "const cortex_m_nn_prepared_call model_prepared[] = {" in text
