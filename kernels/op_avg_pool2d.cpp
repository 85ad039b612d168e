// cortex_m_nn::avg_pool2d.out → arm_avgpool_s8 (NHWC int8, same quantization in and out).
// Reference: python/cortex_m_nn/ops/avg_pool2d.py.
#include "cortex_m_nn/kernel_support.h"
#include "cortex_m_nn_operators.h"

extern "C" {
#include "arm_nnfunctions.h"
}

namespace cortex_m_nn {
namespace native {

namespace {
constexpr const char* kOp = "avg_pool2d";
}

void avg_pool2d_out(
    KernelRuntimeContext& context,
    const Tensor& input,
    IntArrayRef kernel_size,
    IntArrayRef stride,
    IntArrayRef padding,
    int64_t activation_min,
    int64_t activation_max,
    int64_t scratch_bytes,
    Tensor& out,
    Tensor& scratch) {
  (void)scratch_bytes;
  CORTEX_M_NN_CHECK(
          context,
          has_layout(input, ScalarType::Char, 4) && has_layout(out, ScalarType::Char, 4) &&
              out.size(0) == input.size(0) && out.size(3) == input.size(3),
          "avg_pool2d",
          "input and out must be 4-D int8 NHWC with the same batch and channels");
  CORTEX_M_NN_CHECK(
          context,
          is_pair(kernel_size) && is_pair(stride) && is_pair(padding) && kernel_size[0] > 0 &&
              kernel_size[1] > 0 && stride[0] > 0 && stride[1] > 0 && padding[0] >= 0 &&
              padding[1] >= 0 && is_int8_range(activation_min, activation_max),
          "avg_pool2d",
          "invalid kernel_size, stride, padding or activation range");
  const int64_t oh = (input.size(1) + 2 * padding[0] - kernel_size[0]) / stride[0] + 1;
  const int64_t ow = (input.size(2) + 2 * padding[1] - kernel_size[1]) / stride[1] + 1;
  CORTEX_M_NN_CHECK(
          context,
          out.size(1) == oh && out.size(2) == ow,
          "avg_pool2d",
          "out is %dx%d, the pooling gives %dx%d", (int)out.size(1), (int)out.size(2), (int)oh,
          (int)ow);
  cmsis_nn_pool_params params{};
  params.stride = tile(stride);
  params.padding = tile(padding);
  params.activation = {static_cast<int32_t>(activation_min), static_cast<int32_t>(activation_max)};
  const cmsis_nn_dims filter_dims{1, static_cast<int32_t>(kernel_size[0]),
                                  static_cast<int32_t>(kernel_size[1]), 1};
  const cmsis_nn_dims output_dims = nhwc_dims(out);
  cmsis_nn_context buffer{};
  const int32_t required =
      arm_avgpool_s8_get_buffer_size(output_dims.w, static_cast<int32_t>(input.size(3)));
  if (!scratch_context(context, kOp, scratch, required, &buffer)) {
    return;
  }
  const cmsis_nn_dims input_dims = nhwc_dims(input);
  check_status(
      context,
      kOp,
      arm_avgpool_s8(
          &buffer,
          &params,
          &input_dims,
          input.const_data_ptr<int8_t>(),
          &filter_dims,
          &output_dims,
          out.mutable_data_ptr<int8_t>()));
}

}  // namespace native
}  // namespace cortex_m_nn
