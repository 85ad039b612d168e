// cortex_m_nn::quantize.out: float32 → int8 at the model input, with the layout change folded
// in. Rounds like PT2E's quantize_per_tensor: round-half-even(x * (1 / scale)) in float32,
// plus the zero point, clamped. CMSIS-NN has no such kernel: ours converts each run of the
// permuted walk (cortex_m_nn/quantize_common.h) with MVE where the core has floating-point MVE,
// else a scalar loop. Reference: python/cortex_m_nn/ops/quantize.py.
#include <cstddef>
#include <cstdint>

#include "cortex_m_nn/quantize_common.h"
#include "cortex_m_nn_operators.h"

// The header declares its own C linkage; wrapping it in extern "C" breaks arm_mve.h's C++
// overloads on MVE builds. It defines ARM_MATH_MVEF where the core has floating-point MVE.
#include "arm_nnsupportfunctions.h"

namespace cortex_m_nn {
namespace native {

namespace {

// Beyond ±256 every value clamps to the same int8 whatever the zero point: clamping there
// first keeps the rounding below exact.
constexpr float kLimit = 256.0f;
// 1.5 * 2^23: y + kRound lies in [2^23, 2^24), where floats are the integers, so the addition
// rounds y to an integer half to even (the default rounding mode) and the subtraction is
// exact. newlib's nearbyintf, which the first kernel called, costs ~50 instructions.
constexpr float kRound = 12582912.0f;

int8_t quantize_one(float x, float inverse, int32_t zero) {
  float y = x * inverse;
  // a select between the multiply and the addition: the compiler cannot fuse them into one
  // multiply-add (which would round once, unlike the reference)
  y = y < -kLimit ? -kLimit : (y > kLimit ? kLimit : y);
  const int32_t q = static_cast<int32_t>((y + kRound) - kRound) + zero;
  return static_cast<int8_t>(q < -128 ? -128 : (q > 127 ? 127 : q));
}

void quantize_run(
    const float* source,
    int8_t* destination,
    ptrdiff_t count,
    ptrdiff_t out,
    ptrdiff_t in,
    float inverse,
    int32_t zero) {
  ptrdiff_t left = count;
#if defined(ARM_MATH_MVEF)
  // four elements at a time: multiply, convert rounding half to even (VCVTN, saturating),
  // add the zero point (saturating), clamp, store the low bytes (scattered across the
  // channels of an NHWC output)
  if (in == 1 && out <= INT32_MAX / 4) {
    const uint32x4_t offsets = vmulq_n_u32(vidupq_n_u32(0, 1), static_cast<uint32_t>(out));
    for (; left >= 4; left -= 4, source += 4, destination += 4 * out) {
      const float32x4_t y = vmulq_n_f32(vld1q_f32(source), inverse);
      int32x4_t q = vqaddq_n_s32(vcvtnq_s32_f32(y), zero);
      q = vminq_s32(vmaxq_s32(q, vdupq_n_s32(-128)), vdupq_n_s32(127));
      if (out == 1) {
        vstrbq_s32(destination, q);
      } else {
        vstrbq_scatter_offset_s32(destination, offsets, q);
      }
    }
  }
#endif
  for (; left > 0; --left, source += in, destination += out) {
    *destination = quantize_one(*source, inverse, zero);
  }
}

}  // namespace

void quantize_out(
    CallContext& context,
    const Tensor& input,
    double scale,
    int64_t zero_point,
    IntArrayRef permutation,
    Tensor& out) {
  const float inverse = static_cast<float>(1.0 / scale);
  const int32_t zero = static_cast<int32_t>(zero_point);
  convert_permuted<float, int8_t>(
      context, "quantize", "input must be float32, out int8", input, scale, zero_point,
      permutation, out,
      [&](const float* source, int8_t* destination, ptrdiff_t count, ptrdiff_t out_step,
          ptrdiff_t in_step) {
        quantize_run(source, destination, count, out_step, in_step, inverse, zero);
      });
}

}  // namespace native
}  // namespace cortex_m_nn
