// The pixel-quad convolution's requantization table, assembly pass and C form
// (pixel_quads.h). MVE only.
#include "pixel_quads.h"

#include "arm_nnfunctions.h"

#if defined(ARM_MATH_MVEI)
namespace cortex_m_nn {
namespace compute {
namespace quads {

bool requantization(const Call& call, int32_t first, int32_t count, int32_t* table) {
  // The first values (bias plus the input offset times the weights' sums) by one call of
  // CMSIS-NN's arm_vector_sum_s8 into the table's last words, then spread pair by pair from the
  // front: pair j's six words end before the sums of the pairs after it (6j + 5 < 130 + 2j).
  int32_t* const sums = table + kBlock / 2 * kPairWords - count;
  arm_vector_sum_s8(sums, call.depth, count, call.filter + first * call.depth, call.input_offset,
                    0, call.bias != nullptr ? call.bias + first : nullptr);
  bool right = true;
  for (int32_t i = 0; i < count; i += 2) {
    const int32_t n = count - i < 2 ? 1 : 2;
    const int32_t values[2] = {sums[i], n == 2 ? sums[i + 1] : 0};
    int32_t* pair = table + i / 2 * kPairWords;
    for (int32_t k = 0; k < n; ++k) {
      pair[k] = values[k];
      pair[2 + k] = call.multiplier[first + i + k];
      pair[4 + k] = call.shift[first + i + k];
      right = right && call.shift[first + i + k] < 0;
    }
  }
  return right;
}

// One chunk of 16 inputs of the quad (r1, advanced) on the two channels' weights (q0, q1):
// `OP` (VMLADAV to start the sums, VMLADAVA to add) into r0 r2 r4 r6 (channel c, pixels 0-3)
// and r8 r10 r12 lr (channel d).
#define CORTEX_M_NN_QUADS_MACS(OP) \
  "vldrb.u8 q2, [r1], #16\n\t"     \
  OP " r0, q0, q2\n\t"             \
  OP " r8, q1, q2\n\t"             \
  "vldrb.u8 q2, [r1], #16\n\t"     \
  OP " r2, q0, q2\n\t"             \
  OP " r10, q1, q2\n\t"            \
  "vldrb.u8 q2, [r1], #16\n\t"     \
  OP " r4, q0, q2\n\t"             \
  OP " r12, q1, q2\n\t"            \
  "vldrb.u8 q2, [r1], #16\n\t"     \
  OP " r6, q0, q2\n\t"             \
  OP " lr, q1, q2\n\t"
// A chunk whose weights are whole (rows c in r3 and d in r5, advanced) ...
#define CORTEX_M_NN_QUADS_FULL(OP) \
  "vldrb.u8 q0, [r3], #16\n\t"     \
  "vldrb.u8 q1, [r5], #16\n\t"     \
  CORTEX_M_NN_QUADS_MACS(OP)
// ... and the last, of r9 < 16 weights (the inactive lanes loaded as zero).
#define CORTEX_M_NN_QUADS_TAIL(OP) \
  "vctp.8 r9\n\t"                  \
  "vpstt\n\t"                      \
  "vldrbt.u8 q0, [r3]\n\t"         \
  "vldrbt.u8 q1, [r5]\n\t"         \
  CORTEX_M_NN_QUADS_MACS(OP)
// Vector Q of sums requantized by multiplier M and shift S with arm_requantize_mve's
// arithmetic (r0, r1 and q2 scratch; L a local label).
// The same where the shift S is negative (no left shift; double rounding's divide always
// fixed up): the form of most calls.
#if defined(CMSIS_NN_USE_SINGLE_ROUNDING)
#define CORTEX_M_NN_QUADS_RIGHT(Q, M, S, L) \
  "vqdmulh.s32 " Q ", " Q ", " M "\n\t"     \
  "vrshl.s32 " Q ", " S "\n\t"
#else
#define CORTEX_M_NN_QUADS_RIGHT(Q, M, S, L) \
  "vqrdmulh.s32 " Q ", " Q ", " M "\n\t"    \
  "vshr.s32 q2, " Q ", #31\n\t"             \
  "vqadd.s32 " Q ", " Q ", q2\n\t"          \
  "vrshl.s32 " Q ", " S "\n\t"
#endif
#if defined(CMSIS_NN_USE_SINGLE_ROUNDING)
#define CORTEX_M_NN_QUADS_SCALE(Q, M, S, L) \
  "mvn r1, #0\n\t"                          \
  "cmp " S ", r1\n\t"                       \
  "it lt\n\t"                               \
  "movlt r1, " S "\n\t"                     \
  "sub r0, " S ", r1\n\t"                   \
  "vshl.s32 " Q ", r0\n\t"                  \
  "vqdmulh.s32 " Q ", " Q ", " M "\n\t"     \
  "vrshl.s32 " Q ", r1\n\t"
#else
#define CORTEX_M_NN_QUADS_SCALE(Q, M, S, L) \
  "bic r0, " S ", " S ", asr #31\n\t"       \
  "and r1, " S ", " S ", asr #31\n\t"       \
  "vshl.s32 " Q ", r0\n\t"                  \
  "vqrdmulh.s32 " Q ", " Q ", " M "\n\t"    \
  "cbz r1, " L "f\n\t"                      \
  "vshr.s32 q2, " Q ", #31\n\t"             \
  "vqadd.s32 " Q ", " Q ", q2\n\t"          \
  "vrshl.s32 " Q ", r1\n"                   \
  L ":\n\t"
#endif

// One pass over a quad's channel pairs, each pair's sums requantized by SCALE (after label 6
// the sums become two vectors, the pair's first lanes from r0 and r8).
#define CORTEX_M_NN_QUADS_PASS(SCALE) \
      "push {r4-r11, lr}\n\t" \
      "vpush {d12-d15}\n\t" \
      "mov r11, r0\n\t" \
      "ldr r0, [r11, #32]\n\t" \
      "vdup.32 q6, r0\n\t" \
      "add r0, r11, #40\n\t" \
      "vldrw.u32 q7, [r0]\n" \
      "1:\n\t" \
      "ldr r1, [r11, #0]\n\t" \
      "ldrd r3, r5, [r11, #4]\n\t" \
      "add r5, r3, r5\n\t" \
      "ldrd r7, r9, [r11, #12]\n\t" \
      "cbnz r7, 4f\n\t" \
      CORTEX_M_NN_QUADS_TAIL("vmladav.s8") \
      "b 6f\n" \
      "4:\n\t" \
      CORTEX_M_NN_QUADS_FULL("vmladav.s8") \
      "subs r7, r7, #1\n\t" \
      "beq 3f\n" \
      "2:\n\t" \
      CORTEX_M_NN_QUADS_FULL("vmladava.s8") \
      "subs r7, r7, #1\n\t" \
      "bne 2b\n" \
      "3:\n\t" \
      "cmp r9, #0\n\t" \
      "beq 6f\n\t" \
      CORTEX_M_NN_QUADS_TAIL("vmladava.s8") \
      "6:\n\t" \
      "add r5, r5, r9\n\t" \
      "str r5, [r11, #4]\n\t" \
      "vmov q0[2], q0[0], r0, r4\n\t" \
      "vmov q0[3], q0[1], r2, r6\n\t" \
      "vmov q1[2], q1[0], r8, r12\n\t" \
      "vmov q1[3], q1[1], r10, lr\n\t" \
      "ldr r0, [r11, #20]\n\t" \
      "ldm r0!, {r2-r7}\n\t" \
      "str r0, [r11, #20]\n\t" \
      "vadd.i32 q0, q0, r2\n\t" \
      "vadd.i32 q1, q1, r3\n\t" \
      SCALE("q0", "r4", "r6", "7") \
      SCALE("q1", "r5", "r7", "8") \
      "ldr r0, [r11, #28]\n\t" \
      "vadd.i32 q0, q0, r0\n\t" \
      "vadd.i32 q1, q1, r0\n\t" \
      "vmax.s32 q0, q0, q6\n\t" \
      "vmax.s32 q1, q1, q6\n\t" \
      "vqmovnb.s32 q0, q0\n\t" \
      "vqmovnb.s16 q0, q0\n\t" \
      "vqmovnb.s32 q1, q1\n\t" \
      "vqmovnb.s16 q1, q1\n\t" \
      "ldr r0, [r11, #24]\n\t" \
      "vstrb.32 q0, [r0, q7]\n\t" \
      "adds r0, r0, #1\n\t" \
      "vstrb.32 q1, [r0, q7]\n\t" \
      "adds r0, r0, #1\n\t" \
      "str r0, [r11, #24]\n\t" \
      "ldr r0, [r11, #36]\n\t" \
      "subs r0, r0, #1\n\t" \
      "str r0, [r11, #36]\n\t" \
      "bne 1b\n\t" \
      "vpop {d12-d15}\n\t" \
      "pop {r4-r11, pc}\n\t"

__attribute__((naked, noinline)) void channel_pairs(Pass* /*pass*/) {
  __asm volatile(CORTEX_M_NN_QUADS_PASS(CORTEX_M_NN_QUADS_SCALE));
}

__attribute__((naked, noinline)) void channel_pairs_right(Pass* /*pass*/) {
  __asm volatile(CORTEX_M_NN_QUADS_PASS(CORTEX_M_NN_QUADS_RIGHT));
}
#undef CORTEX_M_NN_QUADS_PASS
#undef CORTEX_M_NN_QUADS_RIGHT
#undef CORTEX_M_NN_QUADS_SCALE
#undef CORTEX_M_NN_QUADS_TAIL
#undef CORTEX_M_NN_QUADS_FULL
#undef CORTEX_M_NN_QUADS_MACS

namespace {

// Channel c of the quad in C (`table`: its first value, multiplier and shift, two words
// apart): its four sums, requantized as one vector, offset, clamped, scattered to the pixels'
// bytes (`lanes`) from `out`.
void one_channel(const Call& call, int32_t c, const int32_t* table, const int8_t* gathered,
                 int8_t* out, uint32x4_t lanes) {
  const int32_t depth = call.depth;
  const int8_t* w = call.filter + c * depth;
  int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (int32_t k = 0; k < depth; k += kChunk, gathered += kPixels * kChunk) {
    const int8x16_t weights = vldrbq_z_s8(w + k, vctp8q(static_cast<uint32_t>(depth - k)));
    s0 = vmladavaq_s8(s0, vldrbq_s8(gathered), weights);
    s1 = vmladavaq_s8(s1, vldrbq_s8(gathered + kChunk), weights);
    s2 = vmladavaq_s8(s2, vldrbq_s8(gathered + 2 * kChunk), weights);
    s3 = vmladavaq_s8(s3, vldrbq_s8(gathered + 3 * kChunk), weights);
  }
  const int32x4_t sums = {s0, s1, s2, s3};
  int32x4_t v = arm_requantize_mve(vaddq_n_s32(sums, table[0]), table[2], table[4]);
  v = vmaxq_s32(vaddq_n_s32(v, call.output_offset), vdupq_n_s32(call.low));
  v = vminq_s32(v, vdupq_n_s32(call.high));
  vstrbq_scatter_offset_s32(out + c, lanes, v);
}

}  // namespace

constexpr bool kAsm = true;
void quad(const Call& call, const int32_t* table, bool right, int32_t first, int32_t count,
          int32_t p, const int8_t* gathered, int8_t* output) {
  const int32_t last = call.pixels - 1;
  int32_t lanes[kPixels];
  for (int32_t i = 0; i < kPixels; ++i) {
    lanes[i] = ((p + i < last ? p + i : last) - p) * call.channels;
  }
  int8_t* const out = output + p * call.channels;
  int32_t done = 0;
  if (kAsm && call.high == 127 && count >= 2) {
    Pass pass{gathered,
              call.filter + first * call.depth,
              call.depth,
              call.depth / kChunk,
              call.depth % kChunk,
              table,
              out + first,
              call.output_offset,
              call.low,
              count / 2,
              {lanes[0], lanes[1], lanes[2], lanes[3]}};
    (right ? channel_pairs_right : channel_pairs)(&pass);
    done = count & ~1;
  }
  const uint32x4_t offsets = vldrwq_u32(reinterpret_cast<const uint32_t*>(lanes));
  for (int32_t c = first + done; c < first + count; ++c) {
    const int32_t i = c - first;
    one_channel(call, c, table + i / 2 * kPairWords + i % 2, gathered, out, offsets);
  }
}

}  // namespace quads
}  // namespace compute
}  // namespace cortex_m_nn
#endif
