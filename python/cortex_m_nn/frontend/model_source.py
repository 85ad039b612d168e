"""Load a model: a ``.pt2`` file, ``path/file.py:factory``, or a built-in model's name."""

from __future__ import annotations

import importlib.util
import logging
import re
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import torch

from cortex_m_nn.core.errors import CompileError
from cortex_m_nn.core.options import prepared_for_training
from cortex_m_nn.frontend.model_spec import model_file, require_model_file
from cortex_m_nn.frontend.models import BUILTIN_MODELS, DEFAULT_MODEL


@dataclass
class ModelSource:
    """A model ready to export, with the example inputs that fix its input shapes.

    The example inputs are kept with contiguous, canonical strides: only their shapes and
    dtypes describe the program, and an input from NumPy with a new axis (stride 0) or a
    channels-last or transposed view would otherwise reach the serialised program's tensors.
    """

    name: str
    module: torch.nn.Module
    example_inputs: tuple[torch.Tensor, ...]

    def __post_init__(self) -> None:
        for index, example in enumerate(self.example_inputs):
            _check_example(self.name, index, example)
        self.example_inputs = tuple(canonical(x) for x in self.example_inputs)


def _check_example(name: str, index: int, example: torch.Tensor) -> None:
    """Refuse an example input the compiler cannot make a program input of."""
    if not example.is_floating_point():
        raise CompileError(
            f"{name}: input {index} is {example.dtype}; the compiler quantizes floating-point "
            "inputs to int8: give a float example input (and convert inside forward if the "
            "model needs integers)"
        )
    if example.numel() == 0:
        raise CompileError(
            f"{name}: input {index} has no elements (shape {list(example.shape)}); give an "
            "example input of the shape the device will pass"
        )


def canonical(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` itself if its strides are the contiguous row-major ones (size-1 dims
    included), else a contiguous copy of it."""
    expected, step = [], 1
    for size in reversed(tensor.shape):
        expected.append(step)
        step *= max(size, 1)
    if tuple(reversed(expected)) == tensor.stride() and tensor.storage_offset() == 0:
        return tensor
    return tensor.clone(memory_format=torch.contiguous_format)


def load_model(spec: str | None) -> ModelSource:
    """Resolve ``spec`` (None: the built-in default model)."""
    spec = spec or DEFAULT_MODEL
    if spec in BUILTIN_MODELS:
        return _from_factory(spec, BUILTIN_MODELS[spec])
    require_model_file(spec)
    path = model_file(spec)
    if ".py:" in spec:
        return _from_python(path, spec.rsplit(":", 1)[1])
    if path is not None:
        return _from_pt2(path)
    known = ", ".join(sorted(BUILTIN_MODELS))
    raise CompileError(
        f"cannot load model {spec!r}: give a .pt2 file, path/file.py:factory, or one of: {known}"
    )


def _from_factory(name: str, factory) -> ModelSource:
    try:
        result = factory()
    except Exception as error:  # the user's code: report, don't crash
        first = str(error).splitlines()[0] if str(error) else ""
        raise CompileError(f"factory {name} failed: {type(error).__name__}: {first}") from error
    if (
        not isinstance(result, tuple)
        or len(result) != 2
        or not isinstance(result[0], torch.nn.Module)
    ):
        raise CompileError(f"factory {name} must return (torch.nn.Module, example_inputs tuple)")
    module, example_inputs = result
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    if not all(isinstance(x, torch.Tensor) for x in example_inputs):
        raise CompileError(f"factory {name}: example inputs must be tensors")
    if not prepared_for_training(module):  # (a graph prepared for training converts in eval)
        module = module.eval()
    return ModelSource(name, module, tuple(example_inputs))


def _from_python(path: Path, factory_name: str) -> ModelSource:
    module_name = f"_cortex_m_nn_user_model_{abs(hash(path.resolve()))}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise CompileError(f"cannot import {path} as Python")
    python_module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = python_module
    try:
        spec.loader.exec_module(python_module)
    except Exception as error:  # the user's code: report, don't crash
        raise CompileError(f"importing {path} failed: {type(error).__name__}: {error}") from error
    factory = getattr(python_module, factory_name, None)
    if not callable(factory):
        raise CompileError(f"{path} has no callable {factory_name!r}")
    return _from_factory(f"{path.stem}:{factory_name}", factory)


def _program_names(path: Path) -> list[str]:
    """The programs a PT2 archive holds (``<archive>/models/<name>.json``; torch.export.save
    writes one, ``model``); empty when the file is no readable zip (torch says why)."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (zipfile.BadZipFile, OSError, ValueError):
        return []
    found = (re.fullmatch(r"[^/]+/models/([^/]+)\.json", name) for name in names)
    return sorted(match.group(1) for match in found if match)


def _load_program(path: Path, names: list[str]) -> torch.export.ExportedProgram:
    """The program of ``path``, which holds at most the one of ``names``."""
    if names and names != ["model"]:  # packaged under another name (pt2_archive.package_pt2)
        from torch.export.pt2_archive._package import load_pt2

        return load_pt2(path).exported_programs[names[0]]
    return torch.export.load(path)


def _from_pt2(path: Path) -> ModelSource:
    names = _program_names(path)
    if len(names) > 1:
        raise CompileError(
            f"{path} holds {len(names)} programs ({', '.join(names)}); cortex-m-compile "
            "compiles one: save the one to compile alone, torch.export.save(program, path)"
        )
    export_log = logging.getLogger("torch.export")
    level = export_log.level
    export_log.setLevel(logging.ERROR)  # it logs a traceback before raising: one line is ours
    try:
        program = _load_program(path, names)
    except Exception as error:
        raise CompileError(
            f"{path} is not a readable torch.export archive ({type(error).__name__}); "
            "save it with torch.export.save"
        ) from error
    finally:
        export_log.setLevel(level)
    args, kwargs = program.example_inputs or ((), {})
    if kwargs or not args:
        raise CompileError(f"{path} holds no positional example inputs; re-export with them")
    return ModelSource(path.stem, program.module(), tuple(args))
