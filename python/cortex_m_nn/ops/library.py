"""The ``cortex_m_nn`` torch.library namespace and the one way an operator is defined in it.

Every operator gets a functional form (used in the lowered graph and run eagerly as the
bit-exact reference) and an ``.out`` form (what ExecuTorch's memory planner and runtime
use). Operators that need CMSIS-NN scratch memory return it as a second tensor, so the
scratch is an ordinary planned buffer shared across operators.

A reference that requantizes takes the CMSIS-NN rounding as its ``rounding`` keyword, CMSIS-NN's
default (double) when not given. The schemas have no such argument (the kernels are built with
one rounding), so a call through ``torch.ops`` computes the default rounding;
:func:`run_references` runs a lowered graph with the rounding given (a program's own:
``cortex_m_nn.Program.run``).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import torch
from torch.utils._pytree import tree_leaves

from cortex_m_nn.core.abi import Rounding

NAMESPACE = "cortex_m_nn"
#: What a call without a rounding computes: CMSIS-NN's default build.
DEFAULT_ROUNDING = Rounding.DOUBLE
LIB = torch.library.Library(NAMESPACE, "DEF")

#: operator name -> its argument list (without the out arguments), for registration checks.
SCHEMAS: dict[str, str] = {}

#: operator name -> its functional form with the rounding first: ``(rounding, *args)``.
FUNCTIONALS: dict[str, Callable[..., Any]] = {}


def define_operator(
    name: str,
    arguments: str,
    fake: Callable[..., Any],
    *,
    scratch: bool = False,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Define ``cortex_m_nn::<name>`` and ``<name>.out``; decorates the reference implementation.

    A reference that requantizes has a keyword-only ``rounding``; the decorated name lets it
    default to CMSIS-NN's default rounding (:data:`DEFAULT_ROUNDING`); product code passes it.

    ``arguments`` is the schema's argument list. With ``scratch=True`` the last argument must
    be ``int scratch_bytes`` and the operator returns ``(Tensor out, Tensor scratch)``; the
    reference returns only the output tensor and the scratch is allocated here.
    """
    _define_schemas(name, arguments, scratch)

    def register(reference: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
        functional_at, out_variant, fake_functional = _variants(
            _with_rounding(reference), fake, scratch
        )

        def functional(*args: Any) -> Any:
            return functional_at(DEFAULT_ROUNDING, *args)

        FUNCTIONALS[name] = functional_at
        LIB.impl(name, functional, "CompositeExplicitAutograd")
        LIB.impl(f"{name}.out", out_variant, "CompositeExplicitAutograd")
        torch.library.register_fake(f"{NAMESPACE}::{name}", fake_functional, lib=LIB)
        return _rounding_optional(reference)

    return register


def _define_schemas(name: str, arguments: str, scratch: bool) -> None:
    """``<name>`` and ``<name>.out``; a scratch operator also returns its scratch tensor."""
    if scratch:
        if not arguments.rstrip().endswith("int scratch_bytes"):
            raise ValueError(f"{name}: scratch operators end with 'int scratch_bytes'")
        LIB.define(f"{name}({arguments}) -> (Tensor out, Tensor scratch)")
        LIB.define(
            f"{name}.out({arguments}, *, Tensor(a!) out, Tensor(b!) scratch)"
            " -> (Tensor(a!), Tensor(b!))"
        )
    else:
        LIB.define(f"{name}({arguments}) -> Tensor")
        LIB.define(f"{name}.out({arguments}, *, Tensor(a!) out) -> Tensor(a!)")
    SCHEMAS[name] = arguments


def _variants(
    compute: Callable[..., torch.Tensor], fake: Callable[..., Any], scratch: bool
) -> tuple[Callable[..., Any], Callable[..., Any], Callable[..., Any]]:
    """(functional taking the rounding first, out variant, fake) of a ``(rounding, *args)``
    reference; a scratch operator's reference leaves the scratch to them."""
    if not scratch:

        def out_variant(*args: Any, out: torch.Tensor) -> torch.Tensor:
            out.copy_(compute(DEFAULT_ROUNDING, *args))
            return out

        return compute, out_variant, fake

    def functional_at(rounding: Rounding, *args: Any) -> tuple[torch.Tensor, torch.Tensor]:
        return compute(rounding, *args[:-1]), torch.empty(args[-1], dtype=torch.int8)

    def scratch_out_variant(
        *args: Any, out: torch.Tensor, scratch: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        out.copy_(compute(DEFAULT_ROUNDING, *args[:-1]))
        return out, scratch

    def fake_functional(*args: Any) -> tuple[torch.Tensor, torch.Tensor]:
        result = fake(*args[:-1])
        return result, result.new_empty((args[-1],), dtype=torch.int8)

    return functional_at, scratch_out_variant, fake_functional


def _with_rounding(reference: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``reference`` as ``(rounding, *args)``; the rounding is dropped where it plays no part."""
    if "rounding" not in inspect.signature(reference).parameters:
        return lambda rounding, *args: reference(*args)
    return lambda rounding, *args: reference(*args, rounding=rounding)


def _rounding_optional(reference: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``reference`` with its ``rounding`` keyword (if it has one) defaulting to CMSIS-NN's."""
    if "rounding" not in inspect.signature(reference).parameters:
        return reference

    @functools.wraps(reference)
    def call(*args: Any, rounding: Rounding = DEFAULT_ROUNDING) -> torch.Tensor:
        return reference(*args, rounding=rounding)

    return call


class ReferenceInterpreter(torch.fx.Interpreter):
    """Runs a graph, calling every ``cortex_m_nn`` operator's reference with ``rounding``."""

    def __init__(self, module: torch.fx.GraphModule, rounding: Rounding) -> None:
        super().__init__(module)
        self.rounding = rounding

    def call_function(self, target: Any, args: tuple, kwargs: dict[str, Any]) -> Any:
        is_ours = isinstance(target, torch._ops.OpOverload) and target.namespace == NAMESPACE
        if is_ours and target._overloadname == "default" and not kwargs:
            return FUNCTIONALS[target._opname](self.rounding, *args)
        return super().call_function(target, args, kwargs)


def run_references(
    module: torch.fx.GraphModule, inputs: tuple[torch.Tensor, ...], rounding: Rounding
) -> list[torch.Tensor]:
    """The outputs (flattened) of a lowered graph run on its references with ``rounding``."""
    with torch.no_grad():
        outputs = ReferenceInterpreter(module, rounding).run(*inputs)
    return [t.detach() for t in tree_leaves(outputs)]


def operator(name: str) -> torch._ops.OpOverload:
    """The functional overload ``torch.ops.cortex_m_nn.<name>.default``."""
    return getattr(getattr(torch.ops, NAMESPACE), name).default
