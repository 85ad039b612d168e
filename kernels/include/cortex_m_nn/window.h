// The geometry of kernels that slide a window over an NHWC tensor (the convolutions and the
// pools): the (h, w) argument pairs, the output extents they give, and the check that out has
// them. python/cortex_m_nn/ops/ computes the same extents for the fakes.
#pragma once

#include <cstdint>

#include "cortex_m_nn/kernel_checks.h"

namespace cortex_m_nn {
namespace native {

// Both of a (h, w) pair in [lowest, INT32_MAX]: CMSIS-NN takes int32 tiles, and the extents
// below stay inside int64 for such values.
inline bool pair_in(IntArrayRef values, int64_t lowest) {
  return is_pair(values) && values[0] >= lowest && values[1] >= lowest &&
      values[0] <= INT32_MAX && values[1] <= INT32_MAX;
}

inline bool positive_pair(IntArrayRef values) {
  return pair_in(values, 1);
}

inline bool non_negative_pair(IntArrayRef values) {
  return pair_in(values, 0);
}

// Positions of a window of `kernel` taps `dilation` apart, moved by `stride` (1 to INT32_MAX)
// over `size` padded by `before` ahead of it and `after` behind it, as the Python reference
// counts them (python/cortex_m_nn/ops/params.py, output_size: a floor division). A window
// longer than the padded input fits nowhere: 0, or -1 when the Python count is below 0 (no
// output extent is). A span beyond int32 is not a window CMSIS-NN's int32 arithmetic can walk:
// -1 too. So every extent an output can have is a 32-bit division.
inline int64_t padded_extent(
    int64_t size, int64_t kernel, int64_t stride, int64_t before, int64_t after,
    int64_t dilation) {
  const int64_t span = size + before + after - dilation * (kernel - 1) - 1;
  if (span < 0) {
    return span >= -stride ? 0 : -1;
  }
  if (span > INT32_MAX || stride > INT32_MAX) {
    return -1;
  }
  return static_cast<int32_t>(span) / static_cast<int32_t>(stride) + 1;
}

// The same, padded by `padding` on both sides.
inline int64_t window_extent(
    int64_t size, int64_t kernel, int64_t stride, int64_t padding, int64_t dilation) {
  return padded_extent(size, kernel, stride, padding, padding, dilation);
}

// A forward convolution's padding, read as python/cortex_m_nn/ops/params.py's `sides` and
// `check_forward_window` read it: (h, w) pads both sides alike; (top, left, bottom, right) pads
// an end that differs from its start less than the dilated kernel. CMSIS-NN computes such an
// end from the top/left pad and out's dims (TensorFlow's SAME; a patch-based stage's strips,
// padded at the image border only), but for the two paths the kernels guard themselves:
// op_conv2d.cpp's MVE 1xN layouts, op_depthwise_conv2d.cpp's 3x3 path.
// `dilation` is a valid pair.
struct PadSides {
  int64_t top, left, bottom, right;
};

inline bool pad_sides(
    IntArrayRef padding, int64_t kernel_h, int64_t kernel_w, IntArrayRef dilation,
    PadSides* sides) {
  if (padding.size() == 2) {
    *sides = PadSides{padding[0], padding[1], padding[0], padding[1]};
  } else if (padding.size() == 4) {
    *sides = PadSides{padding[0], padding[1], padding[2], padding[3]};
  } else {
    return false;
  }
  const int64_t starts[2] = {sides->top, sides->left};
  const int64_t ends[2] = {sides->bottom, sides->right};
  const int64_t spans[2] = {dilation[0] * (kernel_h - 1), dilation[1] * (kernel_w - 1)};
  for (int axis = 0; axis < 2; ++axis) {
    if (starts[axis] < 0 || starts[axis] > INT32_MAX || ends[axis] < 0) {
      return false;
    }
    const bool asymmetric = ends[axis] != starts[axis];
    if (asymmetric && ends[axis] > spans[axis]) {
      return false;
    }
  }
  return true;
}

// The output extent of a transposed convolution (the size a convolution maps back onto).
inline int64_t transposed_extent(
    int64_t size, int64_t kernel, int64_t stride, int64_t padding, int64_t output_padding) {
  return (size - 1) * stride - 2 * padding + kernel + output_padding;
}

// Out's height and width (NHWC) against `oh` x `ow`; logs "out is HxW, the <what> gives
// OHxOW" and fails the call when they differ.
inline bool check_out_hw(
    CallContext& context,
    const char* op,
    const char* what,
    const Tensor& out,
    int64_t oh,
    int64_t ow) {
  if (out.size(1) == oh && out.size(2) == ow) {
    return true;
  }
  ET_LOG(
      Error,
      "cortex_m_nn::%s: out is %dx%d, the %s gives %dx%d",
      op,
      (int)out.size(1),
      (int)out.size(2),
      what,
      (int)oh,
      (int)ow);
  context.fail(Error::InvalidArgument);
  return false;
}

}  // namespace native
}  // namespace cortex_m_nn
