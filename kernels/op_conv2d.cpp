// cortex_m_nn::conv2d.out → arm_convolve_wrapper_s8 (NHWC int8, OHWI weights, per-channel
// requantization). Grouped when the weight has fewer channels than the input (CMSIS-NN's
// convention: groups = input channels / weight channels); the wrapper then calls
// arm_convolve_s8, which computes groups on every ISA. Checks and arguments: cortex_m_nn/conv_common.h.
// Reference: python/cortex_m_nn/ops/conv2d.py.
#include "arm_nnsupportfunctions.h"
#include "cortex_m_nn/conv_common.h"
#include "cortex_m_nn_operators.h"

namespace cortex_m_nn {
namespace native {
namespace {

// arm_convolve_s8 with the wrapper's signature (no upscaling).
arm_cmsis_nn_status convolve_s8(
    const cmsis_nn_context* ctx,
    const cmsis_nn_conv_params* params,
    const cmsis_nn_per_channel_quant_params* quant,
    const cmsis_nn_dims* input_dims,
    const int8_t* input,
    const cmsis_nn_dims* filter_dims,
    const int8_t* filter,
    const cmsis_nn_dims* bias_dims,
    const int32_t* bias,
    const cmsis_nn_dims* output_dims,
    int8_t* output) {
  return arm_convolve_s8(
      ctx, params, quant, input_dims, input, filter_dims, filter, bias_dims, bias, nullptr,
      output_dims, output);
}

// The wrapper sends a 1xN convolution to arm_convolve_1_x_n_s8, whose MVE code assumes the
// right padding is the left padding or one more. PyTorch's output length can leave less
// (kernel 3, stride 2, padding 1, length 8: one column of padding in all); the MVE code then
// fails, so such a convolution calls arm_convolve_s8 directly. Mirrored by
// python/cortex_m_nn/scratch.py (conv2d_scratch_bytes).
bool mve_one_by_n_cannot_pad(const ConvArgs& args, const cmsis_nn_conv_params& params) {
#if defined(ARM_MATH_MVEI)
  if (!arm_nn_is_convolve_1x1(&params, &args.input_dims, &args.filter_dims) &&
      arm_nn_is_convolve_1_x_n(&params, &args.input_dims, &args.filter_dims)) {
    const int32_t total_pad = (args.output_dims.w - 1) * params.stride.w + args.filter_dims.w -
        args.input_dims.w;
    return params.padding.w * 2 + total_pad % 2 != total_pad;
  }
#else
  (void)args;
  (void)params;
#endif
  return false;
}

}  // namespace

void conv2d_out(
    CallContext& context,
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
  const bool direct = mve_one_by_n_cannot_pad(args, params);
  if (context.checks()) {
    const cortex_m_nn_conv2d_prepared derived{
        params, args.input_dims, args.filter_dims, args.bias_dims, args.output_dims, direct};
    if (!context.prepared_agrees(
            "conv2d", CORTEX_M_NN_PREPARED_CONV2D, &derived, sizeof(derived))) {
      return;
    }
  }
  cmsis_nn_context buffer;
  const auto required = [&] {
    return direct ? arm_convolve_s8_get_buffer_size(&args.input_dims, &args.filter_dims)
                  : arm_convolve_wrapper_s8_get_buffer_size(
                        &params, &args.input_dims, &args.filter_dims, &args.output_dims);
  };
  if (scratch_context(context, "conv2d", scratch, required, &buffer) && context.computes()) {
    check_status(
        context,
        "conv2d",
        direct ? call_conv_s8(convolve_s8, args, params, &buffer)
               : call_conv_s8(arm_convolve_wrapper_s8, args, params, &buffer));
  }
}

void conv2d_prepared(CallContext& context, EValue** args) {
  const auto& p = *static_cast<const cortex_m_nn_conv2d_prepared*>(context.prepared());
  const auto convolve = p.direct ? convolve_s8 : arm_convolve_wrapper_s8;
  check_status(context, "conv2d", call_prepared_conv_s8<conv2d_args>(convolve, p, args));
}

}  // namespace native
}  // namespace cortex_m_nn
