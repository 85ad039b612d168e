// Value checks and conversions that several kernels share, on top of kernel_support.h: the
// ranges CMSIS-NN accepts for requantization parameters and offsets, and the CMSIS-NN structs
// built from them. Each is a predicate or a conversion; the kernels decide what to log.
#pragma once

#include <cstdint>

#include "cortex_m_nn/kernel_support.h"

extern "C" {
#include "arm_nnfunctions.h"
}

namespace cortex_m_nn {
namespace native {

// A requantization shift CMSIS-NN applies (negative: right).
inline bool is_shift(int64_t shift) {
  return shift >= -31 && shift <= 30;
}

// Every element of an int32 tensor of per-channel shifts is a shift CMSIS-NN applies. The
// values come from the program's constants: a damaged .pte would otherwise shift by any amount.
inline bool are_shifts(const Tensor& shifts) {
  const int32_t* values = shifts.const_data_ptr<int32_t>();
  for (ssize_t i = 0; i < shifts.numel(); ++i) {
    if (!is_shift(values[i])) {
      return false;
    }
  }
  return true;
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
inline bool refuse(KernelRuntimeContext& context, const char* op, const char* message) {
  ET_LOG(Error, "cortex_m_nn::%s: %s", op, message);
  context.fail(Error::InvalidArgument);
  return false;
}

}  // namespace native
}  // namespace cortex_m_nn
