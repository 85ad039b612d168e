// cortex_m_nn::mul.out → arm_elementwise_mul_s8 (mul_out), the int16 case (mul_int16_out)
// arm_elementwise_mul_s16, row by row for broadcast inputs (see cortex_m_nn/elementwise.h). Reference: python/cortex_m_nn/ops/mul.py.
#include "cortex_m_nn/elementwise.h"
#include "cortex_m_nn_operators.h"

namespace cortex_m_nn {
namespace native {

namespace {
// The int16 case: arm_elementwise_mul_s16 (offsets 0: it ignores them; a shift of at most 14,
// which keeps an activation times a one-element constant in int32; the compiler bounds two
// activations' 2^30 products tighter), unprepared.
void mul_s16(CallContext& context, const Tensor& input1, const Tensor& input2,
             const OutputQuant& output, bool offsets_zero, Tensor& out) {
  const bool valid = output.valid_s16() && offsets_zero && output.shift <= 14;
  if (!runs_unprepared(context, "mul")) {
    return;
  }
  const OutputQuant::Int32 q = output.int32();
  elementwise_rows<int16_t>(
      context, "mul", input1, input2, out, valid,
      [&](const int16_t* a, const int16_t* b, int16_t* o, int32_t n) {
        return arm_elementwise_mul_s16(
            a, b, 0, 0, o, 0, q.multiplier, q.shift, q.activation_min, q.activation_max, n);
      });
}
}  // namespace

void mul_out(
    CallContext& context,
    const Tensor& input1,
    const Tensor& input2,
    int64_t input1_offset,
    int64_t input2_offset,
    int64_t output_offset,
    int64_t output_multiplier,
    int64_t output_shift,
    int64_t activation_min,
    int64_t activation_max,
    Tensor& out) {
  const OutputQuant output{
      output_offset, output_multiplier, output_shift, activation_min, activation_max};
  const bool valid = output.valid_s8() && is_s8_input_offset(input1_offset) &&
      is_s8_input_offset(input2_offset);
  const OutputQuant::Int32 q = output.int32();
  elementwise_rows(
      context, "mul", input1, input2, out, valid,
      [&](const int8_t* a, const int8_t* b, int8_t* o, int32_t n) {
        return arm_elementwise_mul_s8(
            a, b, static_cast<int32_t>(input1_offset), static_cast<int32_t>(input2_offset),
            o, q.offset, q.multiplier, q.shift, q.activation_min, q.activation_max, n);
      });
}

void mul_int16_out(
    CallContext& context, const Tensor& input1, const Tensor& input2, int64_t input1_offset,
    int64_t input2_offset, int64_t output_offset, int64_t output_multiplier, int64_t output_shift,
    int64_t activation_min, int64_t activation_max, Tensor& out) {
  const OutputQuant output{
      output_offset, output_multiplier, output_shift, activation_min, activation_max};
  mul_s16(context, input1, input2, output, input1_offset == 0 && input2_offset == 0, out);
}

}  // namespace native
}  // namespace cortex_m_nn
