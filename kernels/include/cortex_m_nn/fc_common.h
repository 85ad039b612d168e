// What the matrix kernels (linear, batch_matmul) share: the check of their per-tensor
// requantization, offsets and activation range, and CMSIS-NN's fully-connected params and
// quantization built from them. A new dtype (int16 activations, int4 weights) is a case in
// the same kernel over the same params: see docs/adding-an-operator.md.
#pragma once

#include <cstdint>
#include <initializer_list>

#include "cortex_m_nn/kernel_checks.h"

namespace cortex_m_nn {
namespace native {

// The scalars of one per-tensor requantizing matrix product.
struct FcQuant {
  int64_t input_offset;   // added to the left operand (linear: the input)
  int64_t filter_offset;  // added to the right operand (linear: the weight, always 0)
  int64_t output_offset;
  int64_t multiplier;
  int64_t shift;
  int64_t activation_min;
  int64_t activation_max;

  cmsis_nn_fc_params params() const {
    cmsis_nn_fc_params p{};
    p.input_offset = static_cast<int32_t>(input_offset);
    p.filter_offset = static_cast<int32_t>(filter_offset);
    p.output_offset = static_cast<int32_t>(output_offset);
    p.activation = activation_range(activation_min, activation_max);
    return p;
  }

  cmsis_nn_per_tensor_quant_params quant() const {
    return per_tensor_quant(multiplier, shift);
  }
};

// The requantization in CMSIS-NN's range, the offsets int32, the activation range int8 (unless
// the call is proven); fails the call otherwise.
inline bool check_fc_quant(CallContext& context, const char* op, const FcQuant& q) {
  if (!context.checks()) {
    return true;
  }
  bool ok = is_requantization(q.multiplier, q.shift) &&
      is_int8_range(q.activation_min, q.activation_max);
  for (int64_t offset : {q.input_offset, q.filter_offset, q.output_offset}) {
    ok = ok && fits_int32(offset);
  }
  return ok || refuse(context, op, "multiplier, shift, offsets or activation range out of range");
}

// The int16 case (arm_fully_connected_s16, arm_batch_matmul_s16): offsets 0 (the kernels ignore
// them), a multiplier in [0, 2^31) with a shift in [-31, 14] (arm_nn_requantize_s64's Q15
// stage), an int16 activation range. A check only: the caller refuses with its own message.
inline bool is_fc_quant_s16(const FcQuant& q) {
  return q.input_offset == 0 && q.filter_offset == 0 && q.output_offset == 0 &&
      q.multiplier >= 0 && q.multiplier <= INT32_MAX && q.shift >= -31 && q.shift <= 14 &&
      is_int16_range(q.activation_min, q.activation_max);
}

}  // namespace native
}  // namespace cortex_m_nn
