// The pixel-pair convolution's widening, block sums and assembly pass (pixel_pairs.h).
#include "pixel_pairs.h"

#include <cstring>

namespace cortex_m_nn {
namespace compute {
namespace pairs {

void widen(const int8_t* a, const int8_t* b, int32_t depth, uint32_t offsets, uint32_t* to) {
  const int32_t groups = depth / kGroup;
  if (a != nullptr && b != nullptr) {
    for (int32_t g = 0; g < groups; ++g, a += kGroup, b += kGroup, to += 4) {
      uint32_t wa, wb;
      std::memcpy(&wa, a, sizeof(wa));
      std::memcpy(&wb, b, sizeof(wb));
      to[0] = sadd16(sxtb16(wa), offsets);
      to[1] = sadd16(sxtb16_ror8(wa), offsets);
      to[2] = sadd16(sxtb16(wb), offsets);
      to[3] = sadd16(sxtb16_ror8(wb), offsets);
    }
  } else {
    for (int32_t g = 0; g < groups; ++g, to += 4) {  // one pixel (or neither) inside
      uint32_t wa = 0, wb = 0;
      if (a != nullptr) {
        std::memcpy(&wa, a + g * kGroup, sizeof(wa));
      }
      if (b != nullptr) {
        std::memcpy(&wb, b + g * kGroup, sizeof(wb));
      }
      to[0] = a != nullptr ? sadd16(sxtb16(wa), offsets) : 0;
      to[1] = a != nullptr ? sadd16(sxtb16_ror8(wa), offsets) : 0;
      to[2] = b != nullptr ? sadd16(sxtb16(wb), offsets) : 0;
      to[3] = b != nullptr ? sadd16(sxtb16_ror8(wb), offsets) : 0;
    }
    a = a != nullptr ? a + groups * kGroup : a;
    b = b != nullptr ? b + groups * kGroup : b;
  }
  const int32_t offset = static_cast<int16_t>(offsets & 0xFFFFu);
  for (int32_t k = 0; k < depth % kGroup; ++k) {
    const uint32_t xa = a != nullptr ? static_cast<uint32_t>(a[k] + offset) : 0u;
    const uint32_t xb = b != nullptr ? static_cast<uint32_t>(b[k] + offset) : 0u;
    to[k] = (xa & 0xFFFFu) | (xb << 16);
  }
}

#if defined(ARM_MATH_DSP)
// The block's sums: its groups (at least one) of widened pixel words from `pixels` and of
// weights from `c` and `d` (any alignment). Two groups per pass; an odd count enters at the
// second.
#define CORTEX_M_NN_POINTWISE_GROUP(ROW, ACC0, ACC1)             \
  "ldr r12, [" ROW "], #4\n\t"                                   \
  "sxtb16 lr, r12\n\t"                                           \
  "sxtb16 r12, r12, ror #8\n\t"                                  \
  "smlad " ACC0 ", r8, lr, " ACC0 "\n\t"                         \
  "smlad " ACC0 ", r9, r12, " ACC0 "\n\t"                        \
  "smlad " ACC1 ", r10, lr, " ACC1 "\n\t"                        \
  "smlad " ACC1 ", r11, r12, " ACC1 "\n\t"
#define CORTEX_M_NN_POINTWISE_PASS                               \
  "ldm r1!, {r8-r11}\n\t"                                        \
  CORTEX_M_NN_POINTWISE_GROUP("r2", "r4", "r5")                  \
  CORTEX_M_NN_POINTWISE_GROUP("r3", "r6", "r7")

__attribute__((naked, noinline)) void block_sums(Block* /*block*/, const uint32_t* /*pixels*/,
                                                 const int8_t* /*c*/, const int8_t* /*d*/) {
  __asm volatile(
      "push {r0, r4-r11, lr}\n\t"
      "ldm r0, {r4, r6, r12}\n\t"
      "mov r5, r4\n\t"
      "mov r7, r6\n\t"
      "adds r0, r12, #1\n\t"
      "lsrs r0, r0, #1\n\t"
      "bcc 2f\n"
      "1:\n\t" CORTEX_M_NN_POINTWISE_PASS
      "2:\n\t" CORTEX_M_NN_POINTWISE_PASS
      "subs r0, r0, #1\n\t"
      "bne 1b\n\t"
      "pop {r0}\n\t"
      "adds r0, r0, #12\n\t"
      "stm r0, {r4-r7}\n\t"
      "pop {r4-r11, pc}\n\t");
}
// Sum X (of channel multiplier M, left shift r1 of the doubled sum, right shift r2)
// requantized: SMMULR of the doubled sum, then (r2 > 0) the rounding right shift CMSIS-NN's
// inline assembly computes.
#define CORTEX_M_NN_POINTWISE_SCALE(X, M) \
  "lsls " X ", " X ", r1\n\t"             \
  "smmulr " X ", " X ", " M "\n\t"        \
  "cbz r2, 4f\n\t"                        \
  "add " X ", " X ", " X ", asr #31\n\t"  \
  "asrs " X ", " X ", r2\n\t"             \
  "adc " X ", " X ", #0\n"                 \
  "4:\n\t"
// A channel's left shift of the doubled sum (r1: max(shift, 0) + 1) and right shift (r2:
// max(-shift, 0)) from its shift S.
#define CORTEX_M_NN_POINTWISE_SHIFTS(S)   \
  "bic r1, " S ", " S ", asr #31\n\t"     \
  "adds r1, r1, #1\n\t"                   \
  "rsbs r2, " S ", #0\n\t"                \
  "bic r2, r2, r2, asr #31\n\t"
// Output X offset (r10) and clamped to [low (r11), 127].
#define CORTEX_M_NN_POINTWISE_CLAMP(X) \
  "add " X ", " X ", r10\n\t"          \
  "ssat " X ", #8, " X "\n\t"          \
  "cmp " X ", r11\n\t"                 \
  "it lt\n\t"                          \
  "movlt " X ", r11\n\t"

__attribute__((naked, noinline)) void channel_pairs(Pass* /*pass*/) {
  __asm volatile(
      "push {r0, r4-r11, lr}\n"
      "1:\n\t"
      "ldr r12, [sp]\n\t"
      "ldr r0, [r12, #0]\n\t"
      "ldrd r4, r6, [r0], #8\n\t"
      "str r0, [r12, #0]\n\t"
      "mov r5, r4\n\t"
      "mov r7, r6\n\t"
      "ldr r2, [r12, #12]\n\t"
      "ldr r0, [r12, #32]\n\t"
      "add r3, r2, r0\n\t"
      "ldr r1, [r12, #44]\n\t"
      "ldr r0, [r12, #28]\n\t"
      "adds r0, r0, #1\n\t"
      "lsrs r0, r0, #1\n\t"
      "bcc 3f\n"
      "2:\n\t" CORTEX_M_NN_POINTWISE_PASS
      "3:\n\t" CORTEX_M_NN_POINTWISE_PASS
      "subs r0, r0, #1\n\t"
      "bne 2b\n\t"
      "ldr r12, [sp]\n\t"
      "str r3, [r12, #12]\n\t"
      "ldr r0, [r12, #4]\n\t"
      "ldrd r8, r9, [r0], #8\n\t"
      "str r0, [r12, #4]\n\t"
      "ldr r0, [r12, #8]\n\t"
      "ldrd r10, r11, [r0], #8\n\t"
      "str r0, [r12, #8]\n\t"
      CORTEX_M_NN_POINTWISE_SHIFTS("r10")
      CORTEX_M_NN_POINTWISE_SCALE("r4", "r8")
      CORTEX_M_NN_POINTWISE_SCALE("r5", "r8")
      CORTEX_M_NN_POINTWISE_SHIFTS("r11")
      CORTEX_M_NN_POINTWISE_SCALE("r6", "r9")
      CORTEX_M_NN_POINTWISE_SCALE("r7", "r9")
      "ldrd r10, r11, [r12, #36]\n\t"
      CORTEX_M_NN_POINTWISE_CLAMP("r4")
      CORTEX_M_NN_POINTWISE_CLAMP("r5")
      CORTEX_M_NN_POINTWISE_CLAMP("r6")
      CORTEX_M_NN_POINTWISE_CLAMP("r7")
      "ldrd r0, r1, [r12, #16]\n\t"
      "strb r4, [r0]\n\t"
      "strb r6, [r0, #1]\n\t"
      "strb r5, [r0, r1]\n\t"
      "add r1, r1, r0\n\t"
      "strb r7, [r1, #1]\n\t"
      "adds r0, r0, #2\n\t"
      "str r0, [r12, #16]\n\t"
      "ldr r0, [r12, #24]\n\t"
      "subs r0, r0, #1\n\t"
      "str r0, [r12, #24]\n\t"
      "bne 1b\n\t"
      "pop {r0, r4-r11, pc}\n\t");
}
#undef CORTEX_M_NN_POINTWISE_CLAMP
#undef CORTEX_M_NN_POINTWISE_SHIFTS
#undef CORTEX_M_NN_POINTWISE_SCALE
#undef CORTEX_M_NN_POINTWISE_PASS
#undef CORTEX_M_NN_POINTWISE_GROUP
#else
void block_sums(Block* block, const uint32_t* pixels, const int8_t* c, const int8_t* d) {
  int32_t ac = block->start_c, bc = block->start_c, ad = block->start_d, bd = block->start_d;
  for (int32_t g = 0; g < block->groups; ++g, pixels += 4, c += kGroup, d += kGroup) {
    uint32_t wc, wd;
    std::memcpy(&wc, c, sizeof(wc));
    std::memcpy(&wd, d, sizeof(wd));
    const uint32_t c02 = sxtb16(wc), c13 = sxtb16_ror8(wc);
    const uint32_t d02 = sxtb16(wd), d13 = sxtb16_ror8(wd);
    ac = smlad(pixels[1], c13, smlad(pixels[0], c02, ac));
    bc = smlad(pixels[3], c13, smlad(pixels[2], c02, bc));
    ad = smlad(pixels[1], d13, smlad(pixels[0], d02, ad));
    bd = smlad(pixels[3], d13, smlad(pixels[2], d02, bd));
  }
  block->sums[0] = ac;
  block->sums[1] = bc;
  block->sums[2] = ad;
  block->sums[3] = bd;
}
#endif


}  // namespace pairs
}  // namespace compute
}  // namespace cortex_m_nn
