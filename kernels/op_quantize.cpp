// cortex_m_nn::quantize.out: float32 → int8 or int16 at the model input, with the layout change
// folded in. Rounds like PT2E's quantize_per_tensor: round-half-even(x * (1 / scale)) in float32,
// plus the zero point, clamped. CMSIS-NN has no such kernel: ours converts each run of the
// permuted walk (cortex_m_nn/quantize_common.h) with MVE where the core has floating-point MVE,
// else a scalar loop. Reference: python/cortex_m_nn/ops/quantize.py.
#include <cstddef>
#include <cstdint>
#include <limits>

#include "cortex_m_nn/quantize_common.h"
#include "cortex_m_nn_operators.h"

// The header declares its own C linkage; wrapping it in extern "C" breaks arm_mve.h's C++
// overloads on MVE builds. It defines ARM_MATH_MVEF where the core has floating-point MVE.
#include "arm_nnsupportfunctions.h"

namespace cortex_m_nn {
namespace native {

namespace {

// Beyond ±2^16 every value clamps to the same int8 or int16 whatever the zero point: clamping
// there first keeps the rounding below exact.
constexpr float kLimit = 65536.0f;
// 1.5 * 2^23: y + kRound lies in [2^23, 2^24), where floats are the integers, so the addition
// rounds y to an integer half to even (the default rounding mode) and the subtraction is
// exact. newlib's nearbyintf, which the first kernel called, costs ~50 instructions.
constexpr float kRound = 12582912.0f;

template <typename Q>
Q quantize_one(float x, float inverse, int32_t zero) {
  constexpr int32_t low = std::numeric_limits<Q>::min();
  constexpr int32_t high = std::numeric_limits<Q>::max();
  float y = x * inverse;
  // a select between the multiply and the addition: the compiler cannot fuse them into one
  // multiply-add (which would round once, unlike the reference)
  y = y < -kLimit ? -kLimit : (y > kLimit ? kLimit : y);
  const int32_t q = static_cast<int32_t>((y + kRound) - kRound) + zero;
  return static_cast<Q>(q < low ? low : (q > high ? high : q));
}

#if defined(ARM_MATH_MVEF)
// Four quantized values (int32 lanes, already clamped) stored as Q: contiguous, or scattered
// `out` elements apart (across the channels of an NHWC output).
inline void store4(int8_t* destination, uint32x4_t offsets, ptrdiff_t out, int32x4_t q) {
  if (out == 1) {
    vstrbq_s32(destination, q);
  } else {
    vstrbq_scatter_offset_s32(destination, offsets, q);
  }
}

inline void store4(int16_t* destination, uint32x4_t offsets, ptrdiff_t out, int32x4_t q) {
  if (out == 1) {
    vstrhq_s32(destination, q);
  } else {
    vstrhq_scatter_shifted_offset_s32(destination, offsets, q);
  }
}
#endif

template <typename Q>
void quantize_run(
    const float* source,
    Q* destination,
    ptrdiff_t count,
    ptrdiff_t out,
    ptrdiff_t in,
    float inverse,
    int32_t zero) {
  ptrdiff_t left = count;
#if defined(ARM_MATH_MVEF)
  // four elements at a time: multiply, convert rounding half to even (VCVTN, saturating),
  // add the zero point (saturating), clamp, store the low bytes or halfwords
  if (in == 1 && out <= INT32_MAX / 4) {
    const uint32x4_t offsets = vmulq_n_u32(vidupq_n_u32(0, 1), static_cast<uint32_t>(out));
    const int32x4_t low = vdupq_n_s32(std::numeric_limits<Q>::min());
    const int32x4_t high = vdupq_n_s32(std::numeric_limits<Q>::max());
    for (; left >= 4; left -= 4, source += 4, destination += 4 * out) {
      const float32x4_t y = vmulq_n_f32(vld1q_f32(source), inverse);
      const int32x4_t q = vqaddq_n_s32(vcvtnq_s32_f32(y), zero);
      store4(destination, offsets, out, vminq_s32(vmaxq_s32(q, low), high));
    }
  }
#endif
  for (; left > 0; --left, source += in, destination += out) {
    *destination = quantize_one<Q>(*source, inverse, zero);
  }
}

template <typename Q>
void quantize_as(
    CallContext& context,
    const Tensor& input,
    double scale,
    int64_t zero_point,
    IntArrayRef permutation,
    Tensor& out,
    const char* types) {
  const float inverse = static_cast<float>(1.0 / scale);
  const int32_t zero = static_cast<int32_t>(zero_point);
  convert_permuted<float, Q>(
      context, "quantize", types, input, scale, zero_point, permutation, out,
      [&](const float* source, Q* destination, ptrdiff_t count, ptrdiff_t out_step,
          ptrdiff_t in_step) {
        quantize_run<Q>(source, destination, count, out_step, in_step, inverse, zero);
      });
}

}  // namespace

// `dtype` is the output's ScalarType code (Char = 1, Short = 2); out must have it. The int8
// case; quantize_int16_out runs dtype 2.
void quantize_out(
    CallContext& context,
    const Tensor& input,
    double scale,
    int64_t zero_point,
    IntArrayRef permutation,
    int64_t dtype,
    Tensor& out) {
  if (dtype == static_cast<int64_t>(ScalarType::Char)) {
    quantize_as<int8_t>(
        context, input, scale, zero_point, permutation, out, "input must be float32, out int8");
  } else if (context.checks()) {
    ET_LOG(Error, "cortex_m_nn::quantize: dtype must be 1 (int8) or 2 (int16)");
    context.fail(Error::InvalidArgument);
  }
}

// The int16 case (dtype 2).
void quantize_int16_out(CallContext& context, const Tensor& input, double scale,
                        int64_t zero_point, IntArrayRef permutation, int64_t dtype, Tensor& out) {
  (void)dtype;  // 2: the case's condition
  quantize_as<int16_t>(
      context, input, scale, zero_point, permutation, out, "input must be float32, out int16");
}

}  // namespace native
}  // namespace cortex_m_nn
