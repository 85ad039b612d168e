// What the requantizing element-wise kernels (add, mul) share: the broadcast check, the check
// of their quantization parameters, and the row-by-row walk that calls CMSIS-NN on each
// output row. Each kernel adds only which parameters it takes and its CMSIS-NN call; int16 is a
// case in the same kernel (the element type of the walk, the s16 function).
#pragma once

#include <cstdint>

#include "cortex_m_nn/broadcast.h"
#include "cortex_m_nn/kernel_checks.h"

namespace cortex_m_nn {
namespace native {

// The output side of a requantizing element-wise kernel: offset, requantization, clamp.
struct OutputQuant {
  int64_t offset;
  int64_t multiplier;
  int64_t shift;
  int64_t activation_min;
  int64_t activation_max;

  // The same as CMSIS-NN's int32 arguments (once valid).
  struct Int32 {
    int32_t offset, multiplier, shift, activation_min, activation_max;
  };

  // In CMSIS-NN's ranges for an int8 output.
  bool valid_s8() const {
    return is_requantization(multiplier, shift) && is_s8_output_offset(offset) &&
        is_int8_range(activation_min, activation_max);
  }

  // In the s16 kernels' ranges: the offset 0 (they ignore it), an int16 range.
  bool valid_s16() const {
    return is_requantization(multiplier, shift) && offset == 0 &&
        is_int16_range(activation_min, activation_max);
  }

  Int32 int32() const {
    return Int32{
        static_cast<int32_t>(offset),
        static_cast<int32_t>(multiplier),
        static_cast<int32_t>(shift),
        static_cast<int32_t>(activation_min),
        static_cast<int32_t>(activation_max)};
  }
};

// Checks that input1, input2 and out broadcast (broadcast.h) as tensors of T (int8_t; int16_t
// for the s16 kernels) and that `parameters_valid` (the kernel's quantization parameters are in
// CMSIS-NN's range), then calls block(x, y, out, n) for every output row. Fails the call
// otherwise.
template <typename T = int8_t, typename Block>
void elementwise_rows(
    CallContext& context,
    const char* op,
    const Tensor& input1,
    const Tensor& input2,
    Tensor& out,
    bool parameters_valid,
    Block block) {
  if (context.checks()) {
    using executorch::runtime::CppTypeToScalarType;
    if (!check_broadcast(context, op, input1, input2, out, CppTypeToScalarType<T>::value)) {
      return;
    }
    if (!parameters_valid) {
      refuse(context, op, "quantization parameters out of CMSIS-NN's range");
      return;
    }
  }
  if (!context.computes()) {
    return;
  }
  check_status(context, op, for_each_row<T>(input1, input2, out, block));
}

}  // namespace native
}  // namespace cortex_m_nn
