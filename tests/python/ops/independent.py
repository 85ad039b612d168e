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


def ref_requantize_s64(val: int, mult: int, shift: int) -> int:
    """arm_nn_requantize_s64 in Python ints, the multiplier first reduced to Q15 as
    REDUCE_MULTIPLIER does (the int16 kernels' output stage)."""
    reduced = (mult + (1 << 15)) >> 16 if mult < 0x7FFF0000 else 0x7FFF
    result = wrap32((val * reduced) >> (14 - shift))
    return wrap32(result + 1) >> 1


def broadcast_pairs(x1, x2) -> tuple[list[tuple[int, int]], list[int]]:
    """Element pairs of two same-rank tensors under broadcasting, in row-major output order,
    and the output shape; plain Python indexing (no torch broadcasting)."""
    import itertools

    shape1, shape2 = list(x1.shape), list(x2.shape)
    out = [max(a, b) for a, b in zip(shape1, shape2, strict=True)]
    flat1, flat2 = x1.reshape(-1).tolist(), x2.reshape(-1).tolist()

    def offset(shape: list[int], index: tuple[int, ...]) -> int:
        position = 0
        for extent, i in zip(shape, index, strict=True):
            position = position * extent + (i if extent > 1 else 0)
        return position

    pairs = [
        (flat1[offset(shape1, index)], flat2[offset(shape2, index)])
        for index in itertools.product(*(range(n) for n in out))
    ]
    return pairs, out


def cmsis_minmax_walk(dims1, data1, dims2, data2, dims_out, pick) -> list[int]:
    """arm_maximum_s8 / arm_minimum_s8's scalar pointer walk, transcribed (its three cases,
    repeated at each level in C, written once as ``level``).

    ``dims*`` are ``[n, h, w, c]``, ``data*`` flat lists, ``pick(scalar_or_first, other)`` the
    element function. Returns the flat output (None where the C code writes nothing).
    """
    n1, h1, w1, c1 = dims1
    n2, h2, w2, c2 = dims2
    out: list[int | None] = [None] * (dims_out[0] * dims_out[1] * dims_out[2] * dims_out[3])
    o = 0

    def no_broadcast(p1: int, p2: int, count: int) -> None:
        nonlocal o
        for i in range(count):
            out[o] = pick(data1[p1 + i], data2[p2 + i])
            o += 1

    def scalar(p_scalar: int, scalars, p_vector: int, vector, count: int) -> None:
        nonlocal o
        for i in range(count):
            out[o] = pick(scalars[p_scalar], vector[p_vector + i])
            o += 1

    def level(p1: int, p2: int, same: bool, size1: int, size2: int) -> tuple[int, int] | None:
        """The three cases the C code tries at each level of the walk (same extents, the first
        operand a scalar, the second a scalar): the pointers after the written elements, or
        None where none applies."""
        if same:
            no_broadcast(p1, p2, size1)
            return p1 + size1, p2 + size1
        if size1 == 1:
            scalar(p1, data1, p2, data2, size2)
            return p1 + 1, p2 + size2
        if size2 == 1:
            scalar(p2, data2, p1, data1, size1)
            return p1 + size1, p2 + 1
        return None

    flat1, flat2 = n1 * h1 * w1 * c1, n2 * h2 * w2 * c2
    if level(0, 0, list(dims1) == list(dims2), flat1, flat2) is not None:
        return out
    width1 = 0 if w1 >= w2 else c1
    width2 = 0 if w2 >= w1 else c2
    height1 = width1 if h1 >= h2 else -w1 * (c1 - width1)
    height2 = width2 if h2 >= h1 else -w2 * (c2 - width2)
    batch1 = c1 * w1 * h1 if n1 >= n2 else 0
    batch2 = c2 * w2 * h2 if n2 >= n1 else 0
    base1 = base2 = 0
    for _ in range(dims_out[0]):
        p1, p2 = base1, base2
        if level(p1, p2, (h1, w1, c1) == (h2, w2, c2), h1 * w1 * c1, h2 * w2 * c2) is None:
            for _ in range(dims_out[1]):
                row = level(p1, p2, (w1, c1) == (w2, c2), w1 * c1, w2 * c2)
                if row is None:
                    for _ in range(dims_out[2]):
                        p1, p2 = level(p1, p2, c1 == c2, c1, c2) or (p1, p2)
                        p1 -= width1
                        p2 -= width2
                else:
                    p1, p2 = row
                p1 += height1
                p2 += height2
        base1 += batch1
        base2 += batch2
    return out
