// cortex_m_nn::conv2d.out, one function per case (operators.yaml): conv2d_out →
// arm_convolve_wrapper_s8 (NHWC int8, OHWI weights, per-channel requantization);
// conv2d_int16_out (an int16 input) → arm_convolve_wrapper_s16, int64 bias; conv2d_int4_out
// (int4 weights: uint8, packed pairs) → arm_convolve_wrapper_s4; conv2d_rows_out (path 1) →
// arm_convolve_1x1_s8; conv2d_pointwise_out (path 2) → our compute::pointwise_conv_s8 and
// conv2d_window_out (path 3) → our compute::window_conv_s8 (kernels/compute). Grouped when
// the weight has
// fewer channels than the input (CMSIS-NN's convention: groups = input channels / weight
// channels); the wrapper then calls arm_convolve_s8, which computes groups on every ISA. An
// image links only the cases its program calls. Checks and arguments: cortex_m_nn/conv_common.h.
// Reference: python/cortex_m_nn/ops/conv2d.py.
#include "arm_nnsupportfunctions.h"
#include "cortex_m_nn/compute.h"
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

// The wrapper sends a 1xN convolution to arm_convolve_1_x_n_s8, whose MVE code fails unless
// 2 * pad + total % 2 == total (total: the padding out's length implies) and computes three
// sections from buffers it fills: the left-padded windows from `pad` pads and the first `k`
// inputs, the unpadded ones from the input, the right-padded ones from the last `k - 1` inputs
// and pads. It is exact only when every window of a section reads inside its buffer and the
// first right-padded window starts k - 1 before the input's end (kernel 5, stride 2, padding 2
// on length 9 is not); otherwise this kernel calls arm_convolve_s8 directly. Mirrored by
// python/cortex_m_nn/embed/prepared.py (mve_one_by_n_inexact), in C's integer arithmetic.
#if defined(ARM_MATH_MVEI)
bool one_by_n_exact(int32_t in_w, int32_t k, int32_t out_w, int32_t stride, int32_t pad) {
  const int32_t total = (out_w - 1) * stride + k - in_w;
  const int32_t asym = total % 2;
  if (pad * 2 + asym != total) {
    return false;  // CMSIS-NN fails the call
  }
  const int32_t right = pad + asym != 0 ? MAX(1, (pad + asym + stride - 1) / stride) : 0;
  const int32_t left = pad != 0 ? MAX(1, (pad + stride - 1) / stride) : 0;
  const int32_t middle = MAX(out_w - (right + left), 0);
  if (right + middle + left != out_w) {
    return true;  // CMSIS-NN calls arm_convolve_s8 itself
  }
  if (k > in_w || (left != 0 && (left - 1) * stride - pad + k > in_w)) {
    return false;  // the left section copies k inputs; its windows end inside the input
  }
  if (middle != 0 && (left * stride - pad < 0 || (left + middle - 1) * stride - pad + k > in_w)) {
    return false;
  }
  if (right != 0) {
    const int32_t first = (left + middle) * stride - pad;
    const int32_t pads = asym != 0 ? right : pad;
    return first + k - 1 == in_w && (right - 1) * stride + 1 <= pads;
  }
  return true;
}
#endif

bool mve_one_by_n_inexact(const ConvArgs& args, const cmsis_nn_conv_params& params) {
#if defined(ARM_MATH_MVEI)
  if (!arm_nn_is_convolve_1x1(&params, &args.input_dims, &args.filter_dims) &&
      arm_nn_is_convolve_1_x_n(&params, &args.input_dims, &args.filter_dims)) {
    return !one_by_n_exact(
        args.input_dims.w, args.filter_dims.w, args.output_dims.w, params.stride.w,
        params.padding.w);
  }
#else
  (void)args;
  (void)params;
#endif
  return false;
}

// The int16 case: arm_convolve_wrapper_s16 (which only calls arm_convolve_s16), int64 bias,
// unprepared; the checks are check_conv's.
void conv2d_s16(CallContext& context, ConvArgs& args, Tensor& scratch) {
  const auto params = args.params<cmsis_nn_conv_params>();
  cmsis_nn_context buffer;
  const auto required = [&] {
    return arm_convolve_wrapper_s16_get_buffer_size(
        &params, &args.input_dims, &args.filter_dims, &args.output_dims);
  };
  if (!unprepared_scratch(context, "conv2d", scratch, required, &buffer)) {
    return;
  }
  const ConvTensors& t = *args.tensors;
  const cmsis_nn_bias_data bias{t.bias.const_data_ptr<int64_t>(), false};
  check_status(
      context, "conv2d",
      arm_convolve_wrapper_s16(
          &buffer, &params, &args.quant, &args.input_dims, t.input.const_data_ptr<int16_t>(),
          &args.filter_dims, t.weight.const_data_ptr<int8_t>(), &args.bias_dims, &bias,
          &args.output_dims, t.out.mutable_data_ptr<int16_t>()));
}

// What the s4 wrapper calls for a convolution that is neither 1x1 nor 1xN: on MVE
// arm_convolve_even_s4 when KH * KW * Cin is even (always here: int4 weights have an even Cin),
// else arm_convolve_s4: the wrapper's own choice for such a convolution, and its buffer.
decltype(&arm_convolve_s4) general_s4(const ConvArgs& args) {
#if defined(ARM_MATH_MVEI)
  if ((args.filter_dims.h * args.filter_dims.w * args.input_dims.c) % 2 == 0) {
    return arm_convolve_even_s4;
  }
#else
  (void)args;
#endif
  return arm_convolve_s4;
}

// The int4 case (packed weights, int8 activations), unprepared: arm_convolve_wrapper_s4, but a
// 1xN convolution calls arm_convolve_s4 itself. The wrapper's 1xN path is
// arm_convolve_1_x_n_s4, whose MVE code returns a failure for some shapes it does not compute
// and never falls back (docs/int4.md); off MVE it only calls arm_convolve_s4. So a 1xN one
// takes the wrapper's general path (general_s4) here. Mirrored by
// python/cortex_m_nn/lower/scratch.py.
void conv2d_s4(CallContext& context, ConvArgs& args, Tensor& scratch) {
  const auto params = args.params<cmsis_nn_conv_params>();
  const bool direct = !arm_nn_is_convolve_1x1(&params, &args.input_dims, &args.filter_dims) &&
      arm_nn_is_convolve_1_x_n(&params, &args.input_dims, &args.filter_dims);
  cmsis_nn_context buffer;
  const auto required = [&] {
    // the general path's size, asked of the wrapper with a dilation that steers it there (the
    // getter reads no dilation)
    cmsis_nn_conv_params sizing = params;
    sizing.dilation.w = direct ? 2 : sizing.dilation.w;
    return arm_convolve_wrapper_s4_get_buffer_size(
        &sizing, &args.input_dims, &args.filter_dims, &args.output_dims);
  };
  if (unprepared_scratch(context, "conv2d", scratch, required, &buffer)) {
    check_status(
        context, "conv2d",
        direct ? call_conv_s8(general_s4(args), args, params, &buffer)
               : call_conv_s8(arm_convolve_wrapper_s4, args, params, &buffer));
  }
}

// What every case does first: its checks (unless the call is proven) and CMSIS-NN's arguments.
template <ConvCase kCase>
bool prepare_conv2d(CallContext& context, const ConvTensors& tensors, IntArrayRef stride,
                    IntArrayRef padding, IntArrayRef dilation, const ConvQuant& quant,
                    ConvArgs* args) {
  return prepare_conv<kCase>(context, "conv2d", tensors, ConvWeight::kGroupedOhwi, quant, args) &&
      prepare_window(context, "conv2d", stride, padding, dilation, args);
}


// The unprepared cases: int16 activations (conv2d_s16) or int4 weights (conv2d_s4).
template <ConvCase kCase>
void conv2d_unprepared(CallContext& context, const ConvTensors& tensors, IntArrayRef stride,
                       IntArrayRef padding, IntArrayRef dilation, const ConvQuant& quant,
                       Tensor& scratch) {
  ConvArgs args;
  if (prepare_conv2d<kCase>(context, tensors, stride, padding, dilation, quant, &args)) {
    if constexpr (kCase == ConvCase::kInt16) {
      conv2d_s16(context, args, scratch);
    } else {
      conv2d_s4(context, args, scratch);
    }
  }
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
    int64_t path,
    int64_t scratch_bytes,
    Tensor& out,
    Tensor& scratch) {
  (void)scratch_bytes;  // the planned scratch tensor carries its size
  const ConvTensors tensors{input, weight, bias, multipliers, shifts, out};
  ConvArgs args;
  if (!check_path(context, "conv2d", path, kWrapperPath) ||
      !prepare_conv2d<ConvCase::kInt8>(
          context, tensors, stride, padding, dilation,
          {input_offset, output_offset, activation_min, activation_max}, &args)) {
    return;
  }
  const auto params = args.params<cmsis_nn_conv_params>();
  const bool direct = mve_one_by_n_inexact(args, params);
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

void conv2d_int16_out(
    CallContext& context, const Tensor& input, const Tensor& weight, const Tensor& bias,
    const Tensor& multipliers, const Tensor& shifts, IntArrayRef stride, IntArrayRef padding,
    IntArrayRef dilation, int64_t input_offset, int64_t output_offset, int64_t activation_min,
    int64_t activation_max, int64_t path, int64_t scratch_bytes, Tensor& out, Tensor& scratch) {
  (void)scratch_bytes;
  if (!check_path(context, "conv2d", path, kWrapperPath)) {
    return;
  }
  conv2d_unprepared<ConvCase::kInt16>(
      context, {input, weight, bias, multipliers, shifts, out}, stride, padding, dilation,
      {input_offset, output_offset, activation_min, activation_max}, scratch);
}

void conv2d_int4_out(
    CallContext& context, const Tensor& input, const Tensor& weight, const Tensor& bias,
    const Tensor& multipliers, const Tensor& shifts, IntArrayRef stride, IntArrayRef padding,
    IntArrayRef dilation, int64_t input_offset, int64_t output_offset, int64_t activation_min,
    int64_t activation_max, int64_t path, int64_t scratch_bytes, Tensor& out, Tensor& scratch) {
  (void)scratch_bytes;
  if (!check_path(context, "conv2d", path, kWrapperPath)) {
    return;
  }
  conv2d_unprepared<ConvCase::kInt4>(
      context, {input, weight, bias, multipliers, shifts, out}, stride, padding, dilation,
      {input_offset, output_offset, activation_min, activation_max}, scratch);
}

namespace {

// What a path case's function computes: a 1x1 convolution without padding or dilation (rows),
// of stride 1 too (pointwise), or any window (window; off MVE of a multiple of 4 input
// channels); none grouped.
enum class Computes { kOneByOne, kUnitOneByOne, kWindow };

bool computes(Computes what, const ConvArgs& args, const cmsis_nn_conv_params& params,
              IntArrayRef padding) {
  if (args.filter_dims.c != args.input_dims.c) {
    return false;
  }
  if (what == Computes::kWindow) {
#if defined(ARM_MATH_MVEI)
    return true;
#else
    return args.input_dims.c % 4 == 0;
#endif
  }
  const bool one_by_one = args.filter_dims.h == 1 && args.filter_dims.w == 1 &&
                          pads_at_most(padding, 0) && params.dilation.h == 1 &&
                          params.dilation.w == 1;
  const bool unit = params.stride.h == 1 && params.stride.w == 1;
  return one_by_one && (what == Computes::kOneByOne || unit);
}

// The arguments of a path case after its tensors.
struct PathCall {
  IntArrayRef stride;
  IntArrayRef padding;
  IntArrayRef dilation;
  ConvQuant quant;
  int64_t path;
  Tensor& scratch;
};

// A path case (unprepared: its calls carry no prepared entry): the path must be the case's
// (`runs`), the shared checks, then unless the call is proven what `what` names or the
// refusal `why`, then `function` with the planned scratch, `required` bytes of it at least.
template <typename Function>
void path_case(CallContext& context, const ConvTensors& tensors, const PathCall& call,
               int64_t runs, Computes what, const char* why, Function function,
               int32_t (*required)(const ConvArgs&)) {
  ConvArgs args;
  if (!check_path(context, "conv2d", call.path, runs) ||
      !prepare_conv2d<ConvCase::kInt8>(context, tensors, call.stride, call.padding,
                                       call.dilation, call.quant, &args)) {
    return;
  }
  const auto params = args.params<cmsis_nn_conv_params>();
  if (context.checks() && !computes(what, args, params, call.padding)) {
    refuse(context, "conv2d", why);
    return;
  }
  cmsis_nn_context buffer;
  if (unprepared_scratch(context, "conv2d", call.scratch, [&] { return required(args); },
                         &buffer)) {
    check_status(context, "conv2d", call_conv_s8(function, args, params, &buffer));
  }
}

int32_t no_buffer(const ConvArgs&) { return 0; }

int32_t pointwise_buffer(const ConvArgs& args) {
  return compute::pointwise_conv_s8_get_buffer_size(&args.input_dims);
}

int32_t window_buffer(const ConvArgs& args) {
  return compute::window_conv_s8_get_buffer_size(&args.filter_dims);
}

}  // namespace

// The rows case (path 1): arm_convolve_1x1_s8, one output row at a time, for an int8 1x1
// convolution without padding, dilation or groups; no buffer. Its output may take the bytes of
// input rows already read (python/cortex_m_nn/plan/paths.py), where the DSP and scalar
// wrapper's arm_convolve_1x1_s8_fast walks the image once per pair of output channels.
void conv2d_rows_out(
    CallContext& context, const Tensor& input, const Tensor& weight, const Tensor& bias,
    const Tensor& multipliers, const Tensor& shifts, IntArrayRef stride, IntArrayRef padding,
    IntArrayRef dilation, int64_t input_offset, int64_t output_offset, int64_t activation_min,
    int64_t activation_max, int64_t path, int64_t scratch_bytes, Tensor& out, Tensor& scratch) {
  (void)scratch_bytes;
  path_case(context, {input, weight, bias, multipliers, shifts, out},
            {stride, padding, dilation,
             {input_offset, output_offset, activation_min, activation_max}, path, scratch},
            kOtherPath, Computes::kOneByOne,
            "path 1 (arm_convolve_1x1_s8) computes a 1x1 convolution without padding, "
            "dilation or groups",
            arm_convolve_1x1_s8, no_buffer);
}

// The pointwise case (path 2): our compute::pointwise_conv_s8, for an int8 1x1 convolution of
// stride 1 without padding, dilation or groups; up to 64 input channels no buffer, else one
// holding a pair of pixels' inputs widened to int16, or on MVE a quad's gathered
// (python/cortex_m_nn/core/compute.py).
void conv2d_pointwise_out(
    CallContext& context, const Tensor& input, const Tensor& weight, const Tensor& bias,
    const Tensor& multipliers, const Tensor& shifts, IntArrayRef stride, IntArrayRef padding,
    IntArrayRef dilation, int64_t input_offset, int64_t output_offset, int64_t activation_min,
    int64_t activation_max, int64_t path, int64_t scratch_bytes, Tensor& out, Tensor& scratch) {
  (void)scratch_bytes;
  path_case(context, {input, weight, bias, multipliers, shifts, out},
            {stride, padding, dilation,
             {input_offset, output_offset, activation_min, activation_max}, path, scratch},
            kPointwisePath, Computes::kUnitOneByOne,
            "path 2 (pointwise_conv_s8) computes a 1x1 convolution of stride 1 without "
            "padding, dilation or groups",
            compute::pointwise_conv_s8, pointwise_buffer);
}

// The window case (path 3): our compute::window_conv_s8, for an int8 convolution without groups
// (off MVE of a multiple of 4 input channels); its buffer holds a pair of output pixels'
// windows widened to int16, or on MVE a quad's (python/cortex_m_nn/core/compute.py,
// window_buffer_bytes).
void conv2d_window_out(
    CallContext& context, const Tensor& input, const Tensor& weight, const Tensor& bias,
    const Tensor& multipliers, const Tensor& shifts, IntArrayRef stride, IntArrayRef padding,
    IntArrayRef dilation, int64_t input_offset, int64_t output_offset, int64_t activation_min,
    int64_t activation_max, int64_t path, int64_t scratch_bytes, Tensor& out, Tensor& scratch) {
  (void)scratch_bytes;
  path_case(context, {input, weight, bias, multipliers, shifts, out},
            {stride, padding, dilation,
             {input_offset, output_offset, activation_min, activation_max}, path, scratch},
            kWindowPath, Computes::kWindow,
            "path 3 (window_conv_s8) computes a convolution without groups (off MVE of a "
            "multiple of 4 input channels)",
            compute::window_conv_s8, window_buffer);
}

void conv2d_prepared(CallContext& context, EValue** args) {
  const auto& p = *static_cast<const cortex_m_nn_conv2d_prepared*>(context.prepared());
  const auto convolve = p.direct ? convolve_s8 : arm_convolve_wrapper_s8;
  check_status(context, "conv2d", call_prepared_conv_s8<conv2d_args>(convolve, p, args));
}

}  // namespace native
}  // namespace cortex_m_nn
