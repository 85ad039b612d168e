// cortex_m_nn::linear.out, one function per case (operators.yaml): linear_out →
// arm_fully_connected_s8 (per-tensor requantization: the multiplier and shift numbers);
// linear_per_channel_out (the multipliers tensor given) → arm_fully_connected_per_channel_s8
// (per output channel: the multipliers and shifts tensors, the numbers 0); both prepared. On
// MVE the program passes the compile-time kernel sums (bias folded in) as CMSIS-NN's context
// buffer; elsewhere it passes the bias. linear_int16_out (an int16 input) →
// arm_fully_connected_s16: zero points 0, int64 bias, per tensor, no kernel sums, no prepared
// entry. linear_int4_out (int4 weights: uint8 [out, in / 2], packed pairs) →
// arm_fully_connected_s4, per tensor, no kernel sums. linear_quads_out (path 1) → our
// compute::fully_connected_quads_s8 or _per_channel_s8 (kernels/compute), int8. Quantization
// checks and params: cortex_m_nn/fc_common.h. Reference: python/cortex_m_nn/ops/linear.py.
#include "cortex_m_nn/compute.h"
#include "cortex_m_nn/fc_common.h"
#include "cortex_m_nn_operators.h"

namespace cortex_m_nn {
namespace native {

namespace {
// A linear call's `path` (check_path): CMSIS-NN's functions, or our fully_connected_quads_s8.
constexpr int64_t kCmsisPath = 0;
constexpr int64_t kQuadsPath = 1;

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

// The optional tensors of a linear call (bias, kernel sums, per-channel requantization), as
// linear_out receives them.
struct LinearVectors {
  const std::optional<Tensor>& bias;
  const std::optional<Tensor>& kernel_sums;
  const std::optional<Tensor>& multipliers;
  const std::optional<Tensor>& shifts;
};

// bias, kernel sums, multipliers and shifts: each absent or int32 [out_features]; the
// requantization per tensor (no vectors) or per channel (both, valid shifts, the numbers 0).
CORTEX_M_NN_CHECK_ONLY bool check_vectors(
    CallContext& context, int32_t out_features, const LinearVectors& v, const FcQuant& q) {
  for (const auto* vector : {&v.bias, &v.kernel_sums, &v.multipliers, &v.shifts}) {
    if (vector->has_value() && (!has_layout(vector->value(), ScalarType::Int, 1) ||
                                vector->value().size(0) != out_features)) {
      ET_LOG(Error, "cortex_m_nn::linear: bias, kernel sums, multipliers and shifts must be "
                    "int32 [%d]", (int)out_features);
      context.fail(Error::InvalidArgument);
      return false;
    }
  }
  const bool per_channel = v.multipliers.has_value();
  if (per_channel != v.shifts.has_value() ||
      (per_channel && (q.multiplier != 0 || q.shift != 0)) ||
      (per_channel && !are_shifts(v.shifts.value()))) {
    return refuse(
        context, "linear",
        "requantization must be per tensor (multiplier, shift) or per channel (multipliers "
        "and shifts in [-31, 30], the numbers 0)");
  }
  return true;
}

// Calls a CMSIS-NN fully connected function of the per-tensor signature (arm_fully_connected_s8,
// and the int16 and int4 cases' _s16 and _s4) with entry p's params, quantization and dims.
template <typename Function, typename In, typename Bias, typename Out>
arm_cmsis_nn_status call_per_tensor(
    Function function, const cmsis_nn_context& buffer, const cortex_m_nn_linear_prepared& p,
    const In* input, const int8_t* weight, const Bias* bias, Out* out) {
  return function(
      &buffer, &p.params, &p.quant, &p.input, input, &p.filter, weight, &p.bias, bias, &p.output,
      out);
}

// The int8 call of an entry: per tensor, or (kPerChannel, the per_channel case) per channel with
// the multipliers and shifts tensors; by CMSIS-NN's functions, or (kQuads, the quads case) our
// fully_connected_quads_s8 and its per-channel form.
template <bool kPerChannel, bool kQuads = false>
arm_cmsis_nn_status fully_connected(
    const cmsis_nn_context& buffer, const cortex_m_nn_linear_prepared& p,
    const Tensor* multipliers, const Tensor* shifts, const int8_t* input, const int8_t* weight,
    const int32_t* bias, int8_t* out) {
  if constexpr (!kPerChannel) {
    (void)multipliers;
    (void)shifts;
    return call_per_tensor(kQuads ? compute::fully_connected_quads_s8 : arm_fully_connected_s8,
                           buffer, p, input, weight, bias, out);
  } else {
    const cmsis_nn_per_channel_quant_params quant{
        const_cast<int32_t*>(multipliers->const_data_ptr<int32_t>()),
        const_cast<int32_t*>(shifts->const_data_ptr<int32_t>())};
    const auto function = kQuads ? compute::fully_connected_quads_per_channel_s8
                                 : arm_fully_connected_per_channel_s8;
    return function(&buffer, &p.params, &quant, &p.input, input, &p.filter, weight, &p.bias, bias,
                    &p.output, out);
  }
}

// The matrix shapes: input [..., in], weight int8 [out, in], out [..., out] of `activations`
// (the input's type too), in 32-bit counts.
struct LinearShape {
  int32_t in_features, out_features, batches;

  // The prepared entry of a call of this shape with q's params and quantization (its form for
  // the int16 and int4 cases too, which run unprepared).
  cortex_m_nn_linear_prepared entry(const FcQuant& q, bool per_channel) const {
    return cortex_m_nn_linear_prepared{
        q.params(), q.quant(), {batches, 1, 1, in_features}, {in_features, 1, 1, out_features},
        {1, 1, 1, out_features}, {batches, 1, 1, out_features}, per_channel ? 1 : 0};
  }
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
    CallContext& context, const LinearShape& shape, const LinearVectors& v, const FcQuant& q) {
  const bool ok = is_fc_quant_s16(q) && !v.kernel_sums.has_value() &&
      !v.multipliers.has_value() && !v.shifts.has_value() &&
      (!v.bias.has_value() || (has_layout(v.bias.value(), ScalarType::Long, 1) &&
                               v.bias.value().size(0) == shape.out_features));
  return ok ||
      refuse(context, "linear",
             "int16 linear takes zero offsets, an int64 bias [out], one multiplier with a shift "
             "in [-31, 14], no kernel sums and an int16 activation range");
}

// int4 weights (uint8 [out, in / 2], packed pairs): per tensor (CMSIS-NN has no per-channel s4
// fully connected), an int32 bias or none, no kernel sums (its MVE code sums the weights itself).
bool check_s4(CallContext& context, const LinearShape& shape, const LinearVectors& v,
              const FcQuant& q) {
  if (!check_vectors(context, shape.out_features, v, q) || v.kernel_sums.has_value() ||
      v.multipliers.has_value()) {
    return refuse(context, "linear", "int4 weights take a bias, no kernel sums and one multiplier");
  }
  return check_fc_quant(context, "linear", q);
}

// The cases that run unprepared, per tensor: int16 activations (kS16) →
// arm_fully_connected_s16 (int64 bias), int4 weights → arm_fully_connected_s4.
template <bool kS16>
void linear_unprepared(CallContext& context, const Tensor& input, const Tensor& weight,
                       const LinearVectors& v, const FcQuant& q, Tensor& out) {
  LinearShape shape{};
  if (!check_shapes(context, input, weight, out, kS16 ? ScalarType::Short : ScalarType::Char,
                    &shape) ||
      (context.checks() &&
       !(kS16 ? check_s16(context, shape, v, q) : check_s4(context, shape, v, q))) ||
      !runs_unprepared(context, "linear") || !context.computes()) {
    return;
  }
  const cmsis_nn_context buffer{};  // neither function uses one
  const cortex_m_nn_linear_prepared p = shape.entry(q, false);
  if constexpr (kS16) {
    check_status(context, "linear",
                 call_per_tensor(arm_fully_connected_s16, buffer, p,
                                 input.const_data_ptr<int16_t>(), weight.const_data_ptr<int8_t>(),
                                 optional_data<int64_t>(v.bias), out.mutable_data_ptr<int16_t>()));
  } else {
    check_status(context, "linear",
                 call_per_tensor(arm_fully_connected_s4, buffer, p, input.const_data_ptr<int8_t>(),
                                 static_cast<const int8_t*>(weight.const_data_ptr()),
                                 optional_data<int32_t>(v.bias), out.mutable_data_ptr<int8_t>()));
  }
}

// The int8 cases: per tensor (kPerChannel false: linear_out) or per channel
// (linear_per_channel_out).
template <bool kPerChannel>
void linear_s8(
    CallContext& context, const Tensor& input, const Tensor& weight, const LinearVectors& v,
    const FcQuant& q, Tensor& out) {
  LinearShape shape{};
  if (!check_shapes(context, input, weight, out, ScalarType::Char, &shape)) {
    return;
  }
  cmsis_nn_context buffer{};
  if ((context.checks() && !check_vectors(context, shape.out_features, v, q)) ||
      !check_fc_quant(context, "linear", q) ||
      !kernel_sums_buffer(context, v.kernel_sums, &buffer)) {
    return;
  }
  const cortex_m_nn_linear_prepared derived = shape.entry(q, kPerChannel);
  const auto kind = CORTEX_M_NN_PREPARED_LINEAR;
  if ((context.checks() && !context.prepared_agrees("linear", kind, &derived, sizeof(derived))) ||
      !context.computes()) {
    return;
  }
  check_status(
      context, "linear",
      fully_connected<kPerChannel>(
          buffer, derived, kPerChannel ? &v.multipliers.value() : nullptr,
          kPerChannel ? &v.shifts.value() : nullptr, input.const_data_ptr<int8_t>(),
          weight.const_data_ptr<int8_t>(), optional_data<int32_t>(v.bias),
          out.mutable_data_ptr<int8_t>()));
}

// A proven call of an int8 case from its prepared entry.
template <bool kPerChannel>
void linear_s8_prepared(CallContext& context, EValue** args) {
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
      fully_connected<kPerChannel>(
          buffer, p, kPerChannel ? &proven_tensor(args, a::multipliers) : nullptr,
          kPerChannel ? &proven_tensor(args, a::shifts) : nullptr,
          proven_tensor(args, a::input).const_data_ptr<int8_t>(),
          proven_tensor(args, a::weight).const_data_ptr<int8_t>(),
          proven_optional_data<int32_t>(args, a::bias),
          proven_tensor(args, a::out).mutable_data_ptr<int8_t>()));
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
    int64_t path,
    Tensor& out) {
  const FcQuant q{
      input_offset, 0, output_offset, multiplier, shift, activation_min, activation_max};
  if (check_path(context, "linear", path, kCmsisPath)) {
    linear_s8<false>(context, input, weight, {bias, kernel_sums, multipliers, shifts}, q, out);
  }
}

void linear_per_channel_out(
    CallContext& context, const Tensor& input, const Tensor& weight,
    const std::optional<Tensor>& bias, const std::optional<Tensor>& kernel_sums,
    const std::optional<Tensor>& multipliers, const std::optional<Tensor>& shifts,
    int64_t input_offset, int64_t output_offset, int64_t multiplier, int64_t shift,
    int64_t activation_min, int64_t activation_max, int64_t path, Tensor& out) {
  const FcQuant q{
      input_offset, 0, output_offset, multiplier, shift, activation_min, activation_max};
  if (check_path(context, "linear", path, kCmsisPath)) {
    linear_s8<true>(context, input, weight, {bias, kernel_sums, multipliers, shifts}, q, out);
  }
}

void linear_int16_out(
    CallContext& context, const Tensor& input, const Tensor& weight,
    const std::optional<Tensor>& bias, const std::optional<Tensor>& kernel_sums,
    const std::optional<Tensor>& multipliers, const std::optional<Tensor>& shifts,
    int64_t input_offset, int64_t output_offset, int64_t multiplier, int64_t shift,
    int64_t activation_min, int64_t activation_max, int64_t path, Tensor& out) {
  const FcQuant q{
      input_offset, 0, output_offset, multiplier, shift, activation_min, activation_max};
  if (check_path(context, "linear", path, kCmsisPath)) {
    linear_unprepared<true>(context, input, weight, {bias, kernel_sums, multipliers, shifts}, q,
                            out);
  }
}

void linear_int4_out(
    CallContext& context, const Tensor& input, const Tensor& weight,
    const std::optional<Tensor>& bias, const std::optional<Tensor>& kernel_sums,
    const std::optional<Tensor>& multipliers, const std::optional<Tensor>& shifts,
    int64_t input_offset, int64_t output_offset, int64_t multiplier, int64_t shift,
    int64_t activation_min, int64_t activation_max, int64_t path, Tensor& out) {
  const FcQuant q{
      input_offset, 0, output_offset, multiplier, shift, activation_min, activation_max};
  if (check_path(context, "linear", path, kCmsisPath)) {
    linear_unprepared<false>(context, input, weight, {bias, kernel_sums, multipliers, shifts}, q,
                             out);
  }
}

// The quads case (path 1): our compute::fully_connected_quads_s8 (per tensor) or
// fully_connected_quads_per_channel_s8, for int8 activations and weights, any ISA's program
// (its kernel sums, with the input offset folded in, taken as the bias). No buffer; unprepared.
void linear_quads_out(
    CallContext& context, const Tensor& input, const Tensor& weight,
    const std::optional<Tensor>& bias, const std::optional<Tensor>& kernel_sums,
    const std::optional<Tensor>& multipliers, const std::optional<Tensor>& shifts,
    int64_t input_offset, int64_t output_offset, int64_t multiplier, int64_t shift,
    int64_t activation_min, int64_t activation_max, int64_t path, Tensor& out) {
  const FcQuant q{
      input_offset, 0, output_offset, multiplier, shift, activation_min, activation_max};
  const LinearVectors v{bias, kernel_sums, multipliers, shifts};
  LinearShape shape{};
  if (!check_path(context, "linear", path, kQuadsPath) ||
      !check_shapes(context, input, weight, out, ScalarType::Char, &shape) ||
      (context.checks() && (!check_vectors(context, shape.out_features, v, q) ||
                            !check_fc_quant(context, "linear", q))) ||
      !runs_unprepared(context, "linear") || !context.computes()) {
    return;
  }
  cortex_m_nn_linear_prepared p = shape.entry(q, multipliers.has_value());
  if (kernel_sums.has_value()) {
    p.params.input_offset = 0;  // the sums hold the bias and the input offset's products
  }
  const cmsis_nn_context none{};
  const int32_t* start = optional_data<int32_t>(kernel_sums.has_value() ? kernel_sums : bias);
  const int8_t* in = input.const_data_ptr<int8_t>();
  const int8_t* w = weight.const_data_ptr<int8_t>();
  int8_t* o = out.mutable_data_ptr<int8_t>();
  const bool per_channel = multipliers.has_value();
  const Tensor* m = per_channel ? &multipliers.value() : nullptr;
  const Tensor* s = per_channel ? &shifts.value() : nullptr;
  check_status(context, "linear",
               per_channel ? fully_connected<true, true>(none, p, m, s, in, w, start, o)
                           : fully_connected<false, true>(none, p, m, s, in, w, start, o));
}

void linear_prepared(CallContext& context, EValue** args) {
  linear_s8_prepared<false>(context, args);
}

void linear_per_channel_prepared(CallContext& context, EValue** args) {
  linear_s8_prepared<true>(context, args);
}

}  // namespace native
}  // namespace cortex_m_nn
