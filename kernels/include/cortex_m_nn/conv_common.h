// What the convolution kernels (conv2d, depthwise_conv2d, transpose_conv2d) share: one check
// of the tensors and quantization, one of the window geometry, both filling one ConvArgs, and
// one call of a CMSIS-NN convolution from it. Each kernel adds only its own checks, its
// CMSIS-NN params struct and its buffers. A new dtype of these operators (int16 activations,
// int4 weights) is a case in the same kernel over the same ConvArgs, not a new file: see
// docs/adding-an-operator.md, "A new dtype of an existing operator".
#pragma once

#include <cstdint>

#include "cortex_m_nn/kernel_checks.h"
#include "cortex_m_nn/window.h"

namespace cortex_m_nn {
namespace native {

// A convolution kernel's case (operators.yaml): int8 activations and weights, int16
// activations, or int4 weights. Each case function checks and prepares for its own dtypes only,
// so an image without int16 or int4 calls carries none of their checks.
enum class ConvCase { kInt8, kInt16, kInt4 };

// Where a convolution's weight keeps its output channels.
enum class ConvWeight {
  kOhwi,         // [Cout, KH, KW, Cin]: transpose_conv2d
  kGroupedOhwi,  // [Cout, KH, KW, Cin / groups], groups = Cin / weight's C: conv2d
  kDepthwise,    // [1, KH, KW, Cout]: depthwise_conv2d
};

// Whether the weight holds int4 values, two per byte (uint8: the int4 case, CMSIS-NN's _s4
// kernels; python/cortex_m_nn/ops/int4.py): conv2d's as [Cout, KH, KW * Cin / 2] (no groups),
// depthwise's as [1, KH, KW, Cout / 2].
inline bool is_int4_weight(const Tensor& weight) {
  return is_type(weight, ScalarType::Byte);
}

// The weight's logical innermost dim (its channels: Cin / groups, or depthwise's Cout); an
// int4 conv2d weight's: the input's channels, checked by check_conv_s4.
inline int32_t weight_channels(const Tensor& weight, const Tensor& input) {
  const int32_t stored = static_cast<int32_t>(weight.size(weight.dim() - 1));
  if (!is_int4_weight(weight)) {
    return stored;
  }
  return weight.dim() == 3 ? static_cast<int32_t>(input.size(3)) : stored * 2;
}

// Whether the input's and the weight's channels agree for `layout`: equal (kOhwi), or
// (kGroupedOhwi, CMSIS-NN's grouped convolution) Cin and Cout both in whole groups of
// Cin / weight's C.
inline bool channels_agree(const Tensor& input, const Tensor& weight, ConvWeight layout) {
  const int32_t c_in = input.size(3);  // sizes are 32-bit: no 64-bit division per call
  const int32_t per_group = weight_channels(weight, input);
  switch (layout) {
    case ConvWeight::kOhwi:
      return c_in == per_group;
    case ConvWeight::kGroupedOhwi:
      return per_group > 0 && c_in > 0 && c_in % per_group == 0 &&
             weight.size(0) % (c_in / per_group) == 0;
    case ConvWeight::kDepthwise:
      return true;
  }
  return false;
}

// The tensors of one convolution call, as the kernel receives them.
struct ConvTensors {
  const Tensor& input;
  const Tensor& weight;
  const Tensor& bias;
  const Tensor& multipliers;
  const Tensor& shifts;
  Tensor& out;
};

// The quantization scalars of one convolution call.
struct ConvQuant {
  int64_t input_offset;
  int64_t output_offset;
  int64_t activation_min;
  int64_t activation_max;
};

// What CMSIS-NN's convolutions take besides their params struct and buffers. Not
// zero-initialised (that is a memset per call): prepare_conv and one of the window
// preparations set every field.
struct ConvArgs {
  const ConvTensors* tensors;
  int32_t input_offset;
  int32_t output_offset;
  cmsis_nn_activation activation;
  cmsis_nn_tile stride;
  cmsis_nn_tile padding;
  cmsis_nn_tile dilation;
  cmsis_nn_per_channel_quant_params quant;
  cmsis_nn_dims input_dims;
  cmsis_nn_dims filter_dims;
  cmsis_nn_dims bias_dims;
  cmsis_nn_dims output_dims;

  // A CMSIS-NN params struct (cmsis_nn_conv_params, cmsis_nn_dw_conv_params,
  // cmsis_nn_transpose_conv_params) with the fields they all have filled in.
  template <typename Params>
  Params params() const {
    Params p{};
    p.input_offset = input_offset;
    p.output_offset = output_offset;
    p.stride = stride;
    p.padding = padding;
    p.dilation = dilation;
    p.activation = activation;
    return p;
  }
};

// Input, weight and out 4-D int8 of one batch, weight in `layout` with out's channels (and
// input's, channels_agree), bias/multipliers/shifts int32 [Cout] (shifts in CMSIS-NN's range),
// offsets int32, activation range int8: checked unless the call is proven.
// The int16 case (an int16 input): zero offsets and shifts at most 14 (arm_nn_requantize_s64).
// conv2d (no groups): every output channel's int32 partial sums safe from wrapping (sum |w| *
// 2^15 < 2^31: CMSIS-NN adds the first 512 products, on non-MVE cores a lone pixel's all, in
// int32), and not the DSP kernel's defective odd-channel tail (more than 512 columns not a
// multiple of 4, odd Cout, two or more output pixels). depthwise: dims below 32768 (the
// generic s16 kernel counts them in 16 bits); its sums are exact (int64, or at most 511
// products in int32). Mirrors python/cortex_m_nn/ops/conv2d.py and depthwise_conv2d.py.
CORTEX_M_NN_CHECK_ONLY inline bool check_conv_s16(
    CallContext& context, const char* op, const ConvTensors& t, ConvWeight layout,
    const ConvQuant& q) {
  const bool depthwise = layout == ConvWeight::kDepthwise;
  if (layout == ConvWeight::kOhwi || (!depthwise && t.weight.size(3) != t.input.size(3)) ||
      q.input_offset != 0 || q.output_offset != 0) {
    return refuse(context, op,
                  "the int16 case is an ungrouped or depthwise convolution with zero offsets");
  }
  const int32_t* shifts = t.shifts.const_data_ptr<int32_t>();
  const int32_t c_out = static_cast<int32_t>(t.shifts.size(0));
  for (int32_t o = 0; o < c_out; ++o) {
    if (shifts[o] > 14) {
      return refuse(context, op, "int16 case: a shift above 14");
    }
  }
  if (depthwise) {
    const Tensor* tensors[] = {&t.input, &t.out};
    for (const Tensor* tensor : tensors) {
      for (ssize_t d = 0; d < 4; ++d) {
        if (tensor->size(d) > 32767) {
          return refuse(context, op, "int16 case: a dim above 32767");
        }
      }
    }
    return true;
  }
  const int64_t columns = t.weight.numel() / (c_out > 0 ? c_out : 1);
  const int8_t* w = t.weight.const_data_ptr<int8_t>();
  for (int32_t o = 0; o < c_out; ++o, w += columns) {
    int64_t sum = 0;
    for (int64_t i = 0; i < columns; ++i) {
      sum += w[i] < 0 ? -static_cast<int64_t>(w[i]) : w[i];
    }
    if (sum * 32768 >= (int64_t{1} << 31)) {
      return refuse(context, op,
                    "int16 case: weights whose int32 partial sums of int16 inputs could wrap");
    }
  }
  const int64_t pixels = static_cast<int64_t>(t.out.size(1)) * t.out.size(2);
  if (columns > 512 && columns % 4 != 0 && c_out % 2 == 1 && pixels >= 2) {
    return refuse(context, op,
                  "int16 case: more than 512 columns not a multiple of 4 with odd output "
                  "channels, which CMSIS-NN's DSP kernel miscomputes");
  }
  return true;
}

// The int4 case (a uint8 weight of packed pairs): int8 activations; conv2d without groups
// (arm_convolve_s4 reads Cin per window whatever the weight), its weight [Cout, KH, KW * Cin / 2]
// with KW * Cin even; depthwise [1, KH, KW, Cout / 2] with an even input channel count
// (CMSIS-NN's generic s4 depthwise reads wrong nibbles for an odd one: docs/int4.md); no
// transposed convolution (CMSIS-NN has no s4 one).
CORTEX_M_NN_CHECK_ONLY inline bool check_conv_s4(
    CallContext& context, const char* op, const ConvTensors& t, ConvWeight layout) {
  const int64_t c_in = t.input.size(3);
  bool ok = is_type(t.input, ScalarType::Char);
  if (layout == ConvWeight::kDepthwise) {
    ok = ok && has_layout(t.weight, ScalarType::Byte, 4) && c_in % 2 == 0;
  } else {
    ok = ok && layout == ConvWeight::kGroupedOhwi && has_layout(t.weight, ScalarType::Byte, 3) &&
        c_in > 0 && (2 * t.weight.size(2)) % c_in == 0;
  }
  return ok ||
      refuse(context, op,
             "int4 weights take int8 activations: an ungrouped convolution (weight uint8 "
             "[Cout, KH, KW * Cin / 2]), or a depthwise one with an even input channel count "
             "(uint8 [1, KH, KW, Cout / 2])");
}

// Checks a convolution's tensors and quantization for its case: int8 activations, or int16 ones
// (then check_conv_s16 too) with an int64 bias; an int8 weight, or a uint8 one of packed int4
// pairs (then check_conv_s4 too).
template <ConvCase kCase>
CORTEX_M_NN_CHECK_ONLY bool check_conv(
    CallContext& context,
    const char* op,
    const ConvTensors& t,
    ConvWeight layout,
    const ConvQuant& q) {
  constexpr bool s16 = kCase == ConvCase::kInt16;
  constexpr bool s4 = kCase == ConvCase::kInt4;
  const ScalarType activations = s16 ? ScalarType::Short : ScalarType::Char;
  if (!has_layout(t.input, activations, 4) || !has_layout(t.out, activations, 4) ||
      !(s4 || has_layout(t.weight, ScalarType::Char, 4))) {
    return refuse(context, op,
                  "input and out must be 4-D int8 (or both int16), weight 4-D int8 (or uint8: "
                  "int4 pairs)");
  }
  if constexpr (s4) {
    if (!check_conv_s4(context, op, t, layout)) {
      return false;
    }
  }
  const int64_t c_out =
      layout == ConvWeight::kDepthwise ? weight_channels(t.weight, t.input) : t.weight.size(0);
  if (!channels_agree(t.input, t.weight, layout) || t.out.size(3) != c_out || t.out.size(0) != t.input.size(0)) {
    ET_LOG(
        Error,
        "cortex_m_nn::%s: shapes disagree: input channels %d, weight [%d, %d, %d, ..], out "
        "channels %d",
        op, (int)t.input.size(3), (int)t.weight.size(0), (int)t.weight.size(1),
        (int)t.weight.size(2), (int)t.out.size(3));
    context.fail(Error::InvalidArgument);
    return false;
  }
  const ScalarType bias_type = s16 ? ScalarType::Long : ScalarType::Int;
  if (!has_layout(t.bias, bias_type, 1) || t.bias.size(0) != c_out ||
      !has_layout(t.multipliers, ScalarType::Int, 1) || t.multipliers.size(0) != c_out ||
      !has_layout(t.shifts, ScalarType::Int, 1) || t.shifts.size(0) != c_out) {
    ET_LOG(Error,
           "cortex_m_nn::%s: bias (int32, int64 for int16 activations), multipliers and shifts "
           "(int32) must be [%d]",
           op, (int)c_out);
    context.fail(Error::InvalidArgument);
    return false;
  }
  if (!are_shifts(t.shifts)) {
    return refuse(context, op, "a per-channel shift is outside [-31, 30]: the .pte is damaged");
  }
  const bool range = s16 ? is_int16_range(q.activation_min, q.activation_max)
                         : is_int8_range(q.activation_min, q.activation_max);
  if (!range || !fits_int32(q.input_offset) || !fits_int32(q.output_offset)) {
    ET_LOG(Error, "cortex_m_nn::%s: activation range [%d, %d] or offsets out of range", op,
           (int)q.activation_min, (int)q.activation_max);
    context.fail(Error::InvalidArgument);
    return false;
  }
  if constexpr (s16) {
    return check_conv_s16(context, op, t, layout, q);
  }
  return true;
}

// check_conv unless the call is proven, then fills `args`' tensors, quantization and dims.
template <ConvCase kCase>
bool prepare_conv(
    CallContext& context,
    const char* op,
    const ConvTensors& t,
    ConvWeight layout,
    const ConvQuant& q,
    ConvArgs* args) {
  if (context.checks() && !check_conv<kCase>(context, op, t, layout, q)) {
    return false;
  }
  const int32_t c_out = layout == ConvWeight::kDepthwise
      ? weight_channels(t.weight, t.input)
      : static_cast<int32_t>(t.weight.size(0));
  args->tensors = &t;
  args->input_offset = static_cast<int32_t>(q.input_offset);
  args->output_offset = static_cast<int32_t>(q.output_offset);
  args->activation = activation_range(q.activation_min, q.activation_max);
  args->quant = cmsis_nn_per_channel_quant_params{
      const_cast<int32_t*>(t.multipliers.const_data_ptr<int32_t>()),
      const_cast<int32_t*>(t.shifts.const_data_ptr<int32_t>())};
  args->input_dims = nhwc_dims(t.input);
  if (kCase == ConvCase::kInt4 && t.weight.dim() == 3) {  // [Cout, KH, KW * Cin / 2]
    const int32_t c_in = static_cast<int32_t>(t.input.size(3));
    args->filter_dims = cmsis_nn_dims{
        static_cast<int32_t>(t.weight.size(0)), static_cast<int32_t>(t.weight.size(1)),
        static_cast<int32_t>(2 * t.weight.size(2)) / c_in, c_in};
  } else {
    args->filter_dims = nhwc_dims(t.weight);
    args->filter_dims.c = weight_channels(t.weight, t.input);  // int4: the logical channels
  }
  args->bias_dims = cmsis_nn_dims{1, 1, 1, c_out};
  args->output_dims = nhwc_dims(t.out);
  return true;
}

// The window of conv2d and depthwise_conv2d: stride > 0 and dilation > 0 as (h, w) pairs,
// padding as pad_sides reads it, out's height and width the ones they give.
CORTEX_M_NN_CHECK_ONLY inline bool check_window(
    CallContext& context,
    const char* op,
    IntArrayRef stride,
    IntArrayRef padding,
    IntArrayRef dilation,
    const ConvArgs& args) {
  const cmsis_nn_dims& filter = args.filter_dims;
  PadSides sides{};
  if (!positive_pair(stride) || !positive_pair(dilation) ||
      !pad_sides(padding, filter.h, filter.w, dilation, &sides)) {
    return refuse(
        context, op,
        "stride and dilation must be valid (h, w) pairs, padding (h, w) or (top, left, "
        "bottom, right) with an end unlike its start less than the kernel");
  }
  const cmsis_nn_dims& in = args.input_dims;
  const int64_t oh =
      padded_extent(in.h, filter.h, stride[0], sides.top, sides.bottom, dilation[0]);
  const int64_t ow =
      padded_extent(in.w, filter.w, stride[1], sides.left, sides.right, dilation[1]);
  return check_out_hw(context, op, "convolution", args.tensors->out, oh, ow);
}

// A convolution's `path` argument (check_path, kernel_support.h): which function computes the
// call. kWrapperPath (the wrapper's choice) is what the default, int16 and int4 cases run; each
// other path is a case of its own (operators.yaml: conv2d's rows, pointwise and window,
// depthwise_conv2d's three_by_three and lanes).
constexpr int64_t kWrapperPath = 0;
constexpr int64_t kOtherPath = 1;  // conv2d: arm_convolve_1x1_s8; depthwise: _3x3_s8
constexpr int64_t kLanesPath = 2;  // depthwise: our compute::depthwise_conv_lanes_s8
constexpr int64_t kPointwisePath = 2;  // conv2d: our compute::pointwise_conv_s8
constexpr int64_t kWindowPath = 3;     // conv2d: our compute::window_conv_s8

// Whether every pad of `padding` ((h, w) or (top, left, bottom, right)) is at most `limit`.
inline bool pads_at_most(IntArrayRef padding, int64_t limit) {
  for (const int64_t pad : padding) {
    if (pad > limit) {
      return false;
    }
  }
  return true;
}

// check_window unless the call is proven, then fills args' tiles (CMSIS-NN's padding tile is
// the top/left pad).
inline bool prepare_window(
    CallContext& context,
    const char* op,
    IntArrayRef stride,
    IntArrayRef padding,
    IntArrayRef dilation,
    ConvArgs* args) {
  if (context.checks() && !check_window(context, op, stride, padding, dilation, *args)) {
    return false;
  }
  args->stride = tile(stride);
  args->padding = tile(padding);  // the top/left pad
  args->dilation = tile(dilation);
  return true;
}

// The window of transpose_conv2d: stride > 0, padding >= 0 and output padding >= 0 as (h, w)
// pairs, out's height and width the ones they give. Fills args' tiles (dilation stays 1).
inline bool prepare_transposed_window(
    CallContext& context,
    const char* op,
    IntArrayRef stride,
    IntArrayRef padding,
    IntArrayRef output_padding,
    ConvArgs* args) {
  if (context.checks()) {
    if (!positive_pair(stride) || !non_negative_pair(padding) ||
        !non_negative_pair(output_padding)) {
      return refuse(context, op, "stride, padding and output padding must be valid (h, w) pairs");
    }
    const cmsis_nn_dims& in = args->input_dims;
    const cmsis_nn_dims& filter = args->filter_dims;
    const int64_t oh = transposed_extent(in.h, filter.h, stride[0], padding[0], output_padding[0]);
    const int64_t ow = transposed_extent(in.w, filter.w, stride[1], padding[1], output_padding[1]);
    if (!check_out_hw(context, op, "transposed convolution", args->tensors->out, oh, ow)) {
      return false;
    }
  }
  args->stride = tile(stride);
  args->padding = tile(padding);
  args->dilation = cmsis_nn_tile{1, 1};
  return true;
}

// A proven call's per-channel requantization (its multipliers and shifts arguments).
inline cmsis_nn_per_channel_quant_params proven_quant(
    executorch::runtime::EValue** args, size_t multipliers, size_t shifts) {
  return cmsis_nn_per_channel_quant_params{
      const_cast<int32_t*>(proven_tensor(args, multipliers).const_data_ptr<int32_t>()),
      const_cast<int32_t*>(proven_tensor(args, shifts).const_data_ptr<int32_t>())};
}

// Calls a CMSIS-NN convolution of the s8 signature for a proven call from its prepared entry
// (params, input, filter, bias, output) and the tensors at the positions `Args` names.
template <typename Args, typename Function, typename Entry>
arm_cmsis_nn_status call_prepared_conv_s8(
    Function function, const Entry& p, executorch::runtime::EValue** args) {
  const cmsis_nn_context buffer = proven_scratch(args, Args::scratch);
  const auto quant = proven_quant(args, Args::multipliers, Args::shifts);
  return function(
      &buffer, &p.params, &quant, &p.input,
      proven_tensor(args, Args::input).template const_data_ptr<int8_t>(), &p.filter,
      proven_tensor(args, Args::weight).template const_data_ptr<int8_t>(), &p.bias,
      proven_tensor(args, Args::bias).template const_data_ptr<int32_t>(), &p.output,
      proven_tensor(args, Args::out).template mutable_data_ptr<int8_t>());
}

// Calls a CMSIS-NN convolution of the s8 signature: its buffers (one; two for the transposed
// convolution), `params`, then args' quantization, dims and the tensors' data.
template <typename Function, typename Params, typename... Buffers>
arm_cmsis_nn_status call_conv_s8(
    Function function, const ConvArgs& args, const Params& params, const Buffers*... buffers) {
  const ConvTensors& t = *args.tensors;
  return function(
      buffers...,
      &params,
      &args.quant,
      &args.input_dims,
      t.input.const_data_ptr<int8_t>(),
      &args.filter_dims,
      t.weight.const_data_ptr<int8_t>(),
      &args.bias_dims,
      t.bias.const_data_ptr<int32_t>(),
      &args.output_dims,
      t.out.mutable_data_ptr<int8_t>());
}

}  // namespace native
}  // namespace cortex_m_nn
