// cortex_m_nn::batch_matmul.out → arm_batch_matmul_s8 (batch_matmul_out: right operand given
// transposed, per-tensor requantization, up to two broadcast batch dimensions); the int16 case
// (batch_matmul_int16_out, int16 operands) → arm_batch_matmul_s16 (offsets 0, no scratch).
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

// The operands' and out's dims as CMSIS-NN's: 2-D to 4-D tensors of `type` (lhs's; the cases
// check rhs and out), inner dims that multiply, batch dims equal or broadcast.
struct BatchDims {
  cmsis_nn_dims lhs, rhs, output;
};

bool batch_dims(CallContext& context, const Tensor& lhs, const Tensor& rhs_transposed,
                const Tensor& out, ScalarType type, BatchDims* dims) {
  if (context.checks() &&
      !(is_type(lhs, type) && lhs.dim() >= 2 && lhs.dim() <= 4 && rhs_transposed.dim() >= 2 &&
        rhs_transposed.dim() <= 4 && out.dim() >= 2 && out.dim() <= 4)) {
    return refuse(context, kOp, "operands and out must be 2-D to 4-D int8 (or int16) tensors");
  }
  *dims = BatchDims{dims4(shape4(lhs)), dims4(shape4(rhs_transposed)), dims4(shape4(out))};
  const cmsis_nn_dims& l = dims->lhs;
  const cmsis_nn_dims& r = dims->rhs;
  const cmsis_nn_dims& o = dims->output;
  if (context.checks() &&
      !(l.c == r.c && o.w == l.w && o.c == r.w && broadcasts(l.n, r.n, o.n) &&
        broadcasts(l.h, r.h, o.h))) {
    ET_LOG(Error, "cortex_m_nn::batch_matmul: shapes disagree: lhs [.., %d, %d], transposed rhs "
                  "[.., %d, %d], out [.., %d, %d]",
           (int)l.w, (int)l.c, (int)r.w, (int)r.c, (int)o.w, (int)o.c);
    context.fail(Error::InvalidArgument);
    return false;
  }
  return true;
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
  (void)scratch_bytes;  // the planned scratch tensor carries its size
  BatchDims dims;
  if (!batch_dims(context, lhs, rhs_transposed, out, ScalarType::Char, &dims)) {
    return;
  }
  const FcQuant q{
      lhs_offset, rhs_offset, output_offset, multiplier, shift, activation_min, activation_max};
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
  const cmsis_nn_dims filter_dims{dims.rhs.c, 1, 1, dims.rhs.w};
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
          &dims.lhs,
          lhs.const_data_ptr<int8_t>(),
          &dims.rhs,
          rhs_transposed.const_data_ptr<int8_t>(),
          &dims.output,
          out.mutable_data_ptr<int8_t>()));
}

void batch_matmul_int16_out(
    CallContext& context, const Tensor& lhs, const Tensor& rhs_transposed, int64_t lhs_offset,
    int64_t rhs_offset, int64_t output_offset, int64_t multiplier, int64_t shift,
    int64_t activation_min, int64_t activation_max, int64_t scratch_bytes, Tensor& out,
    Tensor& scratch) {
  (void)scratch;  // none: checked below
  BatchDims dims;
  if (!batch_dims(context, lhs, rhs_transposed, out, ScalarType::Short, &dims)) {
    return;
  }
  const FcQuant q{
      lhs_offset, rhs_offset, output_offset, multiplier, shift, activation_min, activation_max};
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
          &buffer, &params, &quant, &dims.lhs, lhs.const_data_ptr<int16_t>(), &dims.rhs,
          rhs_transposed.const_data_ptr<int16_t>(), &dims.output, out.mutable_data_ptr<int16_t>()));
}

}  // namespace native
}  // namespace cortex_m_nn
