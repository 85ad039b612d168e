"""The corpus models cortex-m-nn cannot lower (or verify) today, and the feature that fixes each."""

from __future__ import annotations

FAILING: dict[str, str] = {}
