// cortex_m_nn::add.out → arm_elementwise_add_s8, row by row for broadcast inputs. Also runs
// sub: the lowering negates input 2's multiplier. Reference: python/cortex_m_nn/ops/add.py.
#include "cortex_m_nn/broadcast.h"
#include "cortex_m_nn/kernel_support.h"
#include "cortex_m_nn_operators.h"

extern "C" {
#include "arm_nnfunctions.h"
}

namespace cortex_m_nn {
namespace native {

void add_out(
    KernelRuntimeContext& context,
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
  if (!check_broadcast(context, "add", input1, input2, out)) {
    return;
  }
  CORTEX_M_NN_CHECK(
      context,
      fits_int32(input1_multiplier) && fits_int32(input2_multiplier) &&
          fits_int32(output_multiplier) && input1_shift >= -31 && input1_shift <= 30 &&
          input2_shift >= -31 && input2_shift <= 30 && output_shift >= -31 &&
          output_shift <= 30 && left_shift >= 0 && left_shift <= 30 && input1_offset >= -127 &&
          input1_offset <= 128 && input2_offset >= -127 && input2_offset <= 128 &&
          output_offset >= -128 && output_offset <= 127 &&
          is_int8_range(activation_min, activation_max),
      "add",
      "quantization parameters out of CMSIS-NN's range");
  for_each_row(
      context,
      "add",
      input1,
      input2,
      out,
      [&](const int8_t* a, const int8_t* b, int8_t* o, int32_t n) {
        return arm_elementwise_add_s8(
            a,
            b,
            static_cast<int32_t>(input1_offset),
            static_cast<int32_t>(input1_multiplier),
            static_cast<int32_t>(input1_shift),
            static_cast<int32_t>(input2_offset),
            static_cast<int32_t>(input2_multiplier),
            static_cast<int32_t>(input2_shift),
            static_cast<int32_t>(left_shift),
            o,
            static_cast<int32_t>(output_offset),
            static_cast<int32_t>(output_multiplier),
            static_cast<int32_t>(output_shift),
            static_cast<int32_t>(activation_min),
            static_cast<int32_t>(activation_max),
            n);
      });
}

}  // namespace native
}  // namespace cortex_m_nn
