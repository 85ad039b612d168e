// cortex_m_nn::add.out → arm_elementwise_add_s8, row by row for broadcast inputs (see
// cortex_m_nn/elementwise.h). Also runs sub: the lowering negates input 2's multiplier.
// Reference: python/cortex_m_nn/ops/add.py.
#include "cortex_m_nn/elementwise.h"
#include "cortex_m_nn_operators.h"

namespace cortex_m_nn {
namespace native {

void add_out(
    CallContext& context,
    const Tensor& input1,
    const Tensor& input2,
    int64_t input1_offset,
    int64_t input1_multiplier,
    int64_t input1_shift,
    int64_t input2_offset,
    int64_t input2_multiplier,
    int64_t input2_shift,
    int64_t left_shift,
    int64_t output_offset,
    int64_t output_multiplier,
    int64_t output_shift,
    int64_t activation_min,
    int64_t activation_max,
    Tensor& out) {
  const OutputQuant output{
      output_offset, output_multiplier, output_shift, activation_min, activation_max};
  const bool valid = output.valid_s8() && is_requantization(input1_multiplier, input1_shift) &&
      is_requantization(input2_multiplier, input2_shift) && left_shift >= 0 &&
      left_shift <= 30 && is_s8_input_offset(input1_offset) && is_s8_input_offset(input2_offset);
  const OutputQuant::Int32 q = output.int32();
  elementwise_rows(
      context, "add", input1, input2, out, valid,
      [&](const int8_t* a, const int8_t* b, int8_t* o, int32_t n) {
        return arm_elementwise_add_s8(
            a, b,
            static_cast<int32_t>(input1_offset), static_cast<int32_t>(input1_multiplier),
            static_cast<int32_t>(input1_shift),
            static_cast<int32_t>(input2_offset), static_cast<int32_t>(input2_multiplier),
            static_cast<int32_t>(input2_shift),
            static_cast<int32_t>(left_shift),
            o, q.offset, q.multiplier, q.shift, q.activation_min, q.activation_max, n);
      });
}

}  // namespace native
}  // namespace cortex_m_nn
