// What the pooling kernels (avg_pool2d, max_pool2d) share: one check of the tensors, window
// and activation range filling one PoolArgs with CMSIS-NN's params and dims. Each kernel adds
// only its CMSIS-NN call (and avg_pool2d its buffer); int16 is a case in the same kernel over
// the same PoolArgs (arm_avgpool_s16, arm_max_pool_s16).
#pragma once

#include <cstdint>

#include "cortex_m_nn/kernel_checks.h"
#include "cortex_m_nn/window.h"

namespace cortex_m_nn {
namespace native {

// What CMSIS-NN's pools take besides their buffer and data. prepare_pool sets every field (no
// zero-initialisation: a memset per call).
struct PoolArgs {
  cmsis_nn_pool_params params;
  cmsis_nn_dims input_dims;
  cmsis_nn_dims filter_dims;
  cmsis_nn_dims output_dims;
};

// Pooled positions along one dimension. ceil_mode as PyTorch's: the last window may run past
// the padded input, but must start inside the input or its left padding.
inline int64_t pooled_extent(
    int64_t size, int64_t kernel, int64_t stride, int64_t padding, bool ceil_mode) {
  if (!ceil_mode) {
    return window_extent(size, kernel, stride, padding, 1);
  }
  // floor((size + 2 * padding - kernel + stride - 1) / stride) + 1, as the Python reference
  // (ops/max_pool2d.py, pool_output_size), in 32 bits like padded_extent: 0 or -1 where that
  // is 0 or below, -1 beyond int32; less the last window when it starts in the end padding.
  const int64_t num = size + 2 * padding - kernel + stride - 1;
  if (num < 0) {
    return num >= -stride ? 0 : -1;
  }
  if (num > INT32_MAX || stride > INT32_MAX) {
    return -1;
  }
  int64_t out = static_cast<int32_t>(num) / static_cast<int32_t>(stride) + 1;
  if ((out - 1) * stride >= size + padding) {
    --out;
  }
  return out;
}

// A pool's window and activation range, as its kernel receives them.
struct PoolWindow {
  IntArrayRef kernel_size;
  IntArrayRef stride;
  IntArrayRef padding;
  bool ceil_mode;
  int64_t activation_min;
  int64_t activation_max;
};

// Input and out 4-D NHWC, both int8 or both int16 (the _s16 kernels), of one batch and channel
// count, kernel_size and stride > 0 and padding >= 0 as (h, w) pairs, activation range in the
// dtype, an int16 window below 65,536 elements (its int32 sum exact), out's height and width
// the pooled ones; fails the call otherwise.
CORTEX_M_NN_CHECK_ONLY inline bool check_pool(
    CallContext& context, const char* op, const Tensor& input, const PoolWindow& w,
    const Tensor& out) {
  const bool s16 = is_type(input, ScalarType::Short);
  const ScalarType type = s16 ? ScalarType::Short : ScalarType::Char;
  if (!has_layout(input, type, 4) || !has_layout(out, type, 4) ||
      out.size(0) != input.size(0) || out.size(3) != input.size(3)) {
    return refuse(
        context, op,
        "input and out must be 4-D NHWC, both int8 or both int16, with the same batch and "
        "channels");
  }
  const bool range = s16 ? is_int16_range(w.activation_min, w.activation_max)
                         : is_int8_range(w.activation_min, w.activation_max);
  if (!positive_pair(w.kernel_size) || !positive_pair(w.stride) ||
      !non_negative_pair(w.padding) || !range ||
      (s16 && w.kernel_size[0] * w.kernel_size[1] >= 65536)) {
    return refuse(context, op, "invalid kernel_size, stride, padding or activation range");
  }
  const int64_t oh =
      pooled_extent(input.size(1), w.kernel_size[0], w.stride[0], w.padding[0], w.ceil_mode);
  const int64_t ow =
      pooled_extent(input.size(2), w.kernel_size[1], w.stride[1], w.padding[1], w.ceil_mode);
  return check_out_hw(context, op, "pooling", out, oh, ow);
}

// check_pool unless the call is proven, then fills `args`.
inline bool prepare_pool(
    CallContext& context, const char* op, const Tensor& input, const PoolWindow& w,
    const Tensor& out, PoolArgs* args) {
  if (context.checks() && !check_pool(context, op, input, w, out)) {
    return false;
  }
  args->params.stride = tile(w.stride);
  args->params.padding = tile(w.padding);
  args->params.activation = activation_range(w.activation_min, w.activation_max);
  args->input_dims = nhwc_dims(input);
  args->filter_dims = cmsis_nn_dims{
      1, static_cast<int32_t>(w.kernel_size[0]), static_cast<int32_t>(w.kernel_size[1]), 1};
  args->output_dims = nhwc_dims(out);
  return true;
}

}  // namespace native
}  // namespace cortex_m_nn
