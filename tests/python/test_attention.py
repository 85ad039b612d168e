"""Attention as users write it (``F.scaled_dot_product_attention``, ``nn.MultiheadAttention``,
``nn.TransformerEncoderLayer``) and ``einsum`` lower onto batch matmuls and softmax
(``frontend/decompose.py``); attention's scale is applied by the first product's
requantization (``lower/patterns.py``); a causal or boolean mask is the masked softmax's;
what has no integer form is refused with the rewrite.
The corpus (``tests/coverage``) runs the layers' variants; these check the parts."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from cortex_m_nn.check.harness import check_dialect
from cortex_m_nn.core.errors import CompileError


class Scores(nn.Module):
    """A product times a number, then softmax (attention's scores)."""

    def __init__(self, factor: float, reread: bool = False) -> None:
        super().__init__()
        self.proj, self.factor, self.reread = nn.Linear(8, 8), factor, reread

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = self.proj(x)
        product = q @ x.transpose(-2, -1)
        scores = torch.softmax(product * self.factor, -1)
        return torch.cat([scores, product], -1) if self.reread else scores


@pytest.mark.parametrize(
    ("factor", "reread", "multiplies"),
    [(0.125, False, 0), (3.0, False, 0), (-0.5, False, 1), (0.125, True, 1)],
    ids=["scale", "large", "negative", "product-read-again"],
)
def test_a_positive_scale_alone_after_a_product_is_its_requantization(
    factor: float, reread: bool, multiplies: int
) -> None:
    """Folded: no multiply, one batch matmul, within 1 LSB of the PT2E graph (which applies
    the scale before the one quantize); a negative scale (the clamp would flip) or a product
    read by another op keeps its multiply."""
    x = torch.randn(1, 6, 8, generator=torch.Generator().manual_seed(0))
    compiled, verification = check_dialect(
        Scores(factor, reread).eval(), (x,), after={"cortex_m_nn.batch_matmul": 1}
    )
    lowered = [r for r in compiled.records if r.source_op == "aten.mul.Tensor" and r.lowered]
    assert len(lowered) == multiplies and verification.passed


class Attention(nn.Module):
    def __init__(self, **options: object) -> None:
        super().__init__()
        self.proj, self.options = nn.Linear(16, 16), options

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = self.proj(x).unflatten(-1, (2, 8)).transpose(1, 2)
        return F.scaled_dot_product_attention(q, q, q, **self.options)


def test_attention_is_two_products_and_a_softmax() -> None:
    x = torch.randn(1, 6, 16, generator=torch.Generator().manual_seed(1))
    _, verification = check_dialect(
        Attention(scale=0.2).eval(),
        (x,),
        after={
            "cortex_m_nn.batch_matmul": 2,
            "cortex_m_nn.softmax": 1,
            "cortex_m_nn.mul": 0,
            "aten.scaled_dot_product_attention": 0,
        },
    )
    assert verification.passed


MASKS = {
    "causal": {"is_causal": True},
    "boolean": {"attn_mask": torch.rand(6, 6, generator=torch.Generator().manual_seed(4)) > 0.4},
    "float-with-inf": {"attn_mask": torch.zeros(6, 6).masked_fill(torch.eye(6) > 0, -math.inf)},
    # the two together keep the diagonal alone
    "causal-and-boolean": {"is_causal": True, "attn_mask": torch.ones(6, 6).tril(-1) == 0},
}


@pytest.mark.parametrize("name", MASKS)
def test_a_masked_score_weighs_nothing(name: str) -> None:
    """A causal, boolean or ``-inf`` mask is the masked softmax's (arm_softmax_s8 on the kept
    scores): within 1 LSB of the PT2E graph, whose float softmax gives a masked score 0."""
    x = torch.randn(1, 6, 16, generator=torch.Generator().manual_seed(1))
    compiled, verification = check_dialect(
        Attention(**MASKS[name]).eval(),
        (x,),
        after={"cortex_m_nn.masked_softmax": 1, "cortex_m_nn.softmax": 0},
    )
    assert verification.passed
    (record,) = [r for r in compiled.records if r.kernel == "cortex_m_nn::masked_softmax"]
    assert record.cmsis_function == "arm_softmax_s8"


class ComputedMask(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = self.proj(x)
        return F.scaled_dot_product_attention(q, q, q, attn_mask=x.sum(-1, keepdim=True) > 0)


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (lambda: Attention(dropout_p=0.1), "dropout_p=0.1.*eval mode"),
        (ComputedMask, "boolean mask computed by the model.*constant"),
        (lambda: Attention(attn_mask=torch.ones(6, 6).triu(1) > 2), "masks every score"),
    ],
    ids=["dropout", "computed-mask", "all-masked-row"],
)
def test_attention_without_an_integer_form_is_refused_with_the_rewrite(
    model: Callable[[], nn.Module], message: str
) -> None:
    x = torch.randn(1, 6, 16)
    with pytest.raises(CompileError, match=message):
        check_dialect(model().eval(), (x,))


class Einsum(nn.Module):
    def __init__(self, equation: str) -> None:
        super().__init__()
        self.proj, self.equation = nn.Linear(8, 8), equation

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.proj(x)
        return torch.einsum(self.equation, y, x)


@pytest.mark.parametrize("equation", ["bld,bmd->blm", "bld,bmd->bml", "bij,bik->bjk"])
def test_einsum_is_a_batch_matmul(equation: str) -> None:
    x = torch.randn(1, 5, 8, generator=torch.Generator().manual_seed(2))
    _, verification = check_dialect(
        Einsum(equation).eval(), (x,), after={"cortex_m_nn.batch_matmul": 1, "aten.einsum": 0}
    )
    assert verification.passed
