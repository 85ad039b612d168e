"""benchmarks/accuracy.py's scoring: what a quantized model fixes and breaks against the float
model, pooling over folds, and the image-by-image comparison of two quantizers."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import accuracy  # noqa: E402


def logits_for(classes: list[int]) -> torch.Tensor:
    """Logits whose top-1 classes are ``classes`` (of 3)."""
    out = torch.zeros(len(classes), 3)
    out[torch.arange(len(classes)), torch.tensor(classes)] = 1.0
    return out


def test_score_counts_fixes_and_breaks_against_the_float_model() -> None:
    labels = torch.tensor([0, 1, 2, 0, 1])
    reference = logits_for([0, 1, 0, 2, 1])  # float: right, right, wrong, wrong, right
    quantized = logits_for([0, 2, 2, 1, 1])  # right, wrong, right, wrong, right
    s = accuracy.score(quantized, labels, reference)
    assert (s.correct, s.flips) == (3, 3)
    assert (s.fixed, s.broken) == (1, 1)  # image 2 fixed, image 1 broken; image 3 wrong both ways
    assert s.right == "10101"
    assert s.kept == "10001"  # top-1 as the float model's on images 0 and 4 only


def test_pool_keeps_the_folds_images_in_order() -> None:
    labels = torch.tensor([0, 1])
    first = accuracy.score(logits_for([0, 0]), labels, logits_for([1, 1])).as_dict()
    second = accuracy.score(logits_for([2, 1]), labels, logits_for([0, 1])).as_dict()
    pooled = accuracy.pool([first, second])
    assert pooled["right"] == "10" + "01"
    # first: image 0 fixed, image 1 broken; second: image 0 broken, image 1 unchanged
    assert (pooled["fixed"], pooled["broken"], pooled["flips"]) == (1, 2, 3)
    assert pooled["correct"] == 2 and pooled["images"] == 4


def test_paired_table_counts_the_images_only_one_quantizer_gets_right() -> None:
    pytest.importorskip("scipy", reason="McNemar's test uses scipy (pip install scikit-learn)")
    run = accuracy.Run({"ours": None}, 200, [], None, 0, True)
    results = {
        "a": {"lowered": {"peer": {"right": "110010"}, "ours": {"right": "101011"}}},
        "b": {"lowered": {"peer": {"right": "0000"}, "ours": {"right": "1111"}}},
    }
    rows = accuracy.paired_table(results, run, "lowered").splitlines()[2:]
    # a: only ours right on images 2 and 5, only the peer on image 1; b: only ours on all 4.
    # p = 2·P(X ≤ 1), X ~ Binomial(3, ½) = 2·(1 + 3)/8 = 1, capped; b: 2·(1/16) = 0.125;
    # all: 6 against 1, 2·(1 + 7)/128 = 0.125
    assert rows[0].split() == ["a", "2", "/", "1,", "p", "1.00"]
    assert rows[1].split() == ["b", "4", "/", "0,", "p", "0.12"]
    assert rows[2].split() == ["all", "models", "6", "/", "1,", "p", "0.12"]


@pytest.mark.parametrize(("ours", "theirs", "p"), [(0, 0, 1.0), (0, 6, 2 / 64), (9, 1, 22 / 1024)])
def test_mcnemar_is_the_exact_two_sided_binomial_of_the_discordant_images(
    ours: int, theirs: int, p: float
) -> None:
    pytest.importorskip("scipy", reason="McNemar's test uses scipy (pip install scikit-learn)")
    assert accuracy.mcnemar(ours, theirs) == pytest.approx(p)


def test_torchvision_definitions_have_torchvision_parameter_counts() -> None:
    """At torchvision's own widths and 1,000 classes, the re-implementations hold exactly the
    parameters torchvision's model table lists for mobilenet_v2, mobilenet_v3_small and
    resnet18: a layer, width rounding or bias out of place would change the count."""
    import torchvision_models as tv

    def count(model: torch.nn.Module) -> int:
        return sum(p.numel() for p in model.parameters())

    assert count(tv.MobileNetV2(1.0, 1000)) == 3_504_872
    assert count(tv.MobileNetV3Small(1000)) == 2_542_856
    assert count(tv.ResNet18(64, 1000)) == 11_689_512


def test_torchvision_definitions_export_their_in_place_operators() -> None:
    """torchvision's activations and residual adds run in place; exported, they stay in-place
    ATen operators, which is what a user's graph holds and what the quantizers must read."""
    import torchvision_models as tv

    def targets(model: torch.nn.Module) -> set[str]:
        graph = torch.export.export(model.eval(), (torch.randn(1, 3, 32, 32),)).graph
        return {str(n.target) for n in graph.nodes if n.op == "call_function"}

    assert "aten.hardtanh_.default" in targets(tv.MobileNetV2())
    assert {"aten.hardswish_.default", "aten.add_.Tensor"} <= targets(tv.MobileNetV3Small())
    assert {"aten.relu_.default", "aten.add_.Tensor"} <= targets(tv.ResNet18())


def test_paired_table_of_kept_classes_counts_images_only_one_quantizer_keeps() -> None:
    pytest.importorskip("scipy", reason="McNemar's test uses scipy (pip install scikit-learn)")
    run = accuracy.Run({"ours": None}, 200, [], None, 0, True)
    peer = {"right": "0000", "kept": "0111"}
    results = {"a": {"lowered": {"peer": peer, "ours": {"right": "1111", "kept": "1101"}}}}
    # kept: only ours on image 0, only the peer on image 2; right: only ours on all 4
    kept = accuracy.paired_table(results, run, "lowered", "kept").splitlines()[2]
    right = accuracy.paired_table(results, run, "lowered").splitlines()[2]
    assert kept.split() == ["a", "1", "/", "1,", "p", "1.00"]
    assert right.split()[:4] == ["a", "4", "/", "0,"]
