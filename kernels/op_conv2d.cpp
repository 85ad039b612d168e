// cortex_m_nn::conv2d.out → arm_convolve_wrapper_s8 (NHWC int8, OHWI weights, per-channel
// requantization). Grouped when the weight has fewer channels than the input (CMSIS-NN's
// convention: groups = input channels / weight channels); the wrapper then calls
// arm_convolve_s8, which computes groups on every ISA. Checks and arguments: cortex_m_nn/conv_common.h.
// Reference: python/cortex_m_nn/ops/conv2d.py.
#include "cortex_m_nn/conv_common.h"
#include "cortex_m_nn_operators.h"

namespace cortex_m_nn {
namespace native {

void conv2d_out(
    KernelRuntimeContext& context,
    const Tensor& input,
    const Tensor& weight,
    const Tensor& bias,
    const Tensor& multipliers,
    const Tensor& shifts,
    IntArrayRef stride,
    IntArrayRef padding,
    IntArrayRef dilation,
    int64_t input_offset,
    int64_t output_offset,
    int64_t activation_min,
    int64_t activation_max,
    int64_t scratch_bytes,
    Tensor& out,
    Tensor& scratch) {
  (void)scratch_bytes;  // the planned scratch tensor carries its size
  const ConvTensors tensors{input, weight, bias, multipliers, shifts, out};
  const ConvQuant quant{input_offset, output_offset, activation_min, activation_max};
  ConvArgs args;
  if (!prepare_conv(context, "conv2d", tensors, ConvWeight::kGroupedOhwi, quant, &args) ||
      !prepare_window(context, "conv2d", stride, padding, dilation, &args)) {
    return;
  }
  const auto params = args.params<cmsis_nn_conv_params>();
  cmsis_nn_context buffer{};
  const int32_t required = arm_convolve_wrapper_s8_get_buffer_size(
      &params, &args.input_dims, &args.filter_dims, &args.output_dims);
  if (scratch_context(context, "conv2d", scratch, required, &buffer)) {
    check_status(context, "conv2d", call_conv_s8(arm_convolve_wrapper_s8, args, params, &buffer));
  }
}

}  // namespace native
}  // namespace cortex_m_nn
