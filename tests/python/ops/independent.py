"""CMSIS-NN's requantization written again in plain Python ints, independently of
``cortex_m_nn.ops.arithmetic``, for the operator tests to compare against."""

from __future__ import annotations


def wrap32(value: int) -> int:
    return (value + 2**31) % 2**32 - 2**31


def ref_requantize(val: int, mult: int, shift: int, single: bool = False) -> int:
    """arm_nn_requantize in Python ints (both CMSIS-NN rounding modes)."""
    if single:
        return wrap32((((val * mult) >> (30 - shift)) + 1) >> 1)
    shifted = wrap32(val * (1 << max(shift, 0)))
    high = wrap32((shifted * mult + (1 << 30)) >> 31)
    exponent = max(-shift, 0)
    mask = (1 << exponent) - 1
    result, remainder = high >> exponent, high & mask
    threshold = (mask >> 1) + (1 if result < 0 else 0)
    return result + (1 if remainder > threshold else 0)
