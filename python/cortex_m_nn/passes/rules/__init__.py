"""Lowering rules, one module per operator family; importing this registers them all."""

from cortex_m_nn.passes.rules import add, conv2d, linear, pooling, softmax, views

__all__ = ["add", "conv2d", "linear", "pooling", "softmax", "views"]
