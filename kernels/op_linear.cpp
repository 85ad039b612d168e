// cortex_m_nn::linear.out → arm_fully_connected_s8 (per-tensor requantization). On MVE the
// program passes the compile-time kernel sums (bias folded in) as CMSIS-NN's context buffer;
// elsewhere it passes the bias. Quantization checks and params: cortex_m_nn/fc_common.h.
// Reference: python/cortex_m_nn/ops/linear.py.
#include "cortex_m_nn/fc_common.h"
#include "cortex_m_nn_operators.h"

namespace cortex_m_nn {
namespace native {

namespace {
// CMSIS-NN's context for arm_fully_connected_s8: the program's kernel sums on MVE (which
// needs them), nothing elsewhere. Fails the call when the .pte was compiled for the other.
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
  // checked by linear_out: int32 [out_features]
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
}  // namespace

void linear_out(
    CallContext& context,
    const Tensor& input,
    const Tensor& weight,
    const std::optional<Tensor>& bias,
    const std::optional<Tensor>& kernel_sums,
    int64_t input_offset,
    int64_t output_offset,
    int64_t multiplier,
    int64_t shift,
    int64_t activation_min,
    int64_t activation_max,
    Tensor& out) {
  CORTEX_M_NN_CHECK(
      context,
      is_type(input, ScalarType::Char) && input.dim() >= 1 &&
          has_layout(weight, ScalarType::Char, 2) && is_type(out, ScalarType::Char) &&
          out.dim() == input.dim(),
      "linear",
      "input and out must be int8 [..., features], weight int8 [out, in]");
  // Sizes and element counts are 32-bit in ExecuTorch's runtime: no 64-bit division per call.
  const int32_t in_features = weight.size(1), out_features = weight.size(0);
  const int32_t batches = in_features ? static_cast<int32_t>(input.numel()) / in_features : 0;
  CORTEX_M_NN_CHECK(
      context,
      input.size(input.dim() - 1) == in_features &&
          out.size(out.dim() - 1) == out_features &&
          static_cast<int64_t>(input.numel()) == static_cast<int64_t>(batches) * in_features &&
          static_cast<int64_t>(out.numel()) == static_cast<int64_t>(batches) * out_features,
      "linear",
      "input [..., %d] and out [..., %d] do not match weight [%d, %d]",
      (int)input.size(input.dim() - 1), (int)out.size(out.dim() - 1), (int)out_features,
      (int)in_features);
  for (const auto* vector : {&bias, &kernel_sums}) {
    CORTEX_M_NN_CHECK(
        context,
        !vector->has_value() ||
            (has_layout(vector->value(), ScalarType::Int, 1) &&
             vector->value().size(0) == out_features),
        "linear",
        "bias and kernel sums must be int32 [%d]", (int)out_features);
  }
  const FcQuant q{
      input_offset, 0, output_offset, multiplier, shift, activation_min, activation_max};
  if (!check_fc_quant(context, "linear", q)) {
    return;
  }

  cmsis_nn_context buffer{};
  if (!kernel_sums_buffer(context, kernel_sums, &buffer)) {
    return;
  }

  const cmsis_nn_fc_params params = q.params();
  const cmsis_nn_per_tensor_quant_params quant = q.quant();
  const cmsis_nn_dims input_dims{batches, 1, 1, in_features};
  const cmsis_nn_dims filter_dims{in_features, 1, 1, out_features};
  const cmsis_nn_dims bias_dims{1, 1, 1, out_features};
  const cmsis_nn_dims output_dims{batches, 1, 1, out_features};
  if (context.checks()) {
    const cortex_m_nn_linear_prepared derived{
        params, quant, input_dims, filter_dims, bias_dims, output_dims};
    if (!context.prepared_agrees(
            "linear", CORTEX_M_NN_PREPARED_LINEAR, &derived, sizeof(derived))) {
      return;
    }
  }
  if (!context.computes()) {
    return;
  }
  check_status(
      context,
      "linear",
      arm_fully_connected_s8(
          &buffer,
          &params,
          &quant,
          &input_dims,
          input.const_data_ptr<int8_t>(),
          &filter_dims,
          weight.const_data_ptr<int8_t>(),
          &bias_dims,
          bias.has_value() ? bias.value().const_data_ptr<int32_t>() : nullptr,
          &output_dims,
          out.mutable_data_ptr<int8_t>()));
}

void linear_prepared(CallContext& context, EValue** args) {
  const auto& p = *static_cast<const cortex_m_nn_linear_prepared*>(context.prepared());
  using a = linear_args;
  // the program's kernel sums on MVE (the proof checked they are there), nothing elsewhere
  const Tensor* sums = args[a::kernel_sums]->isTensor() ? &proven_tensor(args, a::kernel_sums)
                                                        : nullptr;
  cmsis_nn_context buffer{
      sums ? const_cast<int32_t*>(sums->const_data_ptr<int32_t>()) : nullptr,
      sums ? static_cast<int32_t>(sums->numel() * sizeof(int32_t)) : 0};
  check_status(
      context,
      "linear",
      arm_fully_connected_s8(
          &buffer, &p.params, &p.quant, &p.input,
          proven_tensor(args, a::input).const_data_ptr<int8_t>(), &p.filter,
          proven_tensor(args, a::weight).const_data_ptr<int8_t>(), &p.bias,
          proven_optional_data<int32_t>(args, a::bias), &p.output,
          proven_tensor(args, a::out).mutable_data_ptr<int8_t>()));
}

}  // namespace native
}  // namespace cortex_m_nn
