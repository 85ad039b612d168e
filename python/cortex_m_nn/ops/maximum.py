"""``cortex_m_nn::maximum``: defined with ``minimum`` in :mod:`cortex_m_nn.ops.minmax`."""

from cortex_m_nn.ops.minmax import check_minmax_shapes, maximum

__all__ = ["check_minmax_shapes", "maximum"]
