// cortex_m_nn::batch_matmul.out → arm_batch_matmul_s8 (right operand given transposed,
// per-tensor requantization, up to two broadcast batch dimensions); int16 operands →
// arm_batch_matmul_s16 (offsets 0, no scratch).
// Quantization checks and params: cortex_m_nn/fc_common.h.
// Reference: python/cortex_m_nn/ops/batch_matmul.py.
#include "cortex_m_nn/broadcast.h"
#include "cortex_m_nn/fc_common.h"
#include "cortex_m_nn_operators.h"

namespace cortex_m_nn {
namespace native {

namespace {
constexpr const char* kOp = "batch_matmul";

bool broadcasts(int32_t a, int32_t b, int32_t out) {
  return (a == b && out == a) || (a == 1 && out == b) || (b == 1 && out == a);
}

void batch_matmul_s16(
    CallContext& context,
    const Tensor& lhs,
    const Tensor& rhs_transposed,
    const FcQuant& q,
    int64_t scratch_bytes,
    const cmsis_nn_dims& lhs_dims,
    const cmsis_nn_dims& rhs_dims,
    const cmsis_nn_dims& output_dims,
    Tensor& out) {
  CORTEX_M_NN_CHECK(
      context,
      is_type(rhs_transposed, ScalarType::Short) && is_type(out, ScalarType::Short) &&
          is_fc_quant_s16(q) && scratch_bytes == 0,
      "batch_matmul",
      "int16 batch_matmul takes int16 operands and out, zero offsets, a shift in [-31, 14], an "
      "int16 activation range and no scratch");
  if (!context.computes()) {
    return;
  }
  const cmsis_nn_context buffer{};  // unused by arm_batch_matmul_s16
  const cmsis_nn_bmm_params params{false, false, q.params()};
  const cmsis_nn_per_tensor_quant_params quant = q.quant();
  check_status(
      context,
      kOp,
      arm_batch_matmul_s16(
          &buffer, &params, &quant, &lhs_dims, lhs.const_data_ptr<int16_t>(), &rhs_dims,
          rhs_transposed.const_data_ptr<int16_t>(), &output_dims, out.mutable_data_ptr<int16_t>()));
}
}  // namespace

void batch_matmul_out(
    CallContext& context,
    const Tensor& lhs,
    const Tensor& rhs_transposed,
    int64_t lhs_offset,
    int64_t rhs_offset,
    int64_t output_offset,
    int64_t multiplier,
    int64_t shift,
    int64_t activation_min,
    int64_t activation_max,
    int64_t scratch_bytes,
    Tensor& out,
    Tensor& scratch) {
  const ScalarType type = is_type(lhs, ScalarType::Short) ? ScalarType::Short : ScalarType::Char;
  CORTEX_M_NN_CHECK(
      context,
      is_type(lhs, type) && lhs.dim() >= 2 && lhs.dim() <= 4 && rhs_transposed.dim() >= 2 &&
          rhs_transposed.dim() <= 4 && out.dim() >= 2 && out.dim() <= 4,
      "batch_matmul",
      "operands and out must be 2-D to 4-D int8 (or int16) tensors");
  const cmsis_nn_dims lhs_dims = dims4(shape4(lhs));
  const cmsis_nn_dims rhs_dims = dims4(shape4(rhs_transposed));
  const cmsis_nn_dims output_dims = dims4(shape4(out));
  CORTEX_M_NN_CHECK(
      context,
      lhs_dims.c == rhs_dims.c && output_dims.w == lhs_dims.w && output_dims.c == rhs_dims.w &&
          broadcasts(lhs_dims.n, rhs_dims.n, output_dims.n) &&
          broadcasts(lhs_dims.h, rhs_dims.h, output_dims.h),
      "batch_matmul",
      "shapes disagree: lhs [.., %d, %d], transposed rhs [.., %d, %d], out [.., %d, %d]",
      (int)lhs_dims.w, (int)lhs_dims.c, (int)rhs_dims.w, (int)rhs_dims.c, (int)output_dims.w,
      (int)output_dims.c);
  const FcQuant q{
      lhs_offset, rhs_offset, output_offset, multiplier, shift, activation_min, activation_max};
  if (type == ScalarType::Short) {
    batch_matmul_s16(
        context, lhs, rhs_transposed, q, scratch_bytes, lhs_dims, rhs_dims, output_dims, out);
    return;
  }
  CORTEX_M_NN_CHECK(
      context,
      is_type(rhs_transposed, ScalarType::Char) && is_type(out, ScalarType::Char),
      "batch_matmul",
      "int8 operands need an int8 rhs and out");
  if (!check_fc_quant(context, kOp, q)) {
    return;
  }

  cmsis_nn_context buffer{};
  // The filter dims CMSIS-NN sizes the kernel sums from: n = columns, c = rows of the rhs.
  const cmsis_nn_dims filter_dims{rhs_dims.c, 1, 1, rhs_dims.w};
  const auto kernel_sums = [&] { return arm_fully_connected_s8_get_buffer_size(&filter_dims); };
  if (!scratch_context(context, kOp, scratch, kernel_sums, &buffer) || !context.computes()) {
    return;
  }
  const cmsis_nn_bmm_params params{false, false, q.params()};
  const cmsis_nn_per_tensor_quant_params quant = q.quant();
  check_status(
      context,
      kOp,
      arm_batch_matmul_s8(
          &buffer,
          &params,
          &quant,
          &lhs_dims,
          lhs.const_data_ptr<int8_t>(),
          &rhs_dims,
          rhs_transposed.const_data_ptr<int8_t>(),
          &output_dims,
          out.mutable_data_ptr<int8_t>()));
}

}  // namespace native
}  // namespace cortex_m_nn
