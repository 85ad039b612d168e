"""The corpus models cortex-m-nn cannot lower (or verify) today, and the feature that fixes each.

Measured after issue 12's first features landed (functional form, data movement, grouped
convolution, tables and reductions, resize, layer norm); the rest is still open. A key is a
per-layer case, an architecture (both cores) or ``architecture@core``; the value names the
issue-12 area whose
feature fixes it (the operator the report names first) — remove the entry when it lands:
``test_coverage.py`` marks these ``xfail(strict=True)``, so a fixed model fails until then.
"""

from __future__ import annotations

FUNCTIONAL = "functional (in-place ops to functional forms, aliases and copies removed)"
MOVEMENT = "movement (slices, splits, views and copies of every data movement)"
CONV = "conv (grouped convolution, depthwise multiplier, dilation, asymmetric padding)"
LAYERS = "layers (activations, prelu, reductions, x*x, division by a constant, batch norm)"
RESIZE = "resize (nearest and bilinear interpolation)"
NORM = "norm (LayerNorm and GroupNorm integer kernel)"
#: Operators issue 12 does not list; a case fails until someone adds them.
BEYOND = "beyond issue 12"


def _(area: str, what: str) -> str:
    return f"{area}: {what}"


FAILING: dict[str, str] = {
    # -- architectures (every core): none today ------------------------------------------
    # -- activations ----------------------------------------------------------------------
    # -- pools, convolutions --------------------------------------------------------------
    # -- dropout, resize, shape -----------------------------------------------------------
    # -- in-place, aliases, views, slices, joins ------------------------------------------
    # -- math, reductions, products -------------------------------------------------------
    # -- and the others, by family ----------------------------------------------------------
}
