"""Int8 accuracy on trained models: our quantizer's configurations against the peer's.

Usage::

    PYTHONPATH=python python benchmarks/accuracy.py [--models M ...] [--configs C ...]
        [--calibration N] [--sizes 16,64,256] [--lowered N] [--seed S] [--seeds N] [--folds K]
        [--draws D] [--threads T] [--jobs J] [--retrain] [--json FILE] [--layers N]

Seven networks of ``accuracy_models.py`` (four written for the benchmark, three as torchvision
defines them) are trained (Adam, fixed seed) on scikit-learn's handwritten digits (1,797 8×8
images), upsampled once, bilinearly, to each network's input size (grey, or repeated into the
three channels of the torchvision-defined networks): by default once per fold of a stratified
4-fold partition, each model tested on the fold it did not train on, so every image is held
back once and the scores pool all 1,797
(``--folds 1``: one split, 497 images held back). The trained weights are cached under
``~/.cache/cortex-m-nn/accuracy/`` (``--retrain`` ignores the cache). Each float model is
quantized by our pipeline (``cortex_m_nn.pipeline.quantize``) once per configuration of
``QuantizationOptions`` and by the peer, ExecuTorch 1.5.1's ``CortexMQuantizer`` (PT2E
prepare, calibrate, convert, the model given as ``channels_last`` as its compiler does),
with the same calibration images (the first N of a seeded permutation of the training set).

Measured on the test images, per model: top-1 accuracy and the output SNR in dB of the logits
against the float model's, 10·log10(Σ float² / Σ (float − quantized)²), of each PT2E-quantized
graph, and of the lowered graphs for cortex-m55: ours (``compile_quantized``, run on the
bit-exact references of the CMSIS-NN operators: what the device computes) and the peer's (its
Cortex-M passes, run on the Python references its ``cortex_m::`` operators ship). Each
difference is against the peer in the same form: PT2E against PT2E, lowered against lowered.
The peer needs ``tosa-tools`` on ``PYTHONPATH``; without it the script says so and shows ours
alone.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import logging
import math
import multiprocessing
import sys
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from accuracy_models import ARCHITECTURES  # noqa: E402

#: Bump when the data pipeline, an architecture or the training changes: cached weights go.
VERSION = "3"
CACHE = Path.home() / ".cache" / "cortex-m-nn" / "accuracy"
TEST_IMAGES = 497
#: K-fold by default: 1,797 held-back predictions instead of 497, so that a difference of one
#: or two images between quantizers is not decided by which images one split holds back
FOLDS = 4
TARGET = "cortex-m55"
BATCH = 32
#: the peak of the one-cycle schedule
LEARNING_RATE = 1e-2
#: Our configurations: name → QuantizationOptions fields (string values name enum members).
#: What a configuration does not name is off: the names say everything the quantizer does,
#: whatever ``QuantizationOptions``' defaults are.
PLAIN: dict[str, Any] = {"equalize": False, "bias_correction": False}
CONFIGS: dict[str, dict[str, Any]] = {
    "minmax": {"ranges": "minmax"},
    "percentile": {"ranges": "percentile"},
    "mse": {"ranges": "mse"},
    "mse+cle": {"ranges": "mse", "equalize": True},
    "mse+bc": {"ranges": "mse", "bias_correction": True},
    "mse+cle+bc": {"ranges": "mse", "equalize": True, "bias_correction": True},
    "minmax+bc": {"ranges": "minmax", "bias_correction": True},
    "percentile+bc": {"ranges": "percentile", "bias_correction": True},
}


# --- data -----------------------------------------------------------------------------------


@dataclass
class Digits:
    """The digits, normalised with the training set's mean and deviation, as [N, 1, 8, 8]."""

    train: torch.Tensor
    train_labels: torch.Tensor
    test: torch.Tensor
    test_labels: torch.Tensor
    #: resized copies: side → (train, test)
    sizes: dict[int, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)

    def at(self, side: int, channels: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
        """(train, test) images at ``side``×``side`` (bilinear, computed once), the grey
        channel repeated ``channels`` times (as a user feeds grey images to an RGB network)."""
        if side not in self.sizes:
            self.sizes[side] = (_resize(self.train, side), _resize(self.test, side))
        train, test = self.sizes[side]
        if channels == 1:
            return train, test
        return train.repeat(1, channels, 1, 1), test.repeat(1, channels, 1, 1)


def _resize(images: torch.Tensor, side: int) -> torch.Tensor:
    if images.shape[-1] == side:
        return images
    return nn.functional.interpolate(images, size=(side, side), mode="bilinear")


def load_digits(seed: int, folds: int = 1, fold: int = 0) -> Digits:
    """scikit-learn's bundled digits, split (stratified, seeded) into train and test: with
    one fold, :data:`TEST_IMAGES` held back; with ``folds`` > 1, fold ``fold`` of a stratified
    ``folds``-way partition held back (every image is held back by exactly one fold)."""
    from sklearn.datasets import load_digits as sklearn_digits
    from sklearn.model_selection import StratifiedKFold, train_test_split

    data = sklearn_digits()
    images = data.images.astype(np.float32)[:, None] / 16.0
    if folds == 1:
        x_train, x_test, y_train, y_test = train_test_split(
            images, data.target, test_size=TEST_IMAGES, random_state=seed, stratify=data.target
        )
    else:
        partition = StratifiedKFold(folds, shuffle=True, random_state=seed)
        kept, held = list(partition.split(images, data.target))[fold]
        x_train, y_train = images[kept], data.target[kept]
        x_test, y_test = images[held], data.target[held]
    mean, std = float(x_train.mean()), float(x_train.std())
    return Digits(
        torch.from_numpy((x_train - mean) / std),
        torch.from_numpy(y_train).long(),
        torch.from_numpy((x_test - mean) / std),
        torch.from_numpy(y_test).long(),
    )


def calibration_images(train: torch.Tensor, count: int, seed: int) -> torch.Tensor:
    """The first ``count`` images of a seeded permutation: smaller sets are prefixes of larger."""
    order = torch.randperm(len(train), generator=torch.Generator().manual_seed(seed + 1))
    return train[order[:count]]


# --- training -------------------------------------------------------------------------------


def train(name: str, digits: Digits, seed: int) -> nn.Module:
    """Train ``name`` with Adam on the training images (seeded batches and weights). The last,
    incomplete batch of each epoch is dropped: a batch of three images at a 1×1 feature map
    (torchvision's MobileNetV2 at 32×32) gives its batch norms statistics that stall
    training."""
    build, side, epochs, channels = ARCHITECTURES[name]
    images, _ = digits.at(side, channels)
    generator = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = build()
    optimizer = torch.optim.Adam(model.parameters(), LEARNING_RATE)
    steps = epochs * (len(images) // BATCH)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, LEARNING_RATE, total_steps=steps)
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(images), generator=generator)
        for start in range(0, len(images) - BATCH + 1, BATCH):
            batch = order[start : start + BATCH]
            loss = nn.functional.cross_entropy(model(images[batch]), digits.train_labels[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
    return model.eval()


def trained(
    name: str, digits: Digits, seed: int, retrain: bool, fold: str = ""
) -> tuple[nn.Module, str]:
    """The trained model from the cache, else trained now (and cached); and which it was.
    ``fold`` (``"-fold2of4"``) names the data split when there are several."""
    path = CACHE / f"{name}-seed{seed}{fold}-v{VERSION}.pt"
    if path.is_file() and not retrain:
        model = ARCHITECTURES[name].build()
        model.load_state_dict(torch.load(path, weights_only=True))
        return model.eval(), f"cached ({path.name})"
    start = time.perf_counter()
    model = train(name, digits, seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), path)
    return model, f"trained in {time.perf_counter() - start:.0f} s"


# --- measuring ------------------------------------------------------------------------------


@dataclass
class Score:
    """Top-1 accuracy (%) and output SNR (dB) of a model's logits against the float model's;
    with the sums they come from, so that scores over several folds or draws pool exactly."""

    accuracy: float
    snr_db: float
    images: int
    correct: int
    #: images whose top-1 class differs from the float model's
    flips: int
    #: Σ float², Σ (float − quantized)²
    signal: float
    noise: float
    #: of the flips: now right where the float model is wrong, now wrong where it is right
    fixed: int = 0
    broken: int = 0
    #: "1" for each image classified right, "0" for each one wrong, in test-image order: two
    #: quantizers' results pair image by image (``paired_table``)
    right: str = ""
    #: "1" for each image whose top-1 class is the float model's, "0" for each changed
    kept: str = ""

    def as_dict(self) -> dict[str, float | None]:
        """JSON-ready: an exact match's infinite SNR is null."""
        return {
            **dataclasses.asdict(self),
            "snr_db": None if math.isinf(self.snr_db) else self.snr_db,
        }


def score(logits: torch.Tensor, labels: torch.Tensor, reference: torch.Tensor) -> Score:
    """Accuracy of ``logits`` and their SNR against the float ``reference`` logits."""
    labels, reference = labels[: len(logits)], reference[: len(logits)]
    right, float_right = logits.argmax(1) == labels, reference.argmax(1) == labels
    correct = int(right.sum())
    flips = int((logits.argmax(1) != reference.argmax(1)).sum())
    signal = float(reference.double().pow(2).sum())
    noise = float((reference.double() - logits.double()).pow(2).sum())
    snr = math.inf if noise == 0 else 10 * math.log10(signal / noise)
    fixed, broken = int((right & ~float_right).sum()), int((~right & float_right).sum())
    kept = _marks(logits.argmax(1) == reference.argmax(1))
    accuracy = 100.0 * correct / len(logits)
    return Score(
        accuracy,
        snr,
        len(logits),
        correct,
        flips,
        signal,
        noise,
        fixed,
        broken,
        _marks(right),
        kept,
    )


def _marks(mask: torch.Tensor) -> str:
    """ "1" for each true element, "0" for each false one, in order."""
    return "".join("1" if m else "0" for m in mask.tolist())


def pool(scores: list[dict[str, Any]]) -> dict[str, Any]:
    """One score from several (folds or calibration draws): accuracy over all their images,
    SNR of all their logits; the first failure if one failed."""
    failed = [s for s in scores if "error" in s]
    if failed:
        return failed[0]
    images = sum(s["images"] for s in scores)
    correct = sum(s["correct"] for s in scores)
    signal, noise = sum(s["signal"] for s in scores), sum(s["noise"] for s in scores)
    snr = None if noise == 0 else 10 * math.log10(signal / noise)
    return {
        "accuracy": 100.0 * correct / images,
        "snr_db": snr,
        "images": images,
        "correct": correct,
        "flips": sum(s["flips"] for s in scores),
        "signal": signal,
        "noise": noise,
        "fixed": sum(s["fixed"] for s in scores),
        "broken": sum(s["broken"] for s in scores),
        "right": "".join(s["right"] for s in scores),  # in fold (or draw) order
        "kept": "".join(s["kept"] for s in scores),
    }


def merge(parts: list[Any]) -> Any:
    """The folds' results as one: scores pooled, times added, anything else the first's."""
    first = parts[0]
    if isinstance(first, dict) and ("accuracy" in first or "error" in first):
        return pool(parts)
    if isinstance(first, dict):
        return {key: merge([part[key] for part in parts]) for key in first}
    if isinstance(first, int | float) and not isinstance(first, bool):
        return sum(parts)
    return first


def run_each(model: Callable[[torch.Tensor], torch.Tensor], images: torch.Tensor) -> torch.Tensor:
    """The logits of each image run alone (exported graphs are specialised to batch 1)."""
    with torch.no_grad():
        return torch.cat([model(image[None]) for image in images])


# --- quantizing -----------------------------------------------------------------------------


def available_configs(names: list[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """(name → QuantizationOptions) for the configurations this cortex_m_nn offers, and
    (name → why not) for the others."""
    from cortex_m_nn.core import options as module

    fields = {f.name: f for f in dataclasses.fields(module.QuantizationOptions)}
    ready, missing = {}, {}
    for name in names:
        values: dict[str, Any] = {}
        for key, value in (PLAIN | CONFIGS[name]).items():
            if key not in fields:
                missing[name] = f"QuantizationOptions.{key}"
                break
            if key == "ranges":
                members = {m.value: m for m in module.RangeMethod}
                if value not in members:
                    missing[name] = f"RangeMethod {value!r}"
                    break
                value = members[value]
            values[key] = value
        else:
            ready[name] = module.QuantizationOptions(**values)
    return ready, missing


def quantize_ours(model: nn.Module, samples: torch.Tensor, options: Any) -> tuple[Any, Any, Any]:
    """(ModelSource, Calibration, (exported, PT2E-quantized graph)) of our pipeline with
    ``options``, calibrated on ``samples``."""
    from cortex_m_nn.frontend.calibration import Calibration
    from cortex_m_nn.frontend.model_source import ModelSource
    from cortex_m_nn.pipeline import quantize

    source = ModelSource(type(model).__name__, model, (samples[:1],))
    calibration = Calibration([(s[None],) for s in samples], "digits", synthetic=False)
    return source, calibration, quantize(source, calibration, progress=False, options=options)


def lowered_runner(model: nn.Module, samples: torch.Tensor, options: Any) -> tuple[Any, Any]:
    """(PT2E-quantized graph, image → logits of our lowered graph on its bit-exact references)."""
    from cortex_m_nn.core.target import Target
    from cortex_m_nn.ops.library import run_references
    from cortex_m_nn.pipeline import compile_quantized

    source, calibration, graphs = quantize_ours(model, samples, options)
    compiled = compile_quantized(source, Target.parse(TARGET), calibration, graphs, options=options)

    def run(image: torch.Tensor) -> torch.Tensor:
        return run_references(compiled.lowered, (image,), compiled.abi.rounding)[0]

    return graphs[1], run


def peer_graphs(model: nn.Module, samples: torch.Tensor) -> tuple[Any, Any]:
    """(exported float graph, the peer's PT2E-quantized graph), ``channels_last`` as its
    compiler gives them: run them on ``image.to(memory_format=torch.channels_last)``."""
    from executorch.backends.cortex_m.quantizer.quantizer import CortexMQuantizer
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    last = torch.channels_last
    module = copy.deepcopy(model).to(memory_format=last)
    example = (samples[:1].to(memory_format=last),)
    graph = torch.export.export(module, example, strict=True).module(check_guards=False)
    float_graph = copy.deepcopy(graph)  # prepare_pt2e changes the graph it is given
    prepared = prepare_pt2e(graph, CortexMQuantizer())
    with torch.no_grad():
        for sample in samples:
            prepared(sample[None].to(memory_format=last))
    return float_graph, convert_pt2e(prepared)


def quantize_peer(model: nn.Module, samples: torch.Tensor) -> Callable[[torch.Tensor], Any]:
    """The peer's PT2E-quantized graph (``channels_last``, as its compiler gives it)."""
    quantized = peer_graphs(model, samples)[1]
    return lambda image: quantized(image.to(memory_format=torch.channels_last))


def lowered_peer(model: nn.Module, samples: torch.Tensor) -> Callable[[torch.Tensor], Any]:
    """The peer's lowered graph for ``TARGET`` (its Cortex-M passes, ``channels_last``) run on
    the peer's own Python references of its ``cortex_m::`` operators: what its device
    computes, by its own account."""
    from peer import lower_with_peer

    calibration = [(s[None],) for s in samples]
    edge = lower_with_peer(model, (samples[:1],), calibration, True, TARGET)
    graph = edge.exported_program().module()
    return lambda image: graph(image.to(memory_format=torch.channels_last))


def peer_available() -> str | None:
    """None if the peer's quantizer imports here, else why not (one line)."""
    try:
        from executorch.backends.cortex_m.quantizer.quantizer import (  # noqa: F401
            CortexMQuantizer,
        )
    except ImportError as error:
        return f"{type(error).__name__}: {error}"
    return None


# --- one model ------------------------------------------------------------------------------


@dataclass
class Run:
    """What the command line chose, and what this environment offers."""

    configs: dict[str, Any]
    calibration: int
    sizes: list[int]
    #: test images of each fold for the lowered graphs (None: all; 0: no lowered graphs)
    lowered: int | None
    seed: int
    peer: bool
    #: calibration sets drawn (seeds seed, seed + 1, …) for the mean PT2E table; 1: none
    draws: int = 1
    #: data splits: 1, the fixed 497-image test set; K > 1, K-fold (every image held back once)
    folds: int = 1
    #: seeds pooled (seed, seed + 1, …): partitions, trained weights, calibration sets
    seeds: int = 1


def attempt(measure: Callable[[], Score]) -> dict[str, Any]:
    """``measure()`` as a dict, or the error (one line) that stopped it: a failure is a result."""
    try:
        return measure().as_dict()
    except Exception as error:  # report the failing model/configuration, keep measuring
        first = str(error).strip().splitlines()
        return {"error": f"{type(error).__name__}: {first[0] if first else ''}"}


def measure_size(
    model: nn.Module, samples: torch.Tensor, test: torch.Tensor, judge: Callable, run: Run
) -> dict[str, dict[str, Any]]:
    """PT2E scores of the peer and of each of our configurations for one calibration set."""
    scores: dict[str, dict[str, Any]] = {}
    if run.peer:
        scores["peer"] = attempt(lambda: judge(run_each(quantize_peer(model, samples), test)))
    for name, options in run.configs.items():
        scores[name] = attempt(
            lambda o=options: judge(run_each(quantize_ours(model, samples, o)[2][1], test))
        )
    return scores


def mean_score(scores: list[dict[str, Any]]) -> dict[str, Any]:
    """One quantizer over calibration draws: mean accuracy, SNR of all the draws' logits (an
    error if one failed), and each draw's scores."""
    pooled = pool(scores)
    if "error" in pooled:
        return pooled
    return {**pooled, "draws": [{k: s[k] for k in ("accuracy", "snr_db")} for s in scores]}


def measure_draws(
    model: nn.Module,
    train_images: torch.Tensor,
    test: torch.Tensor,
    judge: Callable,
    run: Run,
    first: dict[str, dict[str, Any]],
) -> dict[str, dict[str, Any]]:
    """PT2E scores averaged over ``run.draws`` calibration sets of ``run.calibration`` images
    (the first is the run's own set, whose scores ``first`` holds)."""
    per_draw = [first]
    for draw in range(1, run.draws):
        samples = calibration_images(train_images, run.calibration, run.seed + draw)
        per_draw.append(measure_size(model, samples, test, judge, run))
    return {name: mean_score([d[name] for d in per_draw]) for name in first}


def measure_lowered(
    model: nn.Module, samples: torch.Tensor, test: torch.Tensor, judge: Callable, run: Run
) -> dict[str, dict[str, Any]]:
    """Each configuration's lowered graph (bit-exact references) on the first test images."""
    scores: dict[str, dict[str, Any]] = {}
    for name, options in run.configs.items():

        def measure(o: Any = options) -> Score:
            runner = lowered_runner(model, samples, o)[1]
            return judge(run_each(runner, test[: run.lowered]))  # None: all

        scores[name] = attempt(measure)
    return scores


def measure_model(name: str, model: nn.Module, digits: Digits, run: Run) -> dict[str, Any]:
    """Score the trained ``name``'s float, PT2E and lowered forms on the test images."""
    start = time.perf_counter()
    train_images, test = digits.at(ARCHITECTURES[name].side, ARCHITECTURES[name].channels)
    with torch.no_grad():
        reference = model(test)

    def judge(logits: torch.Tensor) -> Score:
        return score(logits, digits.test_labels, reference)

    result: dict[str, Any] = {"float": judge(reference).as_dict(), "pt2e": {}}
    for size in [run.calibration, *[s for s in run.sizes if s != run.calibration]]:
        samples = calibration_images(train_images, size, run.seed)
        result["pt2e"][size] = measure_size(model, samples, test, judge, run)
    if run.draws > 1:
        first = result["pt2e"][run.calibration]
        result["draws"] = measure_draws(model, train_images, test, judge, run, first)
    result["seconds"] = {"pt2e": time.perf_counter() - start}
    if run.lowered != 0:
        samples = calibration_images(train_images, run.calibration, run.seed)
        result["lowered"] = measure_lowered(model, samples, test, judge, run)
        if run.peer:  # the peer's lowered graph on the same images
            result["lowered"]["peer"] = attempt(
                lambda: judge(run_each(lowered_peer(model, samples), test[: run.lowered]))
            )
    result["seconds"]["lowered"] = time.perf_counter() - start - result["seconds"]["pt2e"]
    print(f"{name}: measured, {result['seconds']}", file=sys.stderr, flush=True)
    return result


# --- where the error enters ------------------------------------------------------------------


def _ranges(quantized: Any) -> dict[str, tuple[float, float]]:
    """Producer node name → the int8 range (low, high) its output is quantized to."""
    from cortex_m_nn.core.families import QUANTIZE

    ranges = {}
    for node in quantized.graph.nodes:
        if node.target in QUANTIZE:
            scale, zero, low, high = (float(a) for a in node.args[1:5])
            ranges[node.args[0].name] = ((low - zero) * scale, (high - zero) * scale)
    return ranges


def _module_key(module: str) -> str:
    """``features.3.conv.1 (Conv2d)`` → ``features.3.conv.1``: the row's module path."""
    return module.split(" (")[0]


def layers_table(model: nn.Module, samples: torch.Tensor, test: torch.Tensor, options: Any) -> str:
    """Where the error enters, ours (``options``) against the peer: for each quantized
    activation, in graph order, its SNR against the float graph over ``test`` (cumulative:
    every layer upstream included) and the range it is quantized to. Rows pair by the module
    that computed them (the n-th row of a module with the n-th); a row one side lacks (an
    activation one quantizer fuses and the other does not) is left blank there."""
    from cortex_m_nn.check.layer_snr import layer_snr

    ours_float, ours = quantize_ours(model, samples, options)[2]
    peer_float, peer = peer_graphs(model, samples)
    last = torch.channels_last
    ours_rows = layer_snr(ours_float, ours, [(t[None],) for t in test])
    peer_rows = layer_snr(peer_float, peer, [(t[None].to(memory_format=last),) for t in test])
    ours_ranges, peer_ranges = _ranges(ours), _ranges(peer)
    by_module: dict[str, list[list[Any]]] = {}
    for side, rows in enumerate((peer_rows, ours_rows)):
        counts: dict[str, int] = {}
        for row in rows:
            key = _module_key(row.module)
            index = counts[key] = counts.get(key, -1) + 1
            pairs = by_module.setdefault(key, [])
            if index == len(pairs):
                pairs.append([None, None])
            pairs[index][side] = row

    def cell(row: Any, ranges: dict[str, tuple[float, float]]) -> list[str]:
        if row is None:
            return ["", ""]
        low, high = ranges.get(row.name, (math.nan, math.nan))
        return [f"{row.snr_db:.1f}", f"[{low:.2f}, {high:.2f}]"]

    table = [["module", "op", "peer dB", "range", "ours dB", "range"]]
    for key, pairs in by_module.items():
        for peer_row, ours_row in pairs:
            op = (ours_row or peer_row).op
            table.append([key or "(input)", op, *cell(peer_row, peer_ranges)])
            table[-1] += cell(ours_row, ours_ranges)
    return render(table, headers=1)


# --- tables ---------------------------------------------------------------------------------


def render(rows: list[list[str]], headers: int = 2) -> str:
    """Columns padded to their widest cell: the first left-aligned, the others right; a rule
    under the ``headers`` first rows."""
    widths = [max(len(row[i]) for row in rows if i < len(row)) for i in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [
            cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row)
        ]
        lines.append("  ".join(cells).rstrip())
    lines.insert(headers, "-" * max(len(line) for line in lines))
    return "\n".join(lines)


def cells(scored: dict[str, Any] | None, peer: dict[str, Any] | None) -> list[str]:
    """accuracy, SNR and, against the peer, Δ accuracy points and Δ dB (empty without one)."""
    if not scored:
        return ["", "", "", ""]
    if "error" in scored:
        return ["failed", "", "", ""]
    snr = scored["snr_db"]
    own = [f"{scored['accuracy']:.2f}", "exact" if snr is None else f"{snr:.1f}"]
    if not peer or "error" in peer:
        return [*own, "", ""]
    both = snr is not None and peer["snr_db"] is not None
    return [
        *own,
        f"{scored['accuracy'] - peer['accuracy']:+.2f}",
        f"{snr - peer['snr_db']:+.1f}" if both else "",
    ]


def header(first: str, groups: list[str], peer: bool) -> list[list[str]]:
    """Two header rows: the group names over their accuracy / SNR / Δ columns."""
    top, bottom = [first], [""]
    if peer:
        top += ["peer", ""]
        bottom += ["acc %", "dB"]
    for group in groups:
        top += [group, "", "", ""]
        bottom += ["acc %", "dB", "Δacc", "ΔdB"]
    return [top, bottom]


def mean_row(rows: list[dict[str, Any]], groups: list[str], peer: bool) -> list[str] | None:
    """Mean Δ accuracy and Δ dB per configuration over the models both quantized."""
    if not peer:
        return None
    row = ["mean Δ vs peer"] + ["", ""]
    for group in groups:
        pairs = [
            (r[group], r["peer"])
            for r in rows
            if group in r
            and r[group].get("snr_db") is not None
            and r.get("peer", {}).get("snr_db") is not None
        ]
        if not pairs:
            row += ["", "", "", ""]
            continue
        accuracy = sum(a["accuracy"] - b["accuracy"] for a, b in pairs) / len(pairs)
        snr = sum(a["snr_db"] - b["snr_db"] for a, b in pairs) / len(pairs)
        row += ["", "", f"{accuracy:+.2f}", f"{snr:+.2f}"]
    return row


def float_cell(result: dict[str, Any]) -> str:
    return f"{result['float']['accuracy']:.2f}"


def pt2e_table(results: dict[str, dict], run: Run) -> str:
    """Per model: float accuracy, the peer's PT2E scores, each configuration's and its Δ."""
    groups = list(run.configs)
    rows = header("model", groups, run.peer)
    rows[0].insert(1, "float")
    rows[1].insert(1, "acc %")
    scored = []
    for name, result in results.items():
        at = result["pt2e"][run.calibration]
        peer = at.get("peer")
        row = [name, float_cell(result)] + (cells(peer, None)[:2] if run.peer else [])
        for group in groups:
            row += cells(at.get(group), peer)
        rows.append(row)
        scored.append(at)
    mean = mean_row(scored, groups, run.peer)
    return render(rows + ([[mean[0], "", *mean[1:]]] if mean else []))


def scores_table(per_model: dict[str, dict[str, Any]], run: Run) -> str:
    """Per model: the peer's and each configuration's scores (``per_model``: model → name →
    score), each configuration's against the peer's."""
    groups = list(run.configs)
    rows = header("model", groups, run.peer)
    for name, scores in per_model.items():
        peer = scores.get("peer")
        row = [name] + (cells(peer, None)[:2] if run.peer else [])
        for group in groups:
            row += cells(scores.get(group), peer)
        rows.append(row)
    mean = mean_row(list(per_model.values()), groups, run.peer)
    return render(rows + ([mean] if mean else []))


def lowered_table(results: dict[str, dict], run: Run) -> str:
    """Each configuration's lowered graph against the peer's on the same test images."""
    return scores_table({n: r.get("lowered", {}) for n, r in results.items()}, run)


def _form_scores(result: dict[str, Any], run: Run, form: str) -> dict[str, dict[str, Any]]:
    """One model's scores of the ``form`` graphs (``pt2e`` at the run's calibration size, or
    ``lowered``)."""
    return result[form][run.calibration] if form == "pt2e" else result.get(form, {})


def flips_table(results: dict[str, dict], run: Run, form: str) -> str:
    """Per model: test images whose top-1 class the peer's and each configuration's ``form``
    graph changes from the float model's, and of those, how many it fixes and breaks."""
    names = (["peer"] if run.peer else []) + list(run.configs)
    rows = [["model", "images", *names]]
    for model, result in results.items():
        scores = _form_scores(result, run, form)
        images = next((s["images"] for s in scores.values() if "images" in s), 0)
        row = [model, str(images)]
        for name in names:
            s = scores.get(name, {})
            row.append(f"{s['flips']} (+{s['fixed']} −{s['broken']})" if "flips" in s else "failed")
        rows.append(row)
    return render(rows, headers=1)


def mcnemar(ours: int, theirs: int) -> float:
    """Exact two-sided McNemar p-value of a paired comparison in which ``ours`` images only
    one classifier gets right and ``theirs`` only the other: the chance of a split at least
    this uneven if both were equally accurate (a binomial test of the discordant images)."""
    from scipy.stats import binomtest

    return 1.0 if ours + theirs == 0 else float(binomtest(ours, ours + theirs).pvalue)


def _split(only_ours: int, only_theirs: int) -> str:
    """A paired table's cell: the two counts and McNemar's p."""
    return f"{only_ours} / {only_theirs}, p {mcnemar(only_ours, only_theirs):.2f}"


def paired_table(results: dict[str, dict], run: Run, form: str, field: str = "right") -> str:
    """Per model and over all: each configuration's ``form`` graph against the peer's on the
    same test images: images only ours gets right (``field`` "right"; "kept": keeps the float
    model's top-1 class), only the peer's does, and McNemar's p."""
    rows = [["model", *run.configs]]
    totals = {name: [0, 0] for name in run.configs}
    for model, result in results.items():
        scores = _form_scores(result, run, form)
        theirs = scores.get("peer", {}).get(field)
        row = [model]
        for name in run.configs:
            ours = scores.get(name, {}).get(field)
            if not ours or not theirs or len(ours) != len(theirs):
                row.append("failed")
                continue
            only_ours = sum(a > b for a, b in zip(ours, theirs, strict=True))
            only_theirs = sum(a < b for a, b in zip(ours, theirs, strict=True))
            totals[name][0] += only_ours
            totals[name][1] += only_theirs
            row.append(_split(only_ours, only_theirs))
        rows.append(row)
    rows.append(["all models", *(_split(*counts) for counts in totals.values())])
    return render(rows, headers=1)


def draws_table(results: dict[str, dict], run: Run) -> str:
    """The peer's and each configuration's PT2E scores, mean over the calibration draws."""
    return scores_table({n: r["draws"] for n, r in results.items()}, run)


def sizes_table(results: dict[str, dict], run: Run) -> str:
    """Per model and calibration-set size: the peer's and each configuration's PT2E scores."""
    groups = list(run.configs)
    rows = header("model, calibration images", groups, run.peer)
    per_size: dict[int, list[dict]] = {size: [] for size in run.sizes}
    for name, result in results.items():
        for size in run.sizes:
            at = result["pt2e"][size]
            peer = at.get("peer")
            row = [f"{name}, {size}"] + (cells(peer, None)[:2] if run.peer else [])
            for group in groups:
                row += cells(at.get(group), peer)
            rows.append(row)
            per_size[size].append(at)
    for size, scored in per_size.items():
        mean = mean_row(scored, groups, run.peer)
        if mean:
            rows.append([f"mean Δ vs peer, {size}", *mean[1:]])
    return render(rows)


# --- command line ---------------------------------------------------------------------------


def _sizes(text: str) -> list[int]:
    return [int(s) for s in text.split(",") if s.strip()]


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", choices=list(ARCHITECTURES), default=None)
    parser.add_argument("--configs", nargs="+", choices=list(CONFIGS), default=None)
    parser.add_argument("--calibration", type=int, default=200, help="calibration images")
    parser.add_argument(
        "--sizes", type=_sizes, default=[16, 64, 256], help="sensitivity table sizes, e.g. 16,64"
    )
    parser.add_argument(
        "--lowered",
        type=int,
        default=None,
        help="test images of each fold for the lowered graphs (default all; 0: none)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--seeds",
        type=int,
        default=1,
        help="pool this many seeds (seed, seed+1, …), each with its own partition, trained "
        "weights and calibration images: every image is held back once per seed",
    )
    parser.add_argument(
        "--folds",
        type=int,
        default=FOLDS,
        help="K-fold: every image held back by one of K trained models (1: a fixed 497-image "
        "test set)",
    )
    parser.add_argument(
        "--draws",
        type=int,
        default=1,
        help="also average the PT2E scores over this many calibration sets (seeds seed, seed+1, …)",
    )
    parser.add_argument(
        "--threads", type=int, default=1, help="torch threads (more than 1 is slower on busy cores)"
    )
    parser.add_argument(
        "--jobs", type=int, default=1, help="folds measured at once, in separate processes"
    )
    parser.add_argument("--retrain", action="store_true", help="ignore cached weights")
    parser.add_argument(
        "--layers",
        type=int,
        default=0,
        metavar="N",
        help="instead of the tables: where the error enters, per quantized activation, ours "
        "(the first configuration) against the peer, for each model on fold 1 of the seed, "
        "over its first N test images",
    )
    parser.add_argument("--json", type=Path, help="write every measurement to this file")
    return parser.parse_args(argv)


def setup(args: argparse.Namespace) -> tuple[Run, dict[str, str], str | None]:
    """The run's choices, the configurations this build lacks, and why the peer is missing."""
    configs, missing = available_configs(args.configs or list(CONFIGS))
    missing_peer = peer_available()
    run = Run(
        configs,
        args.calibration,
        args.sizes,
        args.lowered,
        args.seed,
        missing_peer is None,
        max(args.draws, 1),
        max(args.folds, 1),
        max(args.seeds, 1),
    )
    return run, missing, missing_peer


def report(results: dict[str, dict], run: Run) -> str:
    """The tables with their titles."""
    images = next(iter(results.values()))["float"]["images"] if results else 0
    split = (
        f"{run.folds} folds, each image held back by one trained model"
        if run.folds > 1
        else "one split"
    )
    if run.seeds > 1:
        split += f", in each of {run.seeds} seeds' partitions"
    lowered = "all" if run.lowered is None else f"the first {run.lowered} per fold of"
    parts = [
        f"PT2E-quantized graphs, {run.calibration} calibration images, {images} held-back "
        f"test images ({split}; Δ: ours − peer, accuracy points and dB)",
        pt2e_table(results, run),
    ]
    if run.lowered != 0:
        parts += [
            f"\nlowered graphs for {TARGET}, {lowered} the test images: ours on the bit-exact "
            "references of CMSIS-NN's arithmetic, the peer's on its own operators' references",
            lowered_table(results, run),
        ]
    form = "lowered" if run.lowered != 0 else "pt2e"
    parts += [
        f"\ntest images whose top-1 class the {form} graph changes from the float model's "
        "(fewer: closer to the float model); in brackets, of those, now right where the float "
        "model is wrong (+) and now wrong where it is right (−)",
        flips_table(results, run, form),
    ]
    if run.peer:
        parts += [
            f"\nours against the peer, {form} graphs, image by image: test images only ours "
            "classifies right / only the peer's does; p: exact McNemar test, the chance of a "
            "split at least this uneven between two equally accurate quantizers",
            paired_table(results, run, form),
            "\nthe same, for following the float model: test images whose top-1 class only "
            "ours keeps from the float model's / only the peer's keeps; p: exact McNemar test",
            paired_table(results, run, form, "kept"),
        ]
    if run.draws > 1:
        parts += [
            f"\nPT2E-quantized graphs, mean over {run.draws} calibration sets of "
            f"{run.calibration} images (seeds {run.seed}–{run.seed + run.draws - 1})",
            draws_table(results, run),
        ]
    if run.sizes:
        parts += ["\ncalibration-set size sensitivity (PT2E graphs)", sizes_table(results, run)]
    return "\n".join(parts)


def measure_fold(args: argparse.Namespace, run: Run, fold: int) -> dict[str, dict]:
    """Train (or load) each model on fold ``fold`` of seed ``run.seed``'s partition and
    measure it on the images that fold holds back."""
    torch.set_num_threads(args.threads)  # also in a worker process of --jobs
    logging.disable(logging.WARNING)
    warnings.filterwarnings("ignore")
    digits = load_digits(run.seed, run.folds, fold)
    tag = f"-fold{fold + 1}of{run.folds}" if run.folds > 1 else ""
    results = {}
    for name in args.models or list(ARCHITECTURES):
        model, how = trained(name, digits, run.seed, args.retrain, tag)
        print(f"{name}-seed{run.seed}{tag}: {how}", file=sys.stderr, flush=True)
        results[name] = measure_model(name, model, digits, run) | {"weights": how}
    return results


def json_document(
    run: Run,
    missing: dict[str, str],
    missing_peer: str | None,
    results: dict[str, dict],
    seconds: float,
) -> dict[str, Any]:
    """What ``--json`` writes: the run's choices, what this build lacks, every measurement."""
    return {
        "seed": run.seed,
        "seeds": run.seeds,
        "version": VERSION,
        "calibration": run.calibration,
        "sizes": run.sizes,
        "lowered_images_per_fold": run.lowered,
        "draws": run.draws,
        "folds": run.folds,
        "configs": {name: options.as_dict() for name, options in run.configs.items()},
        "unavailable": missing,
        "peer": missing_peer or "ExecuTorch CortexMQuantizer",
        "models": results,
        "seconds": seconds,
    }


def print_layers(args: argparse.Namespace, run: Run) -> int:
    """``--layers N``: each model's per-layer table, ours against the peer (fold 1)."""
    if not run.peer or not run.configs:
        print("--layers compares ours with the peer: both must be available")
        return 1
    digits = load_digits(run.seed, run.folds, 0)
    tag = f"-fold1of{run.folds}" if run.folds > 1 else ""
    name_of, options = next(iter(run.configs.items()))
    for name in args.models or list(ARCHITECTURES):
        model, how = trained(name, digits, run.seed, args.retrain, tag)
        architecture = ARCHITECTURES[name]
        train_images, test = digits.at(architecture.side, architecture.channels)
        samples = calibration_images(train_images, run.calibration, run.seed)
        print(
            f"\n{name} (seed {run.seed}{tag}, {how}): peer against {name_of}, "
            f"{min(args.layers, len(test))} test images"
        )
        print(layers_table(model, samples, test[: args.layers], options))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    start = time.perf_counter()
    torch.set_num_threads(args.threads)
    logging.disable(logging.WARNING)  # the peer logs a line per quantized node
    warnings.filterwarnings("ignore")
    run, missing, missing_peer = setup(args)
    for name, what in missing.items():
        print(f"configuration {name}: not available in this build (no {what})")
    if missing_peer:
        print(f"peer not available ({missing_peer}); showing ours alone")
    if args.layers:
        return print_layers(args, run)
    seeds = range(run.seed, run.seed + run.seeds)
    runs = [dataclasses.replace(run, seed=seed) for seed in seeds for _ in range(run.folds)]
    folds = [fold for _ in seeds for fold in range(run.folds)]
    if args.jobs > 1 and len(folds) > 1:  # one process per fold at a time, each on one thread
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(min(args.jobs, len(folds)), mp_context=context) as executor:
            per_fold = list(executor.map(measure_fold, [args] * len(folds), runs, folds))
    else:
        per_fold = [measure_fold(args, r, fold) for r, fold in zip(runs, folds, strict=True)]
    results = {name: merge([fold[name] for fold in per_fold]) for name in per_fold[0]}
    for name in results:
        results[name]["weights"] = [fold[name]["weights"] for fold in per_fold]
    seconds = time.perf_counter() - start
    print(report(results, run))
    named = f"seeds {seeds[0]}–{seeds[-1]}" if len(seeds) > 1 else f"seed {args.seed}"
    print(f"\n{seconds:.0f} s in all ({named}, weights version {VERSION})")
    if args.json:
        document = json_document(run, missing, missing_peer, results, seconds)
        args.json.write_text(json.dumps(document, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
