// cortex_m_nn::transpose_conv2d.out → arm_transpose_conv_wrapper_s8 (NHWC int8, OHWI weights,
// per-channel requantization). The planned scratch holds both CMSIS-NN buffers: the working
// buffer first, the reversed filter from reverse_conv_offset on. Checks and arguments:
// cortex_m_nn/conv_common.h. Reference: python/cortex_m_nn/ops/transpose_conv2d.py.
#include "cortex_m_nn/conv_common.h"
#include "cortex_m_nn_operators.h"

namespace cortex_m_nn {
namespace native {

namespace {

// The planned scratch holds CMSIS-NN's working buffer, then (from reverse_conv_offset, a
// multiple of 4) its reverse-convolution buffer, each as large as this build's CMSIS-NN asks;
// fails the call otherwise.
bool scratch_splits(
    CallContext& context,
    const ConvArgs& args,
    const cmsis_nn_transpose_conv_params& params,
    size_t planned,
    int64_t reverse_conv_offset) {
  const int32_t working = arm_transpose_conv_s8_get_buffer_size(
      &params, &args.input_dims, &args.filter_dims, &args.output_dims);
  const int32_t reversed = arm_transpose_conv_s8_get_reverse_conv_buffer_size(
      &params, &args.input_dims, &args.filter_dims);
  if (reverse_conv_offset <= 0 || reverse_conv_offset % 4 != 0 ||
      static_cast<size_t>(reverse_conv_offset) > planned || working > reverse_conv_offset ||
      static_cast<int64_t>(planned) - reverse_conv_offset < reversed) {
    ET_LOG(
        Error,
        "cortex_m_nn::transpose_conv2d: the .pte plans %u scratch bytes split at %d, "
        "CMSIS-NN needs %d + %d on this %s build: recompile the model for the target these "
        "kernels were built for",
        (unsigned)planned, (int)reverse_conv_offset, (int)working, (int)reversed, kIsa);
    context.fail(Error::InvalidProgram);
    return false;
  }
  return true;
}

}  // namespace

void transpose_conv2d_out(
    CallContext& context,
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
  const ConvTensors tensors{input, weight, bias, multipliers, shifts, out};
  const ConvQuant quant{input_offset, output_offset, activation_min, activation_max};
  ConvArgs args;
  if (!prepare_conv<ConvCase::kInt8>(context, "transpose_conv2d", tensors, ConvWeight::kOhwi, quant, &args) ||
      !prepare_transposed_window(
          context, "transpose_conv2d", stride, padding, output_padding, &args) ||
      (context.checks() && !check_scratch_type(context, "transpose_conv2d", scratch))) {
    return;
  }
  auto params = args.params<cmsis_nn_transpose_conv_params>();
  params.padding_offsets = {0, 0};
  const size_t planned = scratch.numel();  // bytes: the scratch is int8 (checked)
  if (context.checks() && !scratch_splits(context, args, params, planned, reverse_conv_offset)) {
    return;
  }
  if (!context.computes()) {
    return;
  }
  int8_t* base = scratch.mutable_data_ptr<int8_t>();
  const cmsis_nn_context buffer{base, static_cast<int32_t>(reverse_conv_offset)};
  const cmsis_nn_context reverse_buffer{
      planned > static_cast<size_t>(reverse_conv_offset) ? base + reverse_conv_offset : nullptr,
      static_cast<int32_t>(planned - reverse_conv_offset)};
  check_status(
      context,
      "transpose_conv2d",
      call_conv_s8(arm_transpose_conv_wrapper_s8, args, params, &buffer, &reverse_buffer));
}

}  // namespace native
}  // namespace cortex_m_nn
