// cortex_m_nn::dequantize.out: int8 (dequantize_out) or, the int16 case (dequantize_int16_out),
// int16 → float32 at the model output, with the layout change
// folded in: (q - zero_point) * scale in float32, as PT2E's dequantize_per_tensor computes it.
// CMSIS-NN has no such kernel: ours converts each run of the permuted walk
// (cortex_m_nn/quantize_common.h) with MVE where the core has floating-point MVE, else a
// scalar loop. Reference: python/cortex_m_nn/ops/dequantize.py.
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

#if defined(ARM_MATH_MVEF)
// Four values widened to int32 lanes.
inline int32x4_t load4(const int8_t* source) { return vldrbq_s32(source); }
inline int32x4_t load4(const int16_t* source) { return vldrhq_s32(source); }
#endif

template <typename Q>
void dequantize_run(
    const Q* source,
    float* destination,
    ptrdiff_t count,
    ptrdiff_t out,
    ptrdiff_t in,
    float factor,
    int32_t zero) {
  ptrdiff_t left = count;
#if defined(ARM_MATH_MVEF)
  // four elements at a time: widen, subtract the zero point, convert (exact for these
  // integers), multiply, store (scattered across the planes of an NCHW output)
  if (in == 1 && out <= INT32_MAX / 16) {
    const uint32x4_t offsets = vmulq_n_u32(vidupq_n_u32(0, 1), static_cast<uint32_t>(out));
    for (; left >= 4; left -= 4, source += 4, destination += 4 * out) {
      const int32x4_t q = vsubq_n_s32(load4(source), zero);
      const float32x4_t y = vmulq_n_f32(vcvtq_f32_s32(q), factor);
      if (out == 1) {
        vst1q_f32(destination, y);
      } else {
        vstrwq_scatter_shifted_offset_f32(destination, offsets, y);
      }
    }
  }
#endif
  for (; left > 0; --left, source += in, destination += out) {
    *destination = static_cast<float>(static_cast<int32_t>(*source) - zero) * factor;
  }
}

// Either case: the input holds Q, int8_t or int16_t.
template <typename Q>
void dequantize(CallContext& context, const Tensor& input, double scale, int64_t zero_point,
                IntArrayRef permutation, Tensor& out, const char* types) {
  const float factor = static_cast<float>(scale);
  const int32_t zero = static_cast<int32_t>(zero_point);
  const auto convert = [&](const Q* source, float* destination, ptrdiff_t count,
                           ptrdiff_t out_step, ptrdiff_t in_step) {
    dequantize_run(source, destination, count, out_step, in_step, factor, zero);
  };
  convert_permuted<Q, float>(
      context, "dequantize", types, input, scale, zero_point, permutation, out, convert);
}

}  // namespace

void dequantize_out(
    CallContext& context,
    const Tensor& input,
    double scale,
    int64_t zero_point,
    IntArrayRef permutation,
    Tensor& out) {
  dequantize<int8_t>(context, input, scale, zero_point, permutation, out,
                     "input must be int8, out float32");
}

void dequantize_int16_out(CallContext& context, const Tensor& input, double scale,
                          int64_t zero_point, IntArrayRef permutation, Tensor& out) {
  dequantize<int16_t>(context, input, scale, zero_point, permutation, out,
                      "input must be int16, out float32");
}

}  // namespace native
}  // namespace cortex_m_nn
