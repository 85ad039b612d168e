// cortex_m_nn::mul.out → arm_elementwise_mul_s8, row by row for broadcast inputs.
// Reference: python/cortex_m_nn/ops/mul.py.
#include "cortex_m_nn/broadcast.h"
#include "cortex_m_nn/kernel_support.h"
#include "cortex_m_nn_operators.h"

extern "C" {
#include "arm_nnfunctions.h"
}

namespace cortex_m_nn {
namespace native {

void mul_out(
    KernelRuntimeContext& context,
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
  if (!check_broadcast(context, "mul", input1, input2, out)) {
    return;
  }
  CORTEX_M_NN_CHECK(
      context,
      fits_int32(output_multiplier) && output_shift >= -31 && output_shift <= 30 &&
          input1_offset >= -127 && input1_offset <= 128 && input2_offset >= -127 &&
          input2_offset <= 128 && output_offset >= -128 && output_offset <= 127 &&
          is_int8_range(activation_min, activation_max),
      "mul",
      "quantization parameters out of CMSIS-NN's range");
  for_each_row(
      context,
      "mul",
      input1,
      input2,
      out,
      [&](const int8_t* a, const int8_t* b, int8_t* o, int32_t n) {
        return arm_elementwise_mul_s8(
            a,
            b,
            static_cast<int32_t>(input1_offset),
            static_cast<int32_t>(input2_offset),
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
