"""The ``cortex_m_nn`` torch.library namespace and the one way an operator is defined in it.

Every operator gets a functional form (used in the lowered graph and run eagerly as the
bit-exact reference) and an ``.out`` form (what ExecuTorch's memory planner and runtime
use). Operators that need CMSIS-NN scratch memory return it as a second tensor, so the
scratch is an ordinary planned buffer shared across operators.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

NAMESPACE = "cortex_m_nn"
LIB = torch.library.Library(NAMESPACE, "DEF")

#: operator name -> its argument list (without the out arguments), for registration checks.
SCHEMAS: dict[str, str] = {}


def define_operator(
    name: str,
    arguments: str,
    fake: Callable[..., Any],
    *,
    scratch: bool = False,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Define ``cortex_m_nn::<name>`` and ``<name>.out``; decorates the reference implementation.

    ``arguments`` is the schema's argument list. With ``scratch=True`` the last argument must
    be ``int scratch_bytes`` and the operator returns ``(Tensor out, Tensor scratch)``; the
    reference returns only the output tensor and the scratch is allocated here.
    """
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

    def register(reference: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
        if scratch:

            def functional(*args: Any) -> tuple[torch.Tensor, torch.Tensor]:
                return reference(*args[:-1]), torch.empty(args[-1], dtype=torch.int8)

            def out_variant(
                *args: Any, out: torch.Tensor, scratch: torch.Tensor
            ) -> tuple[torch.Tensor, torch.Tensor]:
                out.copy_(reference(*args[:-1]))
                return out, scratch

            def fake_functional(*args: Any) -> tuple[torch.Tensor, torch.Tensor]:
                result = fake(*args[:-1])
                return result, result.new_empty((args[-1],), dtype=torch.int8)

        else:

            def functional(*args: Any) -> torch.Tensor:
                return reference(*args)

            def out_variant(*args: Any, out: torch.Tensor) -> torch.Tensor:
                out.copy_(reference(*args))
                return out

            fake_functional = fake

        LIB.impl(name, functional, "CompositeExplicitAutograd")
        LIB.impl(f"{name}.out", out_variant, "CompositeExplicitAutograd")
        torch.library.register_fake(f"{NAMESPACE}::{name}", fake_functional, lib=LIB)
        return reference

    return register


def operator(name: str) -> torch._ops.OpOverload:
    """The functional overload ``torch.ops.cortex_m_nn.<name>.default``."""
    return getattr(getattr(torch.ops, NAMESPACE), name).default
