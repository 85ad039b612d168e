// cortex_m_nn::softmax.out → arm_softmax_s8 over the last dimension (softmax_out: output scale
// 1/256, zero point -128); the int16 case (softmax_int16_out, an int16 input) → arm_softmax_s16
// with the two int16[513] tables the compiler made (output scale 1/32768, zero point 0). Reference: python/cortex_m_nn/ops/softmax.py.
#include "cortex_m_nn/kernel_support.h"
#include "cortex_m_nn_operators.h"

extern "C" {
#include "arm_nnfunctions.h"
}

namespace cortex_m_nn {
namespace native {

// Rows this long or longer can reach sums where CMSIS-NN's final shift is undefined.
constexpr int64_t kMaxSoftmaxRow = 511;
// Entries of each int16 table; the largest shift keeping an int16 difference in int32.
constexpr int64_t kS16Table = 513;
constexpr int64_t kS16MaxShift = 15;

namespace {
bool is_table(const std::optional<Tensor>& table) {
  return table.has_value() && has_layout(table.value(), ScalarType::Short, 1) &&
      table.value().size(0) == kS16Table;
}

// The int16 case: rows of two or more (a row of one wraps in CMSIS-NN), two tables, a shift
// that keeps x - max in int32; unprepared.
void softmax_s16(
    CallContext& context, const Tensor& input, const std::optional<Tensor>& exp_table,
    const std::optional<Tensor>& reciprocal_table, int64_t multiplier, int64_t shift,
    Tensor& out) {
  const int32_t row = input.size(input.dim() - 1);
  CORTEX_M_NN_CHECK(
      context,
      is_type(out, ScalarType::Short) && out.numel() == input.numel() && row >= 2 &&
          is_table(exp_table) && is_table(reciprocal_table) && multiplier >= 0 &&
          multiplier <= INT32_MAX && shift >= -31 && shift <= kS16MaxShift,
      "softmax",
      "int16: out int16 of the input's size, rows of 2 or more, two int16[513] tables, "
      "multiplier in [0, 2^31) and shift in [-31, 15]");
  if (!runs_unprepared(context, "softmax") || !context.computes()) {
    return;
  }
  const cmsis_nn_softmax_lut_s16 tables{
      exp_table.value().const_data_ptr<int16_t>(),
      reciprocal_table.value().const_data_ptr<int16_t>()};
  check_status(
      context, "softmax",
      arm_softmax_s16(
          input.const_data_ptr<int16_t>(), static_cast<int32_t>(input.numel() / row), row,
          static_cast<int32_t>(multiplier), static_cast<int32_t>(shift), &tables,
          out.mutable_data_ptr<int16_t>()));
}
}  // namespace

void softmax_out(
    CallContext& context,
    const Tensor& input,
    const std::optional<Tensor>& exp_table,
    const std::optional<Tensor>& reciprocal_table,
    int64_t multiplier,
    int64_t shift,
    int64_t diff_min,
    Tensor& out) {
  CORTEX_M_NN_CHECK(
          context,
          is_type(input, ScalarType::Char) && is_type(out, ScalarType::Char) && input.dim() >= 1 &&
              out.numel() == input.numel() && !exp_table.has_value() &&
              !reciprocal_table.has_value(),
          "softmax",
          "input and out must be int8 tensors of the same size, without tables");
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

void softmax_int16_out(
    CallContext& context, const Tensor& input, const std::optional<Tensor>& exp_table,
    const std::optional<Tensor>& reciprocal_table, int64_t multiplier, int64_t shift,
    int64_t diff_min, Tensor& out) {
  (void)diff_min;  // the int8 case's
  CORTEX_M_NN_CHECK(context, input.dim() >= 1, "softmax", "int16: the input needs a dimension");
  softmax_s16(context, input, exp_table, reciprocal_table, multiplier, shift, out);
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
