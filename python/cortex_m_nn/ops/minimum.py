"""``cortex_m_nn::minimum``: defined with ``maximum`` in :mod:`cortex_m_nn.ops.minmax`."""

from cortex_m_nn.ops.minmax import minimum

__all__ = ["minimum"]
