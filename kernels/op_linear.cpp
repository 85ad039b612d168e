// cortex_m_nn::linear.out → arm_fully_connected_s8 (per-tensor requantization: the multiplier
// and shift numbers) or arm_fully_connected_per_channel_s8 (per output channel: the
// multipliers and shifts tensors, the numbers 0). On MVE the program passes the compile-time
// kernel sums (bias folded in) as CMSIS-NN's context buffer; elsewhere it passes the bias.
// int16 activations (an int16 input) → arm_fully_connected_s16: zero points 0, int64 bias,
// per tensor, no kernel sums, no prepared entry. int4 weights (uint8 [out, in / 2], packed
// pairs) → arm_fully_connected_s4, per tensor, no kernel sums. Quantization checks and params:
// cortex_m_nn/fc_common.h. Reference: python/cortex_m_nn/ops/linear.py.
#include "cortex_m_nn/fc_common.h"
#include "cortex_m_nn_operators.h"

namespace cortex_m_nn {
namespace native {

namespace {
// CMSIS-NN's context for the fully connected functions: the program's kernel sums on MVE
// (which needs them), nothing elsewhere. Fails the call when the .pte was compiled for the
// other.
bool kernel_sums_buffer(
    CallContext& context,
    const std::optional<Tensor>& kernel_sums,
    cmsis_nn_context* buffer) {
#if defined(ARM_MATH_MVEI)
  if (!kernel_sums.has_value()) {
    ET_LOG(Error, "cortex_m_nn::linear: the .pte has no kernel sums, which this MVE build needs: "
                  "recompile the model for an MVE target (e.g. --target cortex-m55)");
    context.fail(Error::InvalidProgram);
    return false;
  }
  // checked by check_vectors: int32 [out_features]
  const Tensor& sums = kernel_sums.value();
  buffer->buf = const_cast<int32_t*>(sums.const_data_ptr<int32_t>());
  buffer->size = static_cast<int32_t>(sums.numel() * sizeof(int32_t));
#else
  (void)buffer;
  if (kernel_sums.has_value()) {
    ET_LOG(Error, "cortex_m_nn::linear: the .pte carries MVE kernel sums but these kernels are "
                  "a %s build: recompile the model for this core's ISA", kIsa);
    context.fail(Error::InvalidProgram);
    return false;
  }
#endif
  return true;
}

// bias, kernel sums, multipliers and shifts: each absent or int32 [out_features]; the
// requantization per tensor (no vectors) or per channel (both, valid shifts, the numbers 0).
bool check_vectors(
    CallContext& context,
    int32_t out_features,
    const std::optional<Tensor>& bias,
    const std::optional<Tensor>& kernel_sums,
    const std::optional<Tensor>& multipliers,
    const std::optional<Tensor>& shifts,
    const FcQuant& q) {
  for (const auto* vector : {&bias, &kernel_sums, &multipliers, &shifts}) {
    if (vector->has_value() && (!has_layout(vector->value(), ScalarType::Int, 1) ||
                                vector->value().size(0) != out_features)) {
      ET_LOG(Error, "cortex_m_nn::linear: bias, kernel sums, multipliers and shifts must be "
                    "int32 [%d]", (int)out_features);
      context.fail(Error::InvalidArgument);
      return false;
    }
  }
  const bool per_channel = multipliers.has_value();
  if (per_channel != shifts.has_value() || (per_channel && (q.multiplier != 0 || q.shift != 0)) ||
      (per_channel && !are_shifts(shifts.value()))) {
    return refuse(
        context, "linear",
        "requantization must be per tensor (multiplier, shift) or per channel (multipliers "
        "and shifts in [-31, 30], the numbers 0)");
  }
  return true;
}

// The CMSIS-NN call of an entry: per tensor or per channel.
arm_cmsis_nn_status fully_connected(
    const cmsis_nn_context& buffer,
    const cortex_m_nn_linear_prepared& p,
    const Tensor* multipliers,
    const Tensor* shifts,
    const int8_t* input,
    const int8_t* weight,
    const int32_t* bias,
    int8_t* out) {
  if (p.per_channel) {
    const cmsis_nn_per_channel_quant_params quant{
        const_cast<int32_t*>(multipliers->const_data_ptr<int32_t>()),
        const_cast<int32_t*>(shifts->const_data_ptr<int32_t>())};
    return arm_fully_connected_per_channel_s8(
        &buffer, &p.params, &quant, &p.input, input, &p.filter, weight, &p.bias, bias, &p.output,
        out);
  }
  return arm_fully_connected_s8(
      &buffer, &p.params, &p.quant, &p.input, input, &p.filter, weight, &p.bias, bias, &p.output,
      out);
}
// The matrix shapes: input [..., in], weight int8 [out, in], out [..., out] of `activations`
// (the input's type too), in 32-bit counts.
struct LinearShape {
  int32_t in_features, out_features, batches;

  // CMSIS-NN's dims of a fully connected call of this shape.
  cmsis_nn_dims input() const { return {batches, 1, 1, in_features}; }
  cmsis_nn_dims filter() const { return {in_features, 1, 1, out_features}; }
  cmsis_nn_dims bias() const { return {1, 1, 1, out_features}; }
  cmsis_nn_dims output() const { return {batches, 1, 1, out_features}; }
};

bool check_shapes(
    CallContext& context,
    const Tensor& input,
    const Tensor& weight,
    const Tensor& out,
    ScalarType activations,
    LinearShape* shape) {
  // Sizes and element counts are 32-bit in ExecuTorch's runtime: no 64-bit division per call.
  // int4 weights (uint8 [out, in / 2], packed pairs) hold two features per byte.
  const bool s4 = is_type(weight, ScalarType::Byte);
  const int32_t in_features = weight.dim() == 2 ? weight.size(1) * (s4 ? 2 : 1) : 0;
  const int32_t out_features = weight.dim() == 2 ? weight.size(0) : 0;
  const int32_t batches = in_features ? static_cast<int32_t>(input.numel()) / in_features : 0;
  *shape = LinearShape{in_features, out_features, batches};
  if (!context.checks()) {
    return true;
  }
  const bool types = is_type(input, activations) && input.dim() >= 1 &&
      (has_layout(weight, ScalarType::Char, 2) ||
       (s4 && activations == ScalarType::Char && has_layout(weight, ScalarType::Byte, 2))) &&
      is_type(out, activations) && out.dim() == input.dim();
  if (!types) {
    return refuse(
        context, "linear", "input and out must be int8 or int16 [..., features], weight int8 "
        "[out, in] (or, with int8 activations, uint8 [out, in / 2]: int4 pairs)");
  }
  if (input.size(input.dim() - 1) != in_features || out.size(out.dim() - 1) != out_features ||
      static_cast<int64_t>(input.numel()) != static_cast<int64_t>(batches) * in_features ||
      static_cast<int64_t>(out.numel()) != static_cast<int64_t>(batches) * out_features) {
    ET_LOG(Error, "cortex_m_nn::linear: input [..., %d] and out [..., %d] do not match weight "
                  "[%d, %d]", (int)input.size(input.dim() - 1), (int)out.size(out.dim() - 1),
           (int)out_features, (int)in_features);
    context.fail(Error::InvalidArgument);
    return false;
  }
  return true;
}

// int16 activations: zero points 0, bias absent or int64 [out], per tensor with a shift the
// s16 output stage takes (arm_nn_requantize_s64 shifts right by 14 - shift), no kernel sums,
// activation range in int16.
bool check_s16(
    CallContext& context,
    const LinearShape& shape,
    const std::optional<Tensor>& bias,
    const std::optional<Tensor>& kernel_sums,
    const std::optional<Tensor>& multipliers,
    const std::optional<Tensor>& shifts,
    const FcQuant& q) {
  const bool ok = is_fc_quant_s16(q) && !kernel_sums.has_value() && !multipliers.has_value() &&
      !shifts.has_value() &&
      (!bias.has_value() || (has_layout(bias.value(), ScalarType::Long, 1) &&
                             bias.value().size(0) == shape.out_features));
  return ok ||
      refuse(context, "linear",
             "int16 linear takes zero offsets, an int64 bias [out], one multiplier with a shift "
             "in [-31, 14], no kernel sums and an int16 activation range");
}

void linear_s16(
    CallContext& context,
    const Tensor& input,
    const Tensor& weight,
    const std::optional<Tensor>& bias,
    const std::optional<Tensor>& kernel_sums,
    const std::optional<Tensor>& multipliers,
    const std::optional<Tensor>& shifts,
    const FcQuant& q,
    Tensor& out) {
  LinearShape shape{};
  if (!check_shapes(context, input, weight, out, ScalarType::Short, &shape) ||
      (context.checks() && !check_s16(context, shape, bias, kernel_sums, multipliers, shifts, q)) ||
      (context.checks() &&
       !context.prepared_agrees("linear", CORTEX_M_NN_PREPARED_NONE, nullptr, 0)) ||
      !context.computes()) {
    return;
  }
  const cmsis_nn_context buffer{};
  const cmsis_nn_fc_params params = q.params();
  const cmsis_nn_per_tensor_quant_params quant = q.quant();
  const cmsis_nn_dims input_dims = shape.input(), filter_dims = shape.filter();
  const cmsis_nn_dims bias_dims = shape.bias(), output_dims = shape.output();
  check_status(
      context, "linear",
      arm_fully_connected_s16(
          &buffer, &params, &quant, &input_dims, input.const_data_ptr<int16_t>(), &filter_dims,
          weight.const_data_ptr<int8_t>(), &bias_dims,
          bias.has_value() ? bias.value().const_data_ptr<int64_t>() : nullptr, &output_dims,
          out.mutable_data_ptr<int16_t>()));
}
// The int4 case (uint8 weight of packed pairs): arm_fully_connected_s4, per tensor (CMSIS-NN
// has no per-channel s4 fully connected), an int32 bias or none, no kernel sums (its MVE code
// sums the weights itself), unprepared.
void linear_s4(
    CallContext& context,
    const Tensor& input,
    const Tensor& weight,
    const std::optional<Tensor>& bias,
    const std::optional<Tensor>& kernel_sums,
    const std::optional<Tensor>& multipliers,
    const std::optional<Tensor>& shifts,
    const FcQuant& q,
    Tensor& out) {
  LinearShape shape{};
  if (!check_shapes(context, input, weight, out, ScalarType::Char, &shape)) {
    return;
  }
  if (context.checks() &&
      (!check_vectors(context, shape.out_features, bias, kernel_sums, multipliers, shifts, q) ||
       kernel_sums.has_value() || multipliers.has_value())) {
    refuse(context, "linear", "int4 weights take a bias, no kernel sums and one multiplier");
    return;
  }
  if (!check_fc_quant(context, "linear", q) ||
      (context.checks() &&
       !context.prepared_agrees("linear", CORTEX_M_NN_PREPARED_NONE, nullptr, 0)) ||
      !context.computes()) {
    return;
  }
  const cmsis_nn_context buffer{};  // unused by arm_fully_connected_s4
  const cmsis_nn_fc_params params = q.params();
  const cmsis_nn_per_tensor_quant_params quant = q.quant();
  const cmsis_nn_dims input_dims = shape.input(), filter_dims = shape.filter();
  const cmsis_nn_dims bias_dims = shape.bias(), output_dims = shape.output();
  check_status(
      context, "linear",
      arm_fully_connected_s4(
          &buffer, &params, &quant, &input_dims, input.const_data_ptr<int8_t>(), &filter_dims,
          static_cast<const int8_t*>(weight.const_data_ptr()), &bias_dims,
          bias.has_value() ? bias.value().const_data_ptr<int32_t>() : nullptr, &output_dims,
          out.mutable_data_ptr<int8_t>()));
}
}  // namespace

void linear_out(
    CallContext& context,
    const Tensor& input,
    const Tensor& weight,
    const std::optional<Tensor>& bias,
    const std::optional<Tensor>& kernel_sums,
    const std::optional<Tensor>& multipliers,
    const std::optional<Tensor>& shifts,
    int64_t input_offset,
    int64_t output_offset,
    int64_t multiplier,
    int64_t shift,
    int64_t activation_min,
    int64_t activation_max,
    Tensor& out) {
  const FcQuant q{
      input_offset, 0, output_offset, multiplier, shift, activation_min, activation_max};
  if (is_type(input, ScalarType::Short)) {
    linear_s16(context, input, weight, bias, kernel_sums, multipliers, shifts, q, out);
    return;
  }
  if (is_type(weight, ScalarType::Byte)) {
    linear_s4(context, input, weight, bias, kernel_sums, multipliers, shifts, q, out);
    return;
  }
  LinearShape shape{};
  if (!check_shapes(context, input, weight, out, ScalarType::Char, &shape)) {
    return;
  }
  cmsis_nn_context buffer{};
  if ((context.checks() &&
       !check_vectors(context, shape.out_features, bias, kernel_sums, multipliers, shifts, q)) ||
      !check_fc_quant(context, "linear", q) || !kernel_sums_buffer(context, kernel_sums, &buffer)) {
    return;
  }
  const cortex_m_nn_linear_prepared derived{
      q.params(), q.quant(), shape.input(), shape.filter(), shape.bias(), shape.output(),
      multipliers.has_value() ? 1 : 0};
  const auto kind = CORTEX_M_NN_PREPARED_LINEAR;
  if ((context.checks() && !context.prepared_agrees("linear", kind, &derived, sizeof(derived))) ||
      !context.computes()) {
    return;
  }
  check_status(
      context, "linear",
      fully_connected(
          buffer, derived, derived.per_channel ? &multipliers.value() : nullptr,
          derived.per_channel ? &shifts.value() : nullptr, input.const_data_ptr<int8_t>(),
          weight.const_data_ptr<int8_t>(),
          bias.has_value() ? bias.value().const_data_ptr<int32_t>() : nullptr,
          out.mutable_data_ptr<int8_t>()));
}

void linear_prepared(CallContext& context, EValue** args) {
  const auto& p = *static_cast<const cortex_m_nn_linear_prepared*>(context.prepared());
  using a = linear_args;
  // the program's kernel sums on MVE (the proof checked they are there), nothing elsewhere
  const Tensor* sums = args[a::kernel_sums]->isTensor() ? &proven_tensor(args, a::kernel_sums)
                                                        : nullptr;
  const cmsis_nn_context buffer{
      sums ? const_cast<int32_t*>(sums->const_data_ptr<int32_t>()) : nullptr,
      sums ? static_cast<int32_t>(sums->numel() * sizeof(int32_t)) : 0};
  check_status(
      context, "linear",
      fully_connected(
          buffer, p, p.per_channel ? &proven_tensor(args, a::multipliers) : nullptr,
          p.per_channel ? &proven_tensor(args, a::shifts) : nullptr,
          proven_tensor(args, a::input).const_data_ptr<int8_t>(),
          proven_tensor(args, a::weight).const_data_ptr<int8_t>(),
          proven_optional_data<int32_t>(args, a::bias),
          proven_tensor(args, a::out).mutable_data_ptr<int8_t>()));
}

}  // namespace native
}  // namespace cortex_m_nn
