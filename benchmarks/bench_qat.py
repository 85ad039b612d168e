"""Quantization-aware training against post-training quantization, int8 and int4 weights.

Usage::

    PYTHONPATH=python:. python benchmarks/bench_qat.py [--models M,...] [--seeds N] [--folds K]
        [--epochs E] [--learning-rate LR] [--calibration N] [--json FILE]
    PYTHONPATH=python:. python benchmarks/bench_qat.py --merge A.json B.json

The second prints one table from runs that split the networks between processes.

The networks and data of ``benchmarks/accuracy.py``: scikit-learn's digits (1,797 images),
each network trained in float (Adam, one-cycle, cached) once per fold of a stratified K-fold
partition and per seed, so every image is held back once per seed. From each float model:

* PTQ: our pipeline's post-training quantization (``pipeline.quantize``, the default options:
  MSE ranges, equalization), calibrated on ``--calibration`` training images;
* QAT: ``cortex_m_nn.prepare_qat`` with the same precision (equalized on the same calibration
  images), fine-tuned ``--epochs`` epochs on the training images (Adam, cosine decay from
  ``--learning-rate``), converted with the ranges training left (``quantize.qat.convert``).

* the control, FT+PTQ: the float model trained the same epochs without fake quantization, then
  PTQ: what QAT gains from training longer alone.

All are measured as converted PT2E graphs, the form the lowering takes (the device's
integers equal it within 1 LSB per operator, as ``--verify`` checks), on the held-back images
of the same fold: top-1 accuracy, and output SNR against the float model's logits. Scores pool
over folds and seeds; QAT and PTQ are paired image by image (McNemar's exact test over the
images only one of them gets right).
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from accuracy import (  # noqa: E402
    ARCHITECTURES,
    BATCH,
    calibration_images,
    load_digits,
    mcnemar,
    pool,
    quantize_ours,
    run_each,
    score,
    trained,
)

DEFAULT_MODELS = (
    "small_cnn,mobilenet_v2_035,lcnet_050,resnet_narrow,"
    "tv_mobilenet_v2_035,tv_mobilenet_v3_small,tv_resnet18_025"
)
PRECISIONS = ("int8", "int4")


def _train(
    model: nn.Module, images: torch.Tensor, labels: torch.Tensor, args: Any, seed: int
) -> None:
    """``args.epochs`` epochs of Adam with cosine decay from ``args.learning_rate`` (seeded
    batches; the last, incomplete batch of each epoch dropped)."""
    optimizer = torch.optim.Adam(model.parameters(), args.learning_rate)
    steps = args.epochs * (len(images) // BATCH)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, max(steps, 1))
    generator = torch.Generator().manual_seed(seed + 7)
    for _ in range(args.epochs):
        order = torch.randperm(len(images), generator=generator)
        for start in range(0, len(images) - BATCH + 1, BATCH):
            batch = order[start : start + BATCH]
            loss = nn.functional.cross_entropy(model(images[batch]), labels[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()


def fine_tune(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    calibration: torch.Tensor,
    weights: str,
    args: Any,
    seed: int,
) -> torch.fx.GraphModule:
    """``model`` prepared for QAT at ``weights`` (equalized on the PTQ's ``calibration``
    images, as PTQ equalizes it) and trained ``args.epochs`` epochs."""
    from torchao.quantization.pt2e import move_exported_model_to_eval, move_exported_model_to_train

    import cortex_m_nn

    samples = [(image[None],) for image in calibration]
    prepared = cortex_m_nn.prepare_qat(
        copy.deepcopy(model).eval(), (images[:1],), calibration=samples, weights=weights
    )
    move_exported_model_to_train(prepared)
    _train(prepared, images, labels, args, seed)
    return move_exported_model_to_eval(prepared)


def fine_tune_float(
    model: nn.Module, images: torch.Tensor, labels: torch.Tensor, args: Any, seed: int
) -> nn.Module:
    """The control: ``model`` trained the same epochs in float, without fake quantization
    (batch norms in eval mode, as the QAT graph has them folded)."""
    tuned = copy.deepcopy(model).eval()
    _train(tuned, images, labels, args, seed)
    return tuned.eval()


def measure_fold(name: str, seed: int, fold: int, args: Any) -> dict[str, dict[str, Any]]:
    """Float, PTQ and QAT scores of ``name`` on one fold's held-back images."""
    from cortex_m_nn.core.options import QuantizationOptions, Weights
    from cortex_m_nn.quantize.qat import convert

    digits = load_digits(seed, args.folds, fold)
    tag = f"-fold{fold + 1}of{args.folds}" if args.folds > 1 else ""
    model, _ = trained(name, digits, seed, False, tag)
    architecture = ARCHITECTURES[name]
    train, test = digits.at(architecture.side, architecture.channels)
    with torch.no_grad():
        reference = model(test)
    scores = {"float": score(reference, digits.test_labels, reference).as_dict()}
    samples = calibration_images(train, args.calibration, seed)
    control = fine_tune_float(model, train, digits.train_labels, args, seed)
    for weights in PRECISIONS:
        options = QuantizationOptions(weights=Weights(weights))
        for key, float_model in ((f"ptq_{weights}", model), (f"ft_ptq_{weights}", control)):
            _, _, (_, ptq) = quantize_ours(float_model, samples, options)
            logits = run_each(ptq, test)
            scores[key] = score(logits, digits.test_labels, reference).as_dict()
        start = time.perf_counter()
        tuned = fine_tune(model, train, digits.train_labels, samples, weights, args, seed)
        _, qat = convert(tuned, (test[:1],))
        logits = run_each(qat, test)
        scores[f"qat_{weights}"] = score(logits, digits.test_labels, reference).as_dict()
        scores[f"qat_{weights}"]["seconds"] = time.perf_counter() - start
    return scores


def paired(qat: dict[str, Any], ptq: dict[str, Any]) -> tuple[int, int, float]:
    """Images only QAT gets right, only PTQ does, and McNemar's p."""
    only_qat = sum(a > b for a, b in zip(qat["right"], ptq["right"], strict=True))
    only_ptq = sum(a < b for a, b in zip(qat["right"], ptq["right"], strict=True))
    return only_qat, only_ptq, mcnemar(only_qat, only_ptq)


def table(results: dict[str, dict[str, dict[str, Any]]]) -> str:
    """One row per network: float, then per precision PTQ, QAT (accuracy %, SNR dB), the
    difference in points and the paired test, and the control FT+PTQ with QAT's paired test
    against it (what quantization in the loop adds to training longer)."""
    head = ["model", "float"]
    for weights in PRECISIONS:
        head += [f"PTQ {weights}", f"QAT {weights}", "QAT−PTQ", "only QAT / only PTQ, p"]
        head += [f"FT+PTQ {weights}", "QAT−FT+PTQ, p"]
    rows = [head]
    for name, scores in results.items():
        row = [name, f"{scores['float']['accuracy']:.2f}"]
        for weights in PRECISIONS:
            ptq, qat = scores[f"ptq_{weights}"], scores[f"qat_{weights}"]
            only_qat, only_ptq, p = paired(qat, ptq)
            tuned = scores[f"ft_ptq_{weights}"]
            row += [
                f"{ptq['accuracy']:.2f} ({_db(ptq)})",
                f"{qat['accuracy']:.2f} ({_db(qat)})",
                f"{qat['accuracy'] - ptq['accuracy']:+.2f}",
                f"{only_qat} / {only_ptq}, p {p:.3f}",
                f"{tuned['accuracy']:.2f}",
                f"{qat['accuracy'] - tuned['accuracy']:+.2f}, p {paired(qat, tuned)[2]:.3f}",
            ]
        rows.append(row)
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows)


def _db(entry: dict[str, Any]) -> str:
    snr = entry.get("snr_db")
    return "exact" if snr is None or math.isinf(snr) else f"{snr:.1f} dB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=DEFAULT_MODELS)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--folds", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--learning-rate", type=float, default=5e-4)
    parser.add_argument("--calibration", type=int, default=64)
    parser.add_argument("--json", type=Path)
    parser.add_argument(
        "--merge",
        type=Path,
        nargs="+",
        help="print one table from runs' --json files (networks split)",
    )
    args = parser.parse_args(argv)
    if args.merge:
        return merged(args.merge)
    torch.set_num_threads(1)
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for name in args.models.split(","):
        parts = []
        for seed in range(args.seeds):
            for fold in range(args.folds):
                parts.append(measure_fold(name, seed, fold, args))
                print(f"{name}: seed {seed} fold {fold + 1}/{args.folds} done", flush=True)
        results[name] = {key: pool([p[key] for p in parts]) for key in parts[0]}
        if args.json:  # after each network, so a stopped run keeps what it finished
            settings = vars(args) | {"json": str(args.json), "merge": None}
            args.json.write_text(json.dumps({"args": settings, "results": results}, indent=1))
    print(_heading(vars(args)))
    print(table(results))
    return 0


def _heading(settings: dict[str, Any]) -> str:
    return (
        f"\nseeds {settings['seeds']} × folds {settings['folds']} (every image held back once "
        f"per seed); QAT: {settings['epochs']} epochs, Adam from {settings['learning_rate']}; "
        f"PTQ: {settings['calibration']} calibration images; accuracy % (output SNR vs float)\n"
    )


def merged(files: list[Path]) -> int:
    """One table from runs that split the networks between them; their settings must agree."""
    runs = [json.loads(path.read_text()) for path in files]
    keys = ("seeds", "folds", "epochs", "learning_rate", "calibration")
    settings = {tuple(run["args"][key] for key in keys) for run in runs}
    if len(settings) != 1:
        print(f"error: the runs' settings differ ({sorted(settings)}); merge only one setting's")
        return 2
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for run in runs:
        results |= run["results"]
    print(_heading(runs[0]["args"]))
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
