// cortex_m_nn::transpose_conv2d.out → arm_transpose_conv_wrapper_s8 (NHWC int8, OHWI weights,
// per-channel requantization). The planned scratch holds both CMSIS-NN buffers: the working
// buffer first, the reversed filter from reverse_conv_offset on.
// Reference: python/cortex_m_nn/ops/transpose_conv2d.py.
#include "cortex_m_nn/kernel_support.h"
#include "cortex_m_nn_operators.h"

extern "C" {
#include "arm_nnfunctions.h"
}

namespace cortex_m_nn {
namespace native {

namespace {
constexpr const char* kOp = "transpose_conv2d";
}

void transpose_conv2d_out(
    KernelRuntimeContext& context,
    const Tensor& input,
    const Tensor& weight,
    const Tensor& bias,
    const Tensor& multipliers,
    const Tensor& shifts,
    IntArrayRef stride,
    IntArrayRef padding,
    IntArrayRef output_padding,
    int64_t input_offset,
    int64_t output_offset,
    int64_t activation_min,
    int64_t activation_max,
    int64_t reverse_conv_offset,
    int64_t scratch_bytes,
    Tensor& out,
    Tensor& scratch) {
  (void)scratch_bytes;
  CORTEX_M_NN_CHECK(
      context,
      has_layout(input, ScalarType::Char, 4) && has_layout(weight, ScalarType::Char, 4) &&
          has_layout(out, ScalarType::Char, 4),
      "transpose_conv2d",
      "input, weight and out must be 4-D int8");
  const int64_t c_out = weight.size(0);
  CORTEX_M_NN_CHECK(
      context,
      input.size(3) == weight.size(3) && out.size(3) == c_out && out.size(0) == input.size(0),
      "transpose_conv2d",
      "shapes disagree: input channels %d, weight [%d, %d, %d, %d], out channels %d",
      (int)input.size(3), (int)weight.size(0), (int)weight.size(1), (int)weight.size(2),
      (int)weight.size(3), (int)out.size(3));
  CORTEX_M_NN_CHECK(
      context,
      has_layout(bias, ScalarType::Int, 1) && has_layout(multipliers, ScalarType::Int, 1) &&
          has_layout(shifts, ScalarType::Int, 1) && bias.size(0) == c_out &&
          multipliers.size(0) == c_out && shifts.size(0) == c_out,
      "transpose_conv2d",
      "bias, multipliers and shifts must be int32 [%d]", (int)c_out);
  CORTEX_M_NN_CHECK(
      context,
      is_pair(stride) && is_pair(padding) && is_pair(output_padding) && stride[0] > 0 &&
          stride[1] > 0 && padding[0] >= 0 && padding[1] >= 0 && output_padding[0] >= 0 &&
          output_padding[1] >= 0 && is_int8_range(activation_min, activation_max) &&
          fits_int32(input_offset) && fits_int32(output_offset),
      "transpose_conv2d",
      "invalid stride, padding, output padding, offsets or activation range");
  const int64_t oh =
      (input.size(1) - 1) * stride[0] - 2 * padding[0] + weight.size(1) + output_padding[0];
  const int64_t ow =
      (input.size(2) - 1) * stride[1] - 2 * padding[1] + weight.size(2) + output_padding[1];
  CORTEX_M_NN_CHECK(
      context,
      out.size(1) == oh && out.size(2) == ow,
      "transpose_conv2d",
      "out is %dx%d, the transposed convolution gives %dx%d", (int)out.size(1),
      (int)out.size(2), (int)oh, (int)ow);

  cmsis_nn_transpose_conv_params params{};
  params.input_offset = static_cast<int32_t>(input_offset);
  params.output_offset = static_cast<int32_t>(output_offset);
  params.stride = tile(stride);
  params.padding = tile(padding);
  params.padding_offsets = {0, 0};
  params.dilation = {1, 1};
  params.activation = {static_cast<int32_t>(activation_min), static_cast<int32_t>(activation_max)};
  cmsis_nn_per_channel_quant_params quant{
      const_cast<int32_t*>(multipliers.const_data_ptr<int32_t>()),
      const_cast<int32_t*>(shifts.const_data_ptr<int32_t>())};
  const cmsis_nn_dims input_dims = nhwc_dims(input);
  const cmsis_nn_dims filter_dims = nhwc_dims(weight);
  const cmsis_nn_dims bias_dims{1, 1, 1, static_cast<int32_t>(c_out)};
  const cmsis_nn_dims output_dims = nhwc_dims(out);

  const size_t planned = scratch.nbytes();
  const int32_t working =
      arm_transpose_conv_s8_get_buffer_size(&params, &input_dims, &filter_dims, &output_dims);
  const int32_t reversed =
      arm_transpose_conv_s8_get_reverse_conv_buffer_size(&params, &input_dims, &filter_dims);
  if (reverse_conv_offset <= 0 || reverse_conv_offset % 4 != 0 ||
      static_cast<size_t>(reverse_conv_offset) > planned || working > reverse_conv_offset ||
      static_cast<int64_t>(planned) - reverse_conv_offset < reversed) {
    ET_LOG(
        Error,
        "cortex_m_nn::transpose_conv2d: the .pte plans %zu scratch bytes split at %d, CMSIS-NN "
        "needs %d + %d on this %s build: recompile the model for the target these kernels were "
        "built for",
        planned, (int)reverse_conv_offset, (int)working, (int)reversed, kIsa);
    context.fail(Error::InvalidProgram);
    return;
  }
  int8_t* base = scratch.mutable_data_ptr<int8_t>();
  const cmsis_nn_context buffer{base, static_cast<int32_t>(reverse_conv_offset)};
  const cmsis_nn_context reverse_buffer{
      planned > static_cast<size_t>(reverse_conv_offset) ? base + reverse_conv_offset : nullptr,
      static_cast<int32_t>(planned - reverse_conv_offset)};
  check_status(
      context,
      kOp,
      arm_transpose_conv_wrapper_s8(
          &buffer,
          &reverse_buffer,
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
