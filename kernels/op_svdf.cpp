// cortex_m_nn::svdf.out → arm_svdf_s8 (svdf_out: int8 state and time weights; on MVE with the
// compile-time kernel sums as its context) or, the int16 case (svdf_int16_out),
// arm_svdf_state_s16_s8 (int16 state and time weights).
// One step: the state [B, F, M] is shifted and updated in place; the output is int8 [B, U].
// Reference: python/cortex_m_nn/ops/svdf.py.
#include "cortex_m_nn/kernel_checks.h"
#include "cortex_m_nn/kernel_support.h"
#include "cortex_m_nn_operators.h"

namespace cortex_m_nn {
namespace native {

namespace {
constexpr const char* kOp = "svdf";

// What both CMSIS-NN SVDF functions take besides their data.
struct SvdfArgs {
  cmsis_nn_svdf_params params;
  cmsis_nn_per_tensor_quant_params input_quant;
  cmsis_nn_per_tensor_quant_params output_quant;
  cmsis_nn_dims input_dims;
  cmsis_nn_dims state_dims;
  cmsis_nn_dims feature_dims;
  cmsis_nn_dims time_dims;
  cmsis_nn_dims bias_dims;
  cmsis_nn_dims output_dims;
  int32_t filters;
  int32_t units;
};

// Shapes and dtypes: input [B, I], state [B, F, M], weights [F, I] and [F, M], bias [U],
// out [B, U]; the time weights of the state's dtype.
bool valid_shapes(
    const Tensor& input, const Tensor& state, const Tensor& feature, const Tensor& time,
    const std::optional<Tensor>& bias, int64_t rank, const Tensor& out) {
  const bool s16 = is_type(state, ScalarType::Short);
  if (!has_layout(input, ScalarType::Char, 2) || !has_layout(feature, ScalarType::Char, 2) ||
      !(s16 || is_type(state, ScalarType::Char)) ||
      !has_layout(time, state.scalar_type(), 2) || state.dim() != 3 ||
      !has_layout(out, ScalarType::Char, 2)) {
    return false;
  }
  const auto filters = feature.size(0);
  if (rank < 1 || rank > INT16_MAX || filters % rank != 0 || time.size(0) != filters ||
      feature.size(1) != input.size(1) || state.size(0) != input.size(0) ||
      state.size(1) != filters || state.size(2) != time.size(1)) {
    return false;
  }
  const auto units = filters / rank;
  const bool bias_ok = !bias.has_value() || (has_layout(*bias, ScalarType::Int, 1) &&
                                             bias->size(0) == units);
  return bias_ok && out.size(0) == input.size(0) && out.size(1) == units;
}

SvdfArgs svdf_args(
    const Tensor& input, const Tensor& state, int64_t rank, int64_t input_offset,
    int64_t output_offset, int64_t input_multiplier, int64_t input_shift,
    int64_t output_multiplier, int64_t output_shift, int64_t activation_min,
    int64_t activation_max) {
  const bool s16 = is_type(state, ScalarType::Short);
  const auto b = static_cast<int32_t>(input.size(0));
  const auto f = static_cast<int32_t>(state.size(1));
  const auto m = static_cast<int32_t>(state.size(2));
  const auto u = f / static_cast<int32_t>(rank);
  SvdfArgs args{};
  // The new state saturates to its own dtype: CMSIS-NN stores the int8 case with a cast.
  args.params = cmsis_nn_svdf_params{
      static_cast<int32_t>(rank), static_cast<int32_t>(input_offset),
      static_cast<int32_t>(output_offset),
      s16 ? activation_range(INT16_MIN, INT16_MAX) : activation_range(INT8_MIN, INT8_MAX),
      activation_range(activation_min, activation_max)};
  args.input_quant = per_tensor_quant(input_multiplier, input_shift);
  args.output_quant = per_tensor_quant(output_multiplier, output_shift);
  args.input_dims = cmsis_nn_dims{b, static_cast<int32_t>(input.size(1)), 1, 1};
  args.state_dims = cmsis_nn_dims{b, f * m, 1, 1};
  args.feature_dims = cmsis_nn_dims{f, static_cast<int32_t>(input.size(1)), 1, 1};
  args.time_dims = cmsis_nn_dims{f, m, 1, 1};
  args.bias_dims = cmsis_nn_dims{u, 1, 1, 1};
  args.output_dims = cmsis_nn_dims{b, u, 1, 1};
  args.filters = f;
  args.units = u;
  return args;
}

// The int8-state case; on MVE CMSIS-NN reads the feature rows' kernel sums from `ctx`.
arm_cmsis_nn_status svdf_s8(
    const SvdfArgs& a, const cmsis_nn_context& input_ctx, const cmsis_nn_context& output_ctx,
    const Tensor& input, Tensor& state, const Tensor& feature, const Tensor& time,
    const int32_t* bias, const std::optional<Tensor>& kernel_sums, Tensor& out) {
  cmsis_nn_context ctx{nullptr, 0};
  if (kernel_sums.has_value()) {  // CMSIS-NN only reads it
    ctx.buf = const_cast<int32_t*>(kernel_sums->const_data_ptr<int32_t>());
    ctx.size = static_cast<int32_t>(kernel_sums->nbytes());
  }
  return arm_svdf_s8(
      &ctx, &input_ctx, &output_ctx, &a.params, &a.input_quant, &a.output_quant, &a.input_dims,
      input.const_data_ptr<int8_t>(), &a.state_dims, state.mutable_data_ptr<int8_t>(),
      &a.feature_dims, feature.const_data_ptr<int8_t>(), &a.time_dims,
      time.const_data_ptr<int8_t>(), &a.bias_dims, bias, &a.output_dims,
      out.mutable_data_ptr<int8_t>());
}

// Splits the planned scratch into CMSIS-NN's two buffers and calls the state's case (kS16: an
// int16 state).
template <bool kS16>
arm_cmsis_nn_status run_svdf(
    const SvdfArgs& a, const cmsis_nn_context& buffer, const Tensor& input, Tensor& state,
    const Tensor& feature, const Tensor& time, const std::optional<Tensor>& bias,
    const std::optional<Tensor>& kernel_sums, Tensor& out) {
  const int32_t batch = a.input_dims.n;
  const cmsis_nn_context input_ctx{buffer.buf, 4 * batch * a.filters};
  const cmsis_nn_context output_ctx{
      static_cast<int8_t*>(buffer.buf) + 4 * batch * a.filters, 4 * batch * a.units};
  const int32_t* bias_data = optional_data<int32_t>(bias);
  if constexpr (!kS16) {
    return svdf_s8(
        a, input_ctx, output_ctx, input, state, feature, time, bias_data, kernel_sums, out);
  } else {
    return arm_svdf_state_s16_s8(
        &input_ctx, &output_ctx, &a.params, &a.input_quant, &a.output_quant, &a.input_dims,
        input.const_data_ptr<int8_t>(), &a.state_dims, state.mutable_data_ptr<int16_t>(),
        &a.feature_dims, feature.const_data_ptr<int8_t>(), &a.time_dims,
        time.const_data_ptr<int16_t>(), &a.bias_dims, bias_data, &a.output_dims,
        out.mutable_data_ptr<int8_t>());
  }
}

// Either case: an int8 state (kS16 false) or an int16 one.
template <bool kS16>
void svdf(
    CallContext& context, const Tensor& input, Tensor& state, const Tensor& weights_feature,
    const Tensor& weights_time, const std::optional<Tensor>& bias,
    const std::optional<Tensor>& kernel_sums, int64_t rank, int64_t input_offset,
    int64_t output_offset, int64_t input_multiplier, int64_t input_shift,
    int64_t output_multiplier, int64_t output_shift, int64_t activation_min,
    int64_t activation_max, Tensor& out, Tensor& scratch) {
  CORTEX_M_NN_CHECK(
      context, valid_shapes(input, state, weights_feature, weights_time, bias, rank, out), "svdf",
      "input [B, I] int8, state [B, F, M] int8 or int16, weights [F, I] int8 and [F, M] of the "
      "state's dtype, bias int32 [F / rank], out int8 [B, F / rank]");
  CORTEX_M_NN_CHECK(
      context,
      is_s8_output_offset(input_offset) && is_s8_output_offset(output_offset) &&
          is_requantization(input_multiplier, input_shift) &&
          is_requantization(output_multiplier, output_shift) &&
          is_int8_range(activation_min, activation_max),
      "svdf", "offsets, requantizations or the activation range out of range");
  constexpr bool s16 = kS16;
  CORTEX_M_NN_CHECK(
      context,
      !kernel_sums.has_value() ||
          (!s16 && has_layout(*kernel_sums, ScalarType::Int, 1) &&
           kernel_sums->size(0) == weights_feature.size(0)),
      "svdf", "kernel sums are int32 [F], for an int8 state only");
  const SvdfArgs a = svdf_args(
      input, state, rank, input_offset, output_offset, input_multiplier, input_shift,
      output_multiplier, output_shift, activation_min, activation_max);
  const int32_t batch = a.input_dims.n;
  const auto required = [&] { return static_cast<int32_t>(4 * batch * (a.filters + a.units)); };
  cmsis_nn_context buffer;
  if (!scratch_context(context, kOp, scratch, required, &buffer) || !context.computes()) {
    return;
  }
  check_status(
      context, kOp,
      run_svdf<kS16>(
          a, buffer, input, state, weights_feature, weights_time, bias, kernel_sums, out));
}
}  // namespace

void svdf_out(
    CallContext& context,
    const Tensor& input,
    Tensor& state,
    const Tensor& weights_feature,
    const Tensor& weights_time,
    const std::optional<Tensor>& bias,
    const std::optional<Tensor>& kernel_sums,
    int64_t rank,
    int64_t input_offset,
    int64_t output_offset,
    int64_t input_multiplier,
    int64_t input_shift,
    int64_t output_multiplier,
    int64_t output_shift,
    int64_t activation_min,
    int64_t activation_max,
    int64_t scratch_bytes,
    Tensor& out,
    Tensor& scratch) {
  (void)scratch_bytes;
  svdf<false>(context, input, state, weights_feature, weights_time, bias, kernel_sums, rank,
              input_offset, output_offset, input_multiplier, input_shift, output_multiplier,
              output_shift, activation_min, activation_max, out, scratch);
}

void svdf_int16_out(
    CallContext& context, const Tensor& input, Tensor& state, const Tensor& weights_feature,
    const Tensor& weights_time, const std::optional<Tensor>& bias,
    const std::optional<Tensor>& kernel_sums, int64_t rank, int64_t input_offset,
    int64_t output_offset, int64_t input_multiplier, int64_t input_shift,
    int64_t output_multiplier, int64_t output_shift, int64_t activation_min,
    int64_t activation_max, int64_t scratch_bytes, Tensor& out, Tensor& scratch) {
  (void)scratch_bytes;
  svdf<true>(context, input, state, weights_feature, weights_time, bias, kernel_sums, rank,
             input_offset, output_offset, input_multiplier, input_shift, output_multiplier,
             output_shift, activation_min, activation_max, out, scratch);
}

}  // namespace native
}  // namespace cortex_m_nn
