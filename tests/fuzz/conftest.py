"""The valid files the fuzz cases corrupt, made once per session: a tiny model (a linear layer
and a ReLU, so that a corruption that still loads compiles in about a second) as a factory
file, as a ``.pt2``, compiled to a ``.pte``, and two calibration files for it (``.pt``, ``.npz``).

``CORTEX_M_NN_FUZZ_REPORT=FILE`` writes how many cases of each kind ended how (JSON).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from tests.fuzz.harness import OUTCOMES, Seeds, run_cli

TINY_FACTORY = """
import torch


def tiny():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
    return model.eval(), (torch.randn(1, 4),)
"""


@pytest.fixture(scope="session")
def seeds(tmp_path_factory: pytest.TempPathFactory) -> Seeds:
    directory = tmp_path_factory.mktemp("fuzz-seeds")
    (directory / "tiny.py").write_text(TINY_FACTORY)
    namespace: dict = {}
    exec(TINY_FACTORY, namespace)
    module, example = namespace["tiny"]()
    torch.export.save(torch.export.export(module, example), directory / "tiny.pt2")
    samples = torch.randn(6, 1, 4, generator=torch.Generator().manual_seed(1))
    torch.save([samples], directory / "calibration.pt")
    np.savez(directory / "calibration.npz", samples.numpy())
    outcome = run_cli([directory / "tiny.pt2", "-o", directory / "tiny.pte", "--verify", "-q"])
    assert outcome.status == 0, outcome.stderr
    read = lambda name: (directory / name).read_bytes()  # noqa: E731
    return Seeds(
        f"{directory / 'tiny.py'}:tiny",
        read("tiny.pt2"),
        read("calibration.pt"),
        read("calibration.npz"),
        read("tiny.pte"),
    )


def pytest_sessionfinish(session: pytest.Session) -> None:
    report = os.environ.get("CORTEX_M_NN_FUZZ_REPORT")
    if report and OUTCOMES:
        counts = {f"{kind} → {outcome}": n for (kind, outcome), n in sorted(OUTCOMES.items())}
        Path(report).write_text(json.dumps(counts, indent=1, ensure_ascii=False) + "\n")
