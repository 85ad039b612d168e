// cortex_m_nn::depthwise_conv2d.out, one function per case (operators.yaml):
// depthwise_conv2d_out → arm_depthwise_conv_wrapper_s8 (NHWC int8, weights [1, KH, KW, Cout],
// per-channel requantization); depthwise_conv2d_int16_out (an int16 input) →
// arm_depthwise_conv_wrapper_s16, int64 bias; depthwise_conv2d_int4_out (int4 weights: uint8,
// packed pairs) → arm_depthwise_conv_wrapper_s4; depthwise_conv2d_three_by_three_out (path 1)
// → arm_depthwise_conv_3x3_s8; depthwise_conv2d_lanes_out (path 2) → our
// compute::depthwise_conv_lanes_s8 (kernels/compute). Checks and arguments:
// cortex_m_nn/conv_common.h. Reference: python/cortex_m_nn/ops/depthwise_conv2d.py.
#include "cortex_m_nn/compute.h"
#include "cortex_m_nn/conv_common.h"
#include "cortex_m_nn_operators.h"

namespace cortex_m_nn {
namespace native {

namespace {
// The depthwise shapes and window, then prepare_window: one input channel is an ordinary
// convolution (the compiler never makes it depthwise), which CMSIS-NN's MVE wrapper would
// convert, bypassing op_conv2d.cpp's 1xN checks; arm_depthwise_conv_3x3_s8 (the wrapper's 3x3
// path off MVE) reads a window's middle column unchecked, so it computes an end padded by at
// most 1 (python/cortex_m_nn/ops/depthwise_conv2d.py checks the same); `any_pads`: the lanes
// case, which pads any end.
bool check_depthwise(
    CallContext& context,
    const Tensor& input,
    const Tensor& weight,
    IntArrayRef stride,
    IntArrayRef padding,
    IntArrayRef dilation,
    int64_t depth_multiplier,
    ConvArgs* args,
    bool any_pads) {
  if (context.checks() &&
      !(weight.size(0) == 1 && depth_multiplier >= 1 && input.size(3) >= 2 &&
        input.size(3) * depth_multiplier == weight_channels(weight, input))) {
    ET_LOG(Error, "cortex_m_nn::depthwise_conv2d: shapes disagree: input channels %d (at least "
                  "2) x multiplier %d, weight channels %d",
           (int)input.size(3), (int)depth_multiplier, (int)weight_channels(weight, input));
    context.fail(Error::InvalidArgument);
    return false;
  }
  if (!prepare_window(context, "depthwise_conv2d", stride, padding, dilation, args)) {
    return false;
  }
  const bool three_by_three = args->filter_dims.h == 3 && args->filter_dims.w == 3 &&
      depth_multiplier == 1 && dilation[0] == 1 && dilation[1] == 1 &&
      !is_type(input, ScalarType::Short) && !is_int4_weight(weight);  // the s8 kernel's path
  if (context.checks() && !any_pads && padding.size() == 4 && three_by_three &&
      (padding[2] > 1 || padding[3] > 1)) {
    return refuse(
        context, "depthwise_conv2d", "a 3x3 depthwise convolution pads each end by at most 1");
  }
  return true;
}
// The int16 case: arm_depthwise_conv_wrapper_s16 (int64 bias), unprepared; the checks are
// check_conv's.
void depthwise_s16(CallContext& context, const ConvArgs& args,
                   const cmsis_nn_dw_conv_params& params, Tensor& scratch) {
  cmsis_nn_context buffer;
  const auto required = [&] {
    return arm_depthwise_conv_wrapper_s16_get_buffer_size(
        &params, &args.input_dims, &args.filter_dims, &args.output_dims);
  };
  if (!unprepared_scratch(context, "depthwise_conv2d", scratch, required, &buffer)) {
    return;
  }
  const ConvTensors& t = *args.tensors;
  check_status(
      context, "depthwise_conv2d",
      arm_depthwise_conv_wrapper_s16(
          &buffer, &params, &args.quant, &args.input_dims, t.input.const_data_ptr<int16_t>(),
          &args.filter_dims, t.weight.const_data_ptr<int8_t>(), &args.bias_dims,
          t.bias.const_data_ptr<int64_t>(), &args.output_dims, t.out.mutable_data_ptr<int16_t>()));
}

// On MVE the wrapper's fast path (arm_depthwise_conv_s4_opt) decodes weight nibbles with the
// MVE predicate constant 0x0F0F, which arm-none-eabi-gcc 12.2 compiles as 0xFFFF: every odd
// channel then reads its even neighbour's nibble (docs/int4.md, defect 5). So an MVE build
// calls the generic kernel, arm_depthwise_conv_s4 (one C loop for every ISA, no buffer; exact
// for an even channel count, which check_conv_s4 requires). Mirrored by
// python/cortex_m_nn/lower/scratch.py.
#if defined(ARM_MATH_MVEI)
constexpr bool kGenericS4Depthwise = true;
#else
constexpr bool kGenericS4Depthwise = false;
#endif

// The int4 case: arm_depthwise_conv_wrapper_s4 (packed weights), unprepared; the checks are
// check_conv's.
void depthwise_s4(CallContext& context, const ConvArgs& args,
                  const cmsis_nn_dw_conv_params& params, Tensor& scratch) {
  cmsis_nn_context buffer;
  const auto required = [&] {
    return kGenericS4Depthwise ? 0
                               : arm_depthwise_conv_wrapper_s4_get_buffer_size(
                                     &params, &args.input_dims, &args.filter_dims,
                                     &args.output_dims);
  };
  if (unprepared_scratch(context, "depthwise_conv2d", scratch, required, &buffer)) {
    check_status(context, "depthwise_conv2d",
                 kGenericS4Depthwise
                     ? call_conv_s8(arm_depthwise_conv_s4, args, params, &buffer)
                     : call_conv_s8(arm_depthwise_conv_wrapper_s4, args, params, &buffer));
  }
}

// What every case does first: its checks (unless the call is proven) and CMSIS-NN's arguments.
template <ConvCase kCase>
bool prepare_depthwise(CallContext& context, const ConvTensors& tensors, IntArrayRef stride,
                       IntArrayRef padding, IntArrayRef dilation, int64_t depth_multiplier,
                       const ConvQuant& quant, ConvArgs* args, cmsis_nn_dw_conv_params* params,
                       bool any_pads = false) {
  if (!prepare_conv<kCase>(
          context, "depthwise_conv2d", tensors, ConvWeight::kDepthwise, quant, args) ||
      !check_depthwise(context, tensors.input, tensors.weight, stride, padding, dilation,
                       depth_multiplier, args, any_pads)) {
    return false;
  }
  *params = args->params<cmsis_nn_dw_conv_params>();
  params->ch_mult = static_cast<int32_t>(depth_multiplier);
  return true;
}


// The unprepared cases: int16 activations (depthwise_s16) or int4 weights (depthwise_s4).
template <ConvCase kCase>
void depthwise_unprepared(CallContext& context, const ConvTensors& tensors, IntArrayRef stride,
                          IntArrayRef padding, IntArrayRef dilation, int64_t depth_multiplier,
                          const ConvQuant& quant, Tensor& scratch) {
  ConvArgs args;
  cmsis_nn_dw_conv_params params;
  if (prepare_depthwise<kCase>(context, tensors, stride, padding, dilation, depth_multiplier,
                               quant, &args, &params)) {
    if constexpr (kCase == ConvCase::kInt16) {
      depthwise_s16(context, args, params, scratch);
    } else {
      depthwise_s4(context, args, params, scratch);
    }
  }
}

}  // namespace

void depthwise_conv2d_out(
    CallContext& context,
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
    int64_t path,
    int64_t scratch_bytes,
    Tensor& out,
    Tensor& scratch) {
  (void)scratch_bytes;
  const ConvTensors tensors{input, weight, bias, multipliers, shifts, out};
  ConvArgs args;
  cmsis_nn_dw_conv_params params;
  if (!check_path(context, "depthwise_conv2d", path, kWrapperPath) ||
      !prepare_depthwise<ConvCase::kInt8>(context, tensors, stride, padding, dilation, depth_multiplier,
                         {input_offset, output_offset, activation_min, activation_max}, &args,
                         &params)) {
    return;
  }
  if (context.checks()) {
    const cortex_m_nn_depthwise_conv2d_prepared derived{
        params, args.input_dims, args.filter_dims, args.bias_dims, args.output_dims};
    if (!context.prepared_agrees(
            "depthwise_conv2d", CORTEX_M_NN_PREPARED_DEPTHWISE_CONV2D, &derived,
            sizeof(derived))) {
      return;
    }
  }
  cmsis_nn_context buffer;
  const auto required = [&] {
    return arm_depthwise_conv_wrapper_s8_get_buffer_size(
        &params, &args.input_dims, &args.filter_dims, &args.output_dims);
  };
  if (scratch_context(context, "depthwise_conv2d", scratch, required, &buffer) &&
      context.computes()) {
    check_status(
        context,
        "depthwise_conv2d",
        call_conv_s8(arm_depthwise_conv_wrapper_s8, args, params, &buffer));
  }
}

void depthwise_conv2d_int16_out(
    CallContext& context, const Tensor& input, const Tensor& weight, const Tensor& bias,
    const Tensor& multipliers, const Tensor& shifts, IntArrayRef stride, IntArrayRef padding,
    IntArrayRef dilation, int64_t depth_multiplier, int64_t input_offset, int64_t output_offset,
    int64_t activation_min, int64_t activation_max, int64_t path, int64_t scratch_bytes,
    Tensor& out, Tensor& scratch) {
  (void)scratch_bytes;
  if (!check_path(context, "depthwise_conv2d", path, kWrapperPath)) {
    return;
  }
  depthwise_unprepared<ConvCase::kInt16>(
      context, {input, weight, bias, multipliers, shifts, out}, stride, padding, dilation,
      depth_multiplier, {input_offset, output_offset, activation_min, activation_max}, scratch);
}

void depthwise_conv2d_int4_out(
    CallContext& context, const Tensor& input, const Tensor& weight, const Tensor& bias,
    const Tensor& multipliers, const Tensor& shifts, IntArrayRef stride, IntArrayRef padding,
    IntArrayRef dilation, int64_t depth_multiplier, int64_t input_offset, int64_t output_offset,
    int64_t activation_min, int64_t activation_max, int64_t path, int64_t scratch_bytes,
    Tensor& out, Tensor& scratch) {
  (void)scratch_bytes;
  if (!check_path(context, "depthwise_conv2d", path, kWrapperPath)) {
    return;
  }
  depthwise_unprepared<ConvCase::kInt4>(
      context, {input, weight, bias, multipliers, shifts, out}, stride, padding, dilation,
      depth_multiplier, {input_offset, output_offset, activation_min, activation_max}, scratch);
}

namespace {

// A path case's arguments after its tensors.
struct PathCall {
  IntArrayRef stride;
  IntArrayRef padding;
  IntArrayRef dilation;
  int64_t depth_multiplier;
  ConvQuant quant;
  int64_t path;
  Tensor& scratch;
};

// What a path case does, unprepared: the path must be the case's (`runs`), the shared
// depthwise checks, then unless the call is proven `computes(args, params)` or the refusal
// `why`, then `function` with the planned scratch: none required (arm_depthwise_conv_3x3_s8
// takes none; depthwise_conv_lanes_s8 sizes its tile of output rows by it, and gathers each
// window on the stack without one).
template <typename Computes, typename Function>
void path_case(CallContext& context, const ConvTensors& tensors, const PathCall& call,
               int64_t runs, Computes computes, const char* why, Function function) {
  ConvArgs args;
  cmsis_nn_dw_conv_params params;
  if (!check_path(context, "depthwise_conv2d", call.path, runs) ||
      !prepare_depthwise<ConvCase::kInt8>(context, tensors, call.stride, call.padding,
                                          call.dilation, call.depth_multiplier, call.quant,
                                          &args, &params, runs == kLanesPath)) {
    return;
  }
  if (context.checks() && !computes(args, params)) {
    refuse(context, "depthwise_conv2d", why);
    return;
  }
  cmsis_nn_context buffer;
  if (unprepared_scratch(context, "depthwise_conv2d", call.scratch, [] { return 0; }, &buffer)) {
    check_status(context, "depthwise_conv2d", call_conv_s8(function, args, params, &buffer));
  }
}

bool three_by_three(const ConvArgs& args, const cmsis_nn_dw_conv_params& params) {
  return args.filter_dims.h == 3 && args.filter_dims.w == 3 && params.ch_mult == 1 &&
         params.dilation.h == 1 && params.dilation.w == 1;
}

}  // namespace

// The three_by_three case (path 1): arm_depthwise_conv_3x3_s8 on every ISA, for an int8 3x3
// call of multiplier 1, no dilation, pads of at most 1 and one image (the function reads no
// batch); no buffer, where MVE's wrapper takes arm_depthwise_conv_s8_opt and its
// 4 x 124 x 9-byte buffer (python/cortex_m_nn/plan/paths.py).
void depthwise_conv2d_three_by_three_out(
    CallContext& context, const Tensor& input, const Tensor& weight, const Tensor& bias,
    const Tensor& multipliers, const Tensor& shifts, IntArrayRef stride, IntArrayRef padding,
    IntArrayRef dilation, int64_t depth_multiplier, int64_t input_offset, int64_t output_offset,
    int64_t activation_min, int64_t activation_max, int64_t path, int64_t scratch_bytes,
    Tensor& out, Tensor& scratch) {
  (void)scratch_bytes;
  const auto computes = [&](const ConvArgs& args, const cmsis_nn_dw_conv_params& params) {
    return three_by_three(args, params) && pads_at_most(padding, 1) && args.input_dims.n == 1;
  };
  path_case(context, {input, weight, bias, multipliers, shifts, out},
            {stride, padding, dilation, depth_multiplier,
             {input_offset, output_offset, activation_min, activation_max}, path, scratch},
            kOtherPath, computes,
            "path 1 (arm_depthwise_conv_3x3_s8) computes a 3x3 call of multiplier 1, no "
            "dilation, pads of at most 1 and one image",
            arm_depthwise_conv_3x3_s8);
}

// The lanes case (path 2): our depthwise_conv_lanes_s8, for an int8 3x3 call of multiplier 1,
// no dilation, stride 1 or 2 across, a multiple of 4 channels and 4-byte aligned tensors, any
// padding and batch; the planned scratch sets the tile of output rows (none: windows gathered
// on the stack; python/cortex_m_nn/core/compute.py).
void depthwise_conv2d_lanes_out(
    CallContext& context, const Tensor& input, const Tensor& weight, const Tensor& bias,
    const Tensor& multipliers, const Tensor& shifts, IntArrayRef stride, IntArrayRef padding,
    IntArrayRef dilation, int64_t depth_multiplier, int64_t input_offset, int64_t output_offset,
    int64_t activation_min, int64_t activation_max, int64_t path, int64_t scratch_bytes,
    Tensor& out, Tensor& scratch) {
  (void)scratch_bytes;
  const auto aligned = [](const Tensor& t) {  // an empty scratch is not read: any address
    return t.numel() == 0 || reinterpret_cast<uintptr_t>(t.const_data_ptr()) % 4 == 0;
  };
  const auto computes = [&](const ConvArgs& args, const cmsis_nn_dw_conv_params& params) {
    return three_by_three(args, params) && (params.stride.w == 1 || params.stride.w == 2) &&
           args.input_dims.c % 4 == 0 && aligned(input) && aligned(scratch);
  };
  path_case(context, {input, weight, bias, multipliers, shifts, out},
            {stride, padding, dilation, depth_multiplier,
             {input_offset, output_offset, activation_min, activation_max}, path, scratch},
            kLanesPath, computes,
            "path 2 (depthwise_conv_lanes_s8) computes a 3x3 call of multiplier 1, no "
            "dilation, stride 1 or 2 across, a multiple of 4 channels and 4-byte aligned input "
            "and (if any) scratch",
            compute::depthwise_conv_lanes_s8);
}

void depthwise_conv2d_prepared(CallContext& context, EValue** args) {
  const auto& p = *static_cast<const cortex_m_nn_depthwise_conv2d_prepared*>(context.prepared());
  check_status(
      context,
      "depthwise_conv2d",
      call_prepared_conv_s8<depthwise_conv2d_args>(arm_depthwise_conv_wrapper_s8, p, args));
}

}  // namespace native
}  // namespace cortex_m_nn
