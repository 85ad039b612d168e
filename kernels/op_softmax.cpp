// cortex_m_nn::softmax.out → arm_softmax_s8 over the last dimension (output scale 1/256,
// zero point -128). Reference: python/cortex_m_nn/ops/softmax.py.
#include "cortex_m_nn/kernel_support.h"
#include "cortex_m_nn_operators.h"

extern "C" {
#include "arm_nnfunctions.h"
}

namespace cortex_m_nn {
namespace native {

// Rows this long or longer can reach sums where CMSIS-NN's final shift is undefined.
constexpr int64_t kMaxSoftmaxRow = 511;

void softmax_out(
    CallContext& context,
    const Tensor& input,
    int64_t multiplier,
    int64_t shift,
    int64_t diff_min,
    Tensor& out) {
  CORTEX_M_NN_CHECK(
          context,
          is_type(input, ScalarType::Char) && is_type(out, ScalarType::Char) && input.dim() >= 1 &&
              out.numel() == input.numel(),
          "softmax",
          "input and out must be int8 tensors of the same size");
  const int32_t row = input.size(input.dim() - 1);  // 32-bit: no 64-bit division below
  CORTEX_M_NN_CHECK(
          context,
          row >= 1 && row <= kMaxSoftmaxRow && fits_int32(multiplier) && shift >= 0 &&
              shift <= 31 && fits_int32(diff_min),
          "softmax",
          "row of %d (1..%d supported) or parameters out of range", (int)row,
          (int)kMaxSoftmaxRow);
  const cortex_m_nn_softmax_prepared p{
      static_cast<int32_t>(input.numel()) / row, row, static_cast<int32_t>(multiplier),
      static_cast<int32_t>(shift), static_cast<int32_t>(diff_min)};
  if (context.checks() &&
      !context.prepared_agrees("softmax", CORTEX_M_NN_PREPARED_SOFTMAX, &p, sizeof(p))) {
    return;
  }
  if (context.computes()) {
    arm_softmax_s8(
        input.const_data_ptr<int8_t>(), p.rows, p.row, p.multiplier, p.shift, p.diff_min,
        out.mutable_data_ptr<int8_t>());
  }
}

void softmax_prepared(CallContext& context, EValue** args) {
  const auto& p = *static_cast<const cortex_m_nn_softmax_prepared*>(context.prepared());
  arm_softmax_s8(
      proven_tensor(args, softmax_args::input).const_data_ptr<int8_t>(), p.rows, p.row,
      p.multiplier, p.shift, p.diff_min,
      proven_tensor(args, softmax_args::out).mutable_data_ptr<int8_t>());
}

}  // namespace native
}  // namespace cortex_m_nn
