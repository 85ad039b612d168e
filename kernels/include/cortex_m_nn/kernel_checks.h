// Value checks and conversions that several kernels share, on top of kernel_support.h: the
// ranges CMSIS-NN accepts for requantization parameters and offsets, and the CMSIS-NN structs
// built from them. Each is a predicate or a conversion; the kernels decide what to log.
#pragma once

#include <cstdint>

#include "cortex_m_nn/kernel_support.h"

extern "C" {
#include "arm_nnfunctions.h"
}
// Declares its own C linkage; brings arm_mve.h (are_shifts' MVE loop) on MVE builds.
#include "arm_nnsupportfunctions.h"

namespace cortex_m_nn {
namespace native {

// A requantization shift CMSIS-NN applies (negative: right).
inline bool is_shift(int64_t shift) {
  return shift >= -31 && shift <= 30;
}

// Every element of an int32 tensor of per-channel shifts is a shift CMSIS-NN applies. The
// values come from the program's constants: a damaged .pte would otherwise shift by any amount.
// Checked on every call, so kept cheap: a branch-free OR over the channels, four at a time on
// MVE, not a compare and branch each. In 32-bit two's complement, v + 31 and 30 - v are both in
// [0, 61] exactly when v is in [-31, 30]; otherwise one of them has its top bit set.
inline bool are_shifts(const Tensor& shifts) {
  const int32_t* values = shifts.const_data_ptr<int32_t>();
  const int32_t count = static_cast<int32_t>(shifts.numel());
  uint32_t outside = 0;
#if defined(ARM_MATH_MVEI)
  uint32x4_t lanes = vdupq_n_u32(0);
  for (int32_t i = 0; i < count; i += 4) {  // lanes past the end load 0, a valid shift
    const uint32x4_t v = vldrwq_z_u32(
        reinterpret_cast<const uint32_t*>(values + i), vctp32q(static_cast<uint32_t>(count - i)));
    lanes = vorrq_u32(lanes, vorrq_u32(vaddq_n_u32(v, 31u), vsubq_u32(vdupq_n_u32(30u), v)));
  }
  outside = vmaxvq_u32(0u, lanes);  // the top bit of the largest is set if any lane's is
#else
  for (int32_t i = 0; i < count; ++i) {
    const uint32_t v = static_cast<uint32_t>(values[i]);
    outside |= (v + 31u) | (30u - v);
  }
#endif
  return (outside & 0x80000000u) == 0;
}

// A per-tensor requantization: an int32 multiplier and a shift.
inline bool is_requantization(int64_t multiplier, int64_t shift) {
  return fits_int32(multiplier) && is_shift(shift);
}

// The offset added to an int8 input (its negated zero point).
inline bool is_s8_input_offset(int64_t offset) {
  return offset >= -127 && offset <= 128;
}

// The offset added to an int8 output (its zero point).
inline bool is_s8_output_offset(int64_t offset) {
  return offset >= -128 && offset <= 127;
}

// Input and out of `type` with one rank in [lowest, highest].
inline bool same_rank(
    const Tensor& input, const Tensor& out, ScalarType type, ssize_t lowest, ssize_t highest) {
  return is_type(input, type) && is_type(out, type) && input.dim() >= lowest &&
      input.dim() <= highest && out.dim() == input.dim();
}

inline cmsis_nn_activation activation_range(int64_t min, int64_t max) {
  return cmsis_nn_activation{static_cast<int32_t>(min), static_cast<int32_t>(max)};
}

inline cmsis_nn_per_tensor_quant_params per_tensor_quant(int64_t multiplier, int64_t shift) {
  return cmsis_nn_per_tensor_quant_params{
      static_cast<int32_t>(multiplier), static_cast<int32_t>(shift)};
}

// Log "cortex_m_nn::<op>: <message>" and fail the call; false, for `return refuse(...)`.
inline bool refuse(CallContext& context, const char* op, const char* message) {
  ET_LOG(Error, "cortex_m_nn::%s: %s", op, message);
  context.fail(Error::InvalidArgument);
  return false;
}

}  // namespace native
}  // namespace cortex_m_nn
