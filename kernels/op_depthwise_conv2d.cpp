// cortex_m_nn::depthwise_conv2d.out → arm_depthwise_conv_wrapper_s8 (NHWC int8, weights
// [1, KH, KW, Cout], per-channel requantization). Reference:
// python/cortex_m_nn/ops/depthwise_conv2d.py.
#include "cortex_m_nn/kernel_support.h"
#include "cortex_m_nn_operators.h"

extern "C" {
#include "arm_nnfunctions.h"
}

namespace cortex_m_nn {
namespace native {

namespace {
constexpr const char* kOp = "depthwise_conv2d";
}

void depthwise_conv2d_out(
    KernelRuntimeContext& context,
    const Tensor& input,
    const Tensor& weight,
    const Tensor& bias,
    const Tensor& multipliers,
    const Tensor& shifts,
    IntArrayRef stride,
    IntArrayRef padding,
    IntArrayRef dilation,
    int64_t depth_multiplier,
    int64_t input_offset,
    int64_t output_offset,
    int64_t activation_min,
    int64_t activation_max,
    int64_t scratch_bytes,
    Tensor& out,
    Tensor& scratch) {
  (void)scratch_bytes;
  CORTEX_M_NN_CHECK(
          context,
          has_layout(input, ScalarType::Char, 4) && has_layout(weight, ScalarType::Char, 4) &&
              has_layout(out, ScalarType::Char, 4),
          "depthwise_conv2d",
          "input, weight and out must be 4-D int8");
  const int64_t c_out = weight.size(3);
  CORTEX_M_NN_CHECK(
          context,
          weight.size(0) == 1 && depth_multiplier >= 1 &&
              input.size(3) * depth_multiplier == c_out && out.size(3) == c_out &&
              out.size(0) == input.size(0),
          "depthwise_conv2d",
          "shapes disagree: input channels %d x multiplier %d, weight channels %d, out %d",
          (int)input.size(3), (int)depth_multiplier, (int)c_out, (int)out.size(3));
  CORTEX_M_NN_CHECK(
          context,
          has_layout(bias, ScalarType::Int, 1) && has_layout(multipliers, ScalarType::Int, 1) &&
              has_layout(shifts, ScalarType::Int, 1) && bias.size(0) == c_out &&
              multipliers.size(0) == c_out && shifts.size(0) == c_out,
          "depthwise_conv2d",
          "bias, multipliers and shifts must be int32 [%d]", (int)c_out);
  CORTEX_M_NN_CHECK(
          context,
          is_pair(stride) && is_pair(padding) && is_pair(dilation) && stride[0] > 0 &&
              stride[1] > 0 && dilation[0] > 0 && dilation[1] > 0 && padding[0] >= 0 &&
              padding[1] >= 0 && is_int8_range(activation_min, activation_max) &&
              fits_int32(input_offset) && fits_int32(output_offset),
          "depthwise_conv2d",
          "invalid stride, padding, dilation, offsets or activation range");
  const int64_t kh = weight.size(1), kw = weight.size(2);
  const int64_t oh = (input.size(1) + 2 * padding[0] - dilation[0] * (kh - 1) - 1) / stride[0] + 1;
  const int64_t ow = (input.size(2) + 2 * padding[1] - dilation[1] * (kw - 1) - 1) / stride[1] + 1;
  CORTEX_M_NN_CHECK(
          context,
          out.size(1) == oh && out.size(2) == ow,
          "depthwise_conv2d",
          "out is %dx%d, the convolution gives %dx%d", (int)out.size(1), (int)out.size(2),
          (int)oh, (int)ow);

  cmsis_nn_dw_conv_params params{};
  params.input_offset = static_cast<int32_t>(input_offset);
  params.output_offset = static_cast<int32_t>(output_offset);
  params.ch_mult = static_cast<int32_t>(depth_multiplier);
  params.stride = tile(stride);
  params.padding = tile(padding);
  params.dilation = tile(dilation);
  params.activation = {static_cast<int32_t>(activation_min), static_cast<int32_t>(activation_max)};
  cmsis_nn_per_channel_quant_params quant{
      const_cast<int32_t*>(multipliers.const_data_ptr<int32_t>()),
      const_cast<int32_t*>(shifts.const_data_ptr<int32_t>())};
  const cmsis_nn_dims input_dims = nhwc_dims(input);
  const cmsis_nn_dims filter_dims = nhwc_dims(weight);
  const cmsis_nn_dims bias_dims{1, 1, 1, static_cast<int32_t>(c_out)};
  const cmsis_nn_dims output_dims = nhwc_dims(out);

  cmsis_nn_context buffer{};
  const int32_t required = arm_depthwise_conv_wrapper_s8_get_buffer_size(
      &params, &input_dims, &filter_dims, &output_dims);
  if (!scratch_context(context, kOp, scratch, required, &buffer)) {
    return;
  }
  check_status(
      context,
      kOp,
      arm_depthwise_conv_wrapper_s8(
          &buffer,
          &params,
          &quant,
          &input_dims,
          input.const_data_ptr<int8_t>(),
          &filter_dims,
          weight.const_data_ptr<int8_t>(),
          &bias_dims,
          bias.const_data_ptr<int32_t>(),
          &output_dims,
          out.mutable_data_ptr<int8_t>()));
}

}  // namespace native
}  // namespace cortex_m_nn
