// The DSP arithmetic our compute functions share off MVE (DSP cores: M33, M4, M7; and the
// host's scalar build, where each intrinsic is a C function computing the same integers):
// two int16 in a word, SMLAD-style products, and the requantization's fast form.
#pragma once

#include <stdint.h>

#include "arm_nnsupportfunctions.h"
#if defined(ARM_MATH_DSP)
#include <arm_acle.h>
#endif

namespace cortex_m_nn {
namespace compute {
namespace dsp {

// A word of two int16: `bottom` in its low half, `top` in its high half.
#if defined(ARM_MATH_DSP)
inline int32_t smlad(uint32_t a, uint32_t b, int32_t acc) {
  return __smlad(static_cast<int32_t>(a), static_cast<int32_t>(b), acc);
}
inline int32_t smlabt(uint32_t a, uint32_t b, int32_t acc) {
  return __smlabt(static_cast<int32_t>(a), static_cast<int32_t>(b), acc);
}
inline int32_t smlatb(uint32_t a, uint32_t b, int32_t acc) {
  return __smlatb(static_cast<int32_t>(a), static_cast<int32_t>(b), acc);
}
#else
inline int32_t bottom(uint32_t v) { return static_cast<int16_t>(v & 0xFFFFu); }
inline int32_t top(uint32_t v) { return static_cast<int16_t>(v >> 16); }
inline int32_t smlad(uint32_t a, uint32_t b, int32_t acc) {
  return acc + bottom(a) * bottom(b) + top(a) * top(b);
}
inline int32_t smlabt(uint32_t a, uint32_t b, int32_t acc) { return acc + bottom(a) * top(b); }
inline int32_t smlatb(uint32_t a, uint32_t b, int32_t acc) { return acc + top(a) * bottom(b); }
#endif

// The bytes 0 and 2 (or, rotated by 8, 1 and 3) of a word as two int16.
#if defined(ARM_MATH_DSP)
inline uint32_t sxtb16(uint32_t v) {
  return static_cast<uint32_t>(__sxtb16(static_cast<int32_t>(v)));
}
inline uint32_t sxtb16_ror8(uint32_t v) {  // GCC does not fold a rotation into SXTB16
  uint32_t r;
  __asm("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(v));
  return r;
}
#else
inline uint32_t sxtb16(uint32_t v) {
  return (static_cast<uint32_t>(static_cast<int8_t>(v & 0xFFu)) & 0xFFFFu) |
         (static_cast<uint32_t>(static_cast<int8_t>((v >> 16) & 0xFFu)) << 16);
}
inline uint32_t sxtb16_ror8(uint32_t v) { return sxtb16(v >> 8); }
#endif

// Double rounding's arithmetic where a sum shifted left stays below 2^30 in magnitude:
// arm_nn_doubling_high_mult_no_sat(v, m) is then SMMULR(2v, m), and its divide by 2^e
// (e >= 1, midpoints away from zero) an ASRS of v - (v < 0) plus the carry it shifts out, as
// CMSIS-NN's CMSIS_NN_USE_REQUANTIZE_INLINE_ASSEMBLY computes it.
#if defined(ARM_MATH_DSP)
inline int32_t smmulr(int32_t a, int32_t b) {
  int32_t r;
  __asm("smmulr %0, %1, %2" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
inline int32_t shift_rounded(int32_t v, int32_t e) {
  int32_t r;
  __asm("add %1, %1, %1, asr #31\n\tasrs %0, %1, %2\n\tadc %0, %0, #0"
        : "=&r"(r), "+r"(v) : "r"(e) : "cc");
  return r;
}
#else
inline int32_t smmulr(int32_t a, int32_t b) {
  return static_cast<int32_t>((static_cast<int64_t>(a) * b + 0x80000000LL) >> 32);
}
inline int32_t shift_rounded(int32_t v, int32_t e) {
  v += v >> 31;
  return (v >> e) + ((v >> (e - 1)) & 1);
}
#endif

// v clamped to [-128, 127] (SSAT), then to at least `low` (a conditional move: GCC branches).
#if defined(ARM_MATH_DSP)
inline int32_t saturate8(int32_t v, int32_t low) {
  v = __ssat(v, 8);
  __asm("cmp %0, %1\n\tit lt\n\tmovlt %0, %1" : "+r"(v) : "r"(low) : "cc");
  return v;
}
#else
inline int32_t saturate8(int32_t v, int32_t low) {
  v = v < -128 ? -128 : (v > 127 ? 127 : v);
  return v < low ? low : v;
}
#endif

// Both int16 halves of `a` plus those of `b` (no saturation).
#if defined(ARM_MATH_DSP)
inline uint32_t sadd16(uint32_t a, uint32_t b) {
  return static_cast<uint32_t>(__sadd16(static_cast<int32_t>(a), static_cast<int32_t>(b)));
}
#else
inline uint32_t sadd16(uint32_t a, uint32_t b) {
  return ((a + b) & 0xFFFFu) | (((a >> 16) + (b >> 16)) << 16);
}
#endif

// Whether every sum within `span` of `start`, shifted left by `left` (>= 0), stays below 2^30
// in magnitude: the domain where smmulr and shift_rounded compute double rounding.
inline bool doubling_fits(int32_t start, uint32_t span, int32_t left) {
  if (left > 29) {
    return false;
  }
  const int64_t wide = start;
  const uint64_t magnitude = static_cast<uint64_t>(wide < 0 ? -wide : wide);
  return magnitude + span < (uint64_t{1} << (30 - left));
}

// Whether the sums of a matrix product's `count` output channels, each within depth * 255 * 128
// of its bias (int8 inputs plus an offset, times int8 weights), all lie in that domain: their
// left shifts from `shifts` (per channel) or `shift` (per tensor, `shifts` null). False under
// single rounding, which has no fast form here.
inline bool sums_fit(const int32_t* bias, const int32_t* shifts, int32_t shift, int32_t count,
                     int32_t depth) {
#if defined(CMSIS_NN_USE_SINGLE_ROUNDING)
  (void)bias, (void)shifts, (void)shift, (void)count, (void)depth;
  return false;
#else
  if (depth > (1 << 15)) {
    return false;
  }
  const uint32_t span = static_cast<uint32_t>(depth) * (255u * 128u);
  for (int32_t c = 0; c < count; ++c) {
    const int32_t s = shifts != nullptr ? shifts[c] : shift;
    if (!doubling_fits(bias != nullptr ? bias[c] : 0, span, s > 0 ? s : 0)) {
      return false;
    }
  }
  return true;
#endif
}

// One channel's requantization: CMSIS-NN's multiplier and shift, and for the fast double
// rounding the left shift of the doubled sum and the rounding right shift.
struct Scale {
  int32_t multiplier;
  int32_t shift;
  int32_t doubled;  // max(shift, 0) + 1
  int32_t right;    // max(-shift, 0)
};

inline Scale scale_of(int32_t multiplier, int32_t shift) {
  return Scale{multiplier, shift, (shift > 0 ? shift : 0) + 1, shift < 0 ? -shift : 0};
}

// CMSIS-NN's requantization of `sum` (`kFast`: double rounding's SMMULR form, for sums in its
// domain; else CMSIS-NN's helper, either rounding).
template <bool kFast>
inline int32_t rescale(int32_t sum, const Scale& scale) {
  if (!kFast) {
    return arm_nn_requantize(sum, scale.multiplier, scale.shift);
  }
  const int32_t v = smmulr(sum << scale.doubled, scale.multiplier);
  return scale.right != 0 ? shift_rounded(v, scale.right) : v;
}

}  // namespace dsp
}  // namespace compute
}  // namespace cortex_m_nn
