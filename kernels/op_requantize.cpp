// cortex_m_nn::requantize.out: an int8 or int16 tensor into another quantization and dtype,
// where a model's precision changes between int8 and int16 regions (--activations int16).
// CMSIS-NN has no such kernel; ours applies its s8 output stage, arm_nn_requantize (with the
// rounding CMSIS-NN is built with), per element:
//   out = clamp(arm_nn_requantize(x + input_offset, multiplier, shift) + output_offset)
// clamped to out's dtype (`dtype`, the ScalarType code: Char = 1, Short = 2). int16 values have
// zero point 0. Reference: python/cortex_m_nn/ops/requantize.py.
#include <cstdint>
#include <limits>

#include "cortex_m_nn/kernel_checks.h"
#include "cortex_m_nn_operators.h"

namespace cortex_m_nn {
namespace native {

namespace {

// The largest |x + input_offset| of an int8 (offset in [-127, 128]) or int16 (offset 0) input.
constexpr int64_t kLargestS8 = 255;
constexpr int64_t kLargestS16 = 32768;

bool is_activation_type(ScalarType type) {
  return type == ScalarType::Char || type == ScalarType::Short;
}

// The offset a value of `type` carries: int8 within `low..high`, int16 only 0.
bool is_offset(ScalarType type, int64_t offset, int64_t low, int64_t high) {
  return type == ScalarType::Short ? offset == 0 : (offset >= low && offset <= high);
}

// One call's arithmetic, as arm_nn_requantize and the offsets take it.
struct Requantization {
  int32_t input_offset, output_offset, multiplier, shift;
};

template <typename In, typename Out>
void requantize_all(const Tensor& input, Tensor& out, const Requantization& r) {
  constexpr int32_t low = std::numeric_limits<Out>::min();
  constexpr int32_t high = std::numeric_limits<Out>::max();
  const In* source = input.const_data_ptr<In>();
  Out* destination = out.mutable_data_ptr<Out>();
  const ssize_t count = input.numel();
  for (ssize_t i = 0; i < count; ++i) {
    const int32_t value = static_cast<int32_t>(source[i]) + r.input_offset;
    int32_t q = arm_nn_requantize(value, r.multiplier, r.shift) + r.output_offset;
    q = q < low ? low : (q > high ? high : q);
    destination[i] = static_cast<Out>(q);
  }
}

// out's dtype (int8 or int16) picks the case.
template <typename In>
void requantize_from(const Tensor& input, Tensor& out, const Requantization& r) {
  if (out.scalar_type() == ScalarType::Short) {
    requantize_all<In, int16_t>(input, out, r);
  } else {
    requantize_all<In, int8_t>(input, out, r);
  }
}

}  // namespace

void requantize_out(
    CallContext& context,
    const Tensor& input,
    int64_t input_offset,
    int64_t output_offset,
    int64_t multiplier,
    int64_t shift,
    int64_t dtype,
    Tensor& out) {
  const ScalarType in_type = input.scalar_type();
  const ScalarType out_type = out.scalar_type();
  const int64_t largest = in_type == ScalarType::Short ? kLargestS16 : kLargestS8;
  CORTEX_M_NN_CHECK(
      context,
      is_activation_type(in_type) && is_activation_type(out_type) &&
          static_cast<int64_t>(out_type) == dtype && input.numel() == out.numel() &&
          is_offset(in_type, input_offset, -127, 128) &&
          is_offset(out_type, output_offset, -128, 127) && multiplier >= 0 &&
          multiplier <= INT32_MAX && is_shift(shift) &&
          (shift <= 0 || (largest << shift) <= INT32_MAX),
      "requantize",
      "input and out must be int8 or int16 of one size, out of `dtype`, offsets those of their "
      "dtypes (0 for int16), multiplier in [0, 2^31) and a shift that keeps the input in int32");
  if (!context.computes()) {
    return;
  }
  const Requantization r{
      static_cast<int32_t>(input_offset), static_cast<int32_t>(output_offset),
      static_cast<int32_t>(multiplier), static_cast<int32_t>(shift)};
  if (in_type == ScalarType::Short) {
    requantize_from<int16_t>(input, out, r);
  } else {
    requantize_from<int8_t>(input, out, r);
  }
}

}  // namespace native
}  // namespace cortex_m_nn
