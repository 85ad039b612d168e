// cortex_m_nn::add.out → arm_elementwise_add_s8 (same-shape int8 tensors).
// Reference: python/cortex_m_nn/ops/add.py.
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
  CORTEX_M_NN_CHECK(
          context,
          is_type(input1, ScalarType::Char) && is_type(input2, ScalarType::Char) &&
              is_type(out, ScalarType::Char) && input1.numel() == input2.numel() &&
              out.numel() == input1.numel(),
          "add",
          "inputs and out must be int8 with the same number of elements (%d, %d, %d)",
          (int)input1.numel(), (int)input2.numel(), (int)out.numel());
  CORTEX_M_NN_CHECK(
          context,
          fits_int32(input1_multiplier) && fits_int32(input2_multiplier) &&
              fits_int32(output_multiplier) && input1_shift >= -31 && input1_shift <= 30 &&
              input2_shift >= -31 && input2_shift <= 30 && output_shift >= -31 &&
              output_shift <= 30 && left_shift >= 0 && left_shift <= 30 &&
              input1_offset >= -127 && input1_offset <= 128 && input2_offset >= -127 &&
              input2_offset <= 128 && output_offset >= -128 && output_offset <= 127 &&
              is_int8_range(activation_min, activation_max),
          "add",
          "quantization parameters out of CMSIS-NN's range");
  check_status(
      context,
      "add",
      arm_elementwise_add_s8(
          input1.const_data_ptr<int8_t>(),
          input2.const_data_ptr<int8_t>(),
          static_cast<int32_t>(input1_offset),
          static_cast<int32_t>(input1_multiplier),
          static_cast<int32_t>(input1_shift),
          static_cast<int32_t>(input2_offset),
          static_cast<int32_t>(input2_multiplier),
          static_cast<int32_t>(input2_shift),
          static_cast<int32_t>(left_shift),
          out.mutable_data_ptr<int8_t>(),
          static_cast<int32_t>(output_offset),
          static_cast<int32_t>(output_multiplier),
          static_cast<int32_t>(output_shift),
          static_cast<int32_t>(activation_min),
          static_cast<int32_t>(activation_max),
          static_cast<int32_t>(input1.numel())));
}

}  // namespace native
}  // namespace cortex_m_nn
