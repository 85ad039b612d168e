// cortex_m_nn::max_pool2d.out → arm_max_pool_s8 (NHWC int8, same quantization in and out,
// fused activation clamp). Reference: python/cortex_m_nn/ops/max_pool2d.py.
#include "cortex_m_nn/kernel_support.h"
#include "cortex_m_nn_operators.h"

extern "C" {
#include "arm_nnfunctions.h"
}

namespace cortex_m_nn {
namespace native {

namespace {
int64_t pooled(int64_t size, int64_t kernel, int64_t stride, int64_t padding, bool ceil_mode) {
  int64_t out = (size + 2 * padding - kernel + (ceil_mode ? stride - 1 : 0)) / stride + 1;
  if (ceil_mode && (out - 1) * stride >= size + padding) {
    --out;  // PyTorch: the last window must start inside the input or its left padding
  }
  return out;
}
}  // namespace

void max_pool2d_out(
    KernelRuntimeContext& context,
    const Tensor& input,
    IntArrayRef kernel_size,
    IntArrayRef stride,
    IntArrayRef padding,
    bool ceil_mode,
    int64_t activation_min,
    int64_t activation_max,
    Tensor& out) {
  CORTEX_M_NN_CHECK(
      context,
      has_layout(input, ScalarType::Char, 4) && has_layout(out, ScalarType::Char, 4) &&
          out.size(0) == input.size(0) && out.size(3) == input.size(3),
      "max_pool2d",
      "input and out must be 4-D int8 NHWC with the same batch and channels");
  CORTEX_M_NN_CHECK(
      context,
      is_pair(kernel_size) && is_pair(stride) && is_pair(padding) && kernel_size[0] > 0 &&
          kernel_size[1] > 0 && stride[0] > 0 && stride[1] > 0 && padding[0] >= 0 &&
          padding[1] >= 0 && is_int8_range(activation_min, activation_max),
      "max_pool2d",
      "invalid kernel_size, stride, padding or activation range");
  const int64_t oh = pooled(input.size(1), kernel_size[0], stride[0], padding[0], ceil_mode);
  const int64_t ow = pooled(input.size(2), kernel_size[1], stride[1], padding[1], ceil_mode);
  CORTEX_M_NN_CHECK(
      context,
      out.size(1) == oh && out.size(2) == ow,
      "max_pool2d",
      "out is %dx%d, the pooling gives %dx%d", (int)out.size(1), (int)out.size(2), (int)oh,
      (int)ow);
  cmsis_nn_pool_params params{};
  params.stride = tile(stride);
  params.padding = tile(padding);
  params.activation = {static_cast<int32_t>(activation_min), static_cast<int32_t>(activation_max)};
  const cmsis_nn_dims input_dims = nhwc_dims(input);
  const cmsis_nn_dims filter_dims{1, static_cast<int32_t>(kernel_size[0]),
                                  static_cast<int32_t>(kernel_size[1]), 1};
  const cmsis_nn_dims output_dims = nhwc_dims(out);
  const cmsis_nn_context no_buffer{nullptr, 0};
  check_status(
      context,
      "max_pool2d",
      arm_max_pool_s8(
          &no_buffer,
          &params,
          &input_dims,
          input.const_data_ptr<int8_t>(),
          &filter_dims,
          &output_dims,
          out.mutable_data_ptr<int8_t>()));
}

}  // namespace native
}  // namespace cortex_m_nn
