// pointwise_conv_s8 (cortex_m_nn/compute.h): a 1x1 convolution, stride 1, no padding.
//
// Each output element is bias + the sum over the input channels of (input + input_offset) *
// weight, requantized per output channel by CMSIS-NN's arithmetic (either rounding), plus
// output_offset, clamped: the integers of arm_convolve_1x1_s8_fast.
//
// CMSIS-NN's matrix product off MVE (arm_nn_mat_mult_nt_t_s8) computes two pixels by two
// output channels as this does, but loads and sign-extends the pixels' bytes again for every
// pair of output channels and keeps more values live than the core has registers. Here, per
// pair of pixels, their inputs plus the input offset are widened to int16 once, into the
// buffer, in the order SXTB16 gives the weights (inputs 0 and 2 in a word, then 1 and 3) and
// the two pixels' words side by side; then for each pair of output channels one LDM takes
// four words of both pixels, and per four inputs of each channel one weight load, two SXTB16
// and four SMLAD give eight MACs: 32 instructions for 32 MACs, the loop in assembly, all
// fourteen registers used. The last depth % 4 inputs are widened too, as (a, b) pairs, and
// summed in C. The four sums are requantized as they come (double rounding in its SMMULR form
// where every sum of the call allows it). An odd last pixel or channel is computed as its own
// pair (the same bytes written twice).
//
// Up to 64 input channels the widened pair sits on the stack (256 bytes); deeper calls take
// the buffer, four bytes per input channel.
//
// Output pixels are written in order, a pair at a time, each after reading (widening) the
// pair's inputs: the output may take the input's bytes (python/cortex_m_nn/plan/overlap.py).
// The host build computes the same products in C.
#include "cortex_m_nn/compute.h"

#include <cstring>

#include "arm_nnsupportfunctions.h"
#include "dsp_arith.h"

namespace cortex_m_nn {
namespace compute {
namespace {

using namespace dsp;  // NOLINT: the DSP arithmetic by its instructions' names

constexpr int32_t kGroup = 4;  // inputs per group: a pixel's two words of int16 pairs
// Up to this depth a pixel pair's widened inputs sit on the stack (256 bytes), not the buffer.
constexpr int32_t kStackDepth = 64;

// One pair of output channels (c, d) on one pair of pixels (a, b): the sums' first values
// and the groups of four inputs to add, then the four sums (ac, bc, ad, bd).
struct Block {
  int32_t start_c;
  int32_t start_d;
  int32_t groups;
  int32_t sums[4];
};

// Pixels a and b's inputs plus the input offset, widened: per group of four the words
// (a0 a2) (a1 a3) (b0 b2) (b1 b3), then the last depth % 4 as int16 pairs (a, b).
void widen(const int8_t* a, const int8_t* b, int32_t depth, uint32_t offsets, uint32_t* to) {
  const int32_t groups = depth / kGroup;
  for (int32_t g = 0; g < groups; ++g, a += kGroup, b += kGroup, to += 4) {
    uint32_t wa, wb;
    std::memcpy(&wa, a, sizeof(wa));
    std::memcpy(&wb, b, sizeof(wb));
    to[0] = sadd16(sxtb16(wa), offsets);
    to[1] = sadd16(sxtb16_ror8(wa), offsets);
    to[2] = sadd16(sxtb16(wb), offsets);
    to[3] = sadd16(sxtb16_ror8(wb), offsets);
  }
  const int32_t offset = static_cast<int16_t>(offsets & 0xFFFFu);
  for (int32_t k = 0; k < depth % kGroup; ++k) {
    to[k] = (static_cast<uint32_t>(a[k] + offset) & 0xFFFFu) |
            (static_cast<uint32_t>(b[k] + offset) << 16);
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
// Every channel pair of one pixel pair in assembly, for a call of the common form: a bias, a
// depth that is a multiple of four, the fast double rounding's domain and a range reaching
// 127. The pass advances its pointers block by block.
struct Pass {
  const int32_t* bias;        // 0: channel c's
  const int32_t* multiplier;  // 4
  const int32_t* shift;       // 8
  const int8_t* filter;       // 12: row c
  int8_t* out;                // 16: pixel a's byte of channel c
  int32_t out_b;              // 20: pixel b's bytes less pixel a's (0: the same pixel)
  int32_t blocks;             // 24: channel pairs left
  int32_t groups;             // 28
  int32_t depth;              // 32
  int32_t offset;             // 36: the output offset
  int32_t low;                // 40
  const uint32_t* widened;    // 44
};

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

// One convolution's shapes and arithmetic.
struct Call {
  int32_t pixels;
  int32_t depth;  // input channels
  int32_t channels;  // output channels
  const int8_t* filter;
  const int32_t* bias;  // may be null
  const int32_t* multiplier;
  const int32_t* shift;
  int32_t input_offset;
  int32_t output_offset;
  int32_t low;
  int32_t high;
};

// Whether every output channel's sums, within depth * 255 * 128 of its bias, stay in the
// domain of double rounding's SMMULR form.
bool fast_rounding(const Call& call) {
#if defined(CMSIS_NN_USE_SINGLE_ROUNDING)
  (void)call;
  return false;
#else
  const uint32_t span = static_cast<uint32_t>(call.depth) * (255u * 128u);
  if (call.depth > (1 << 15)) {
    return false;
  }
  for (int32_t c = 0; c < call.channels; ++c) {
    const int32_t start = call.bias != nullptr ? call.bias[c] : 0;
    if (!doubling_fits(start, span, call.shift[c] > 0 ? call.shift[c] : 0)) {
      return false;
    }
  }
  return true;
#endif
}

// One output channel's requantization: CMSIS-NN's multiplier and shift, and for the fast
// double rounding the left shift of the doubled sum and the rounding right shift.
struct Scale {
  int32_t multiplier;
  int32_t shift;
  int32_t doubled;  // max(shift, 0) + 1
  int32_t right;    // max(-shift, 0)
};

inline Scale scale_of(const int32_t* multiplier, const int32_t* shift, int32_t channel) {
  const int32_t s = shift[channel];
  return Scale{multiplier[channel], s, (s > 0 ? s : 0) + 1, s < 0 ? -s : 0};
}

// The output range and offset.
struct Range {
  int32_t offset;
  int32_t low;
  int32_t high;
};

// A sum's output byte: requantized (`kFast`: double rounding in its SMMULR form), offset,
// clamped (`kTop`: a range that reaches 127, a saturation and a lower bound).
template <bool kFast, bool kTop>
inline int32_t requantize(int32_t sum, const Scale& scale, const Range& range) {
  int32_t v;
  if (kFast) {
    v = smmulr(sum << scale.doubled, scale.multiplier);
    if (scale.right != 0) {
      v = shift_rounded(v, scale.right);
    }
  } else {
    v = arm_nn_requantize(sum, scale.multiplier, scale.shift);
  }
  v += range.offset;
  if (kTop) {
    return saturate8(v, range.low);
  }
  v = v < range.low ? range.low : v;
  return v > range.high ? range.high : v;
}

// Pixels a and b (a + 1, or a again for an odd last pixel), every output channel from `first`
// (even). The call's fields are read into locals once: every byte store may alias them.
template <bool kFast, bool kTop>
void pixel_pair(const Call& call, const uint32_t* widened, int8_t* out_a, int8_t* out_b,
                int32_t first = 0) {
  const int32_t depth = call.depth, channels = call.channels;
  const int32_t* const bias = call.bias;
  const int32_t* const multiplier = call.multiplier;
  const int32_t* const shift = call.shift;
  const int8_t* const filter = call.filter;
  const Range range{call.output_offset, call.low, call.high};
  Block block;
  block.groups = depth / kGroup;
  const int32_t done = block.groups * kGroup;
  const uint32_t* const tail = widened + 4 * block.groups;
  for (int32_t c = first; c < channels; c += 2) {
    const int32_t d = c + 1 < channels ? c + 1 : c;
    const int8_t* wc = filter + c * depth;
    const int8_t* wd = filter + d * depth;
    block.start_c = bias != nullptr ? bias[c] : 0;
    block.start_d = bias != nullptr ? bias[d] : 0;
    if (block.groups != 0) {
      block_sums(&block, widened, wc, wd);
    } else {
      block.sums[0] = block.sums[1] = block.start_c;
      block.sums[2] = block.sums[3] = block.start_d;
    }
    int32_t ac = block.sums[0], bc = block.sums[1], ad = block.sums[2], bd = block.sums[3];
    for (int32_t k = done; k < depth; ++k) {  // the last depth % 4 inputs, widened in pairs
      const uint32_t pair = tail[k - done];
      const int32_t xa = static_cast<int16_t>(pair & 0xFFFFu);
      const int32_t xb = static_cast<int16_t>(pair >> 16);
      ac += xa * wc[k];
      bc += xb * wc[k];
      ad += xa * wd[k];
      bd += xb * wd[k];
    }
    const Scale sc = scale_of(multiplier, shift, c), sd = scale_of(multiplier, shift, d);
    const int32_t oac = requantize<kFast, kTop>(ac, sc, range);
    const int32_t obc = requantize<kFast, kTop>(bc, sc, range);
    const int32_t oad = requantize<kFast, kTop>(ad, sd, range);
    const int32_t obd = requantize<kFast, kTop>(bd, sd, range);
    out_a[c] = static_cast<int8_t>(oac);
    out_b[c] = static_cast<int8_t>(obc);
    out_a[d] = static_cast<int8_t>(oad);
    out_b[d] = static_cast<int8_t>(obd);
  }
}

// Every pixel, a pair at a time, each pair's inputs read (widened) before its outputs are
// written: the output may start where the input does, if its pixels are no larger.
template <bool kFast, bool kTop>
void pixels(const Call& call, const int8_t* input, uint32_t* widened, int8_t* output) {
  const uint32_t offsets = (static_cast<uint32_t>(call.input_offset) & 0xFFFFu) * 0x10001u;
  for (int32_t p = 0; p < call.pixels; p += 2) {
    const int32_t q = p + 1 < call.pixels ? p + 1 : p;
    widen(input + p * call.depth, input + q * call.depth, call.depth, offsets, widened);
    pixel_pair<kFast, kTop>(call, widened, output + p * call.channels,
                            output + q * call.channels);
  }
}

#if defined(ARM_MATH_DSP)
// Whether channel_pairs computes the call (given the fast double rounding and a range reaching
// 127): a bias and a depth that is a multiple of four.
bool assembly_computes(const Call& call) {
  return call.bias != nullptr && call.depth % kGroup == 0;
}

// Every pixel, a pair at a time as `pixels` does, the channel pairs in assembly (an odd last
// channel in C).
void pixels_assembly(const Call& call, const int8_t* input, uint32_t* widened, int8_t* output) {
  const uint32_t offsets = (static_cast<uint32_t>(call.input_offset) & 0xFFFFu) * 0x10001u;
  const int32_t pairs = call.channels / 2;
  for (int32_t p = 0; p < call.pixels; p += 2) {
    const int32_t q = p + 1 < call.pixels ? p + 1 : p;
    widen(input + p * call.depth, input + q * call.depth, call.depth, offsets, widened);
    int8_t* const out_a = output + p * call.channels;
    int8_t* const out_b = output + q * call.channels;
    Pass pass{call.bias,          call.multiplier,
              call.shift,         call.filter,
              out_a,              static_cast<int32_t>(out_b - out_a),
              pairs,              call.depth / kGroup,
              call.depth,         call.output_offset,
              call.low,           widened};
    if (pairs != 0) {
      channel_pairs(&pass);
    }
    if (call.channels % 2 != 0) {
      pixel_pair<true, true>(call, widened, out_a, out_b, call.channels - 1);
    }
  }
}
#endif

}  // namespace

int32_t pointwise_conv_s8_get_buffer_size(const cmsis_nn_dims* input_dims) {
  if (input_dims->c <= kStackDepth) {
    return 0;
  }
  return input_dims->c * static_cast<int32_t>(sizeof(uint32_t));  // two int16 per input
}

arm_cmsis_nn_status pointwise_conv_s8(
    const cmsis_nn_context* ctx,
    const cmsis_nn_conv_params* conv_params,
    const cmsis_nn_per_channel_quant_params* quant,
    const cmsis_nn_dims* input_dims,
    const int8_t* input,
    const cmsis_nn_dims* filter_dims,
    const int8_t* filter,
    const cmsis_nn_dims* /*bias_dims*/,
    const int32_t* bias,
    const cmsis_nn_dims* output_dims,
    int8_t* output) {
  const int32_t needed = pointwise_conv_s8_get_buffer_size(input_dims);
  const bool one_by_one = filter_dims->h == 1 && filter_dims->w == 1 &&
                          filter_dims->c == input_dims->c && filter_dims->n == output_dims->c;
  const bool plain = conv_params->stride.h == 1 && conv_params->stride.w == 1 &&
                     conv_params->padding.h == 0 && conv_params->padding.w == 0 &&
                     conv_params->dilation.h == 1 && conv_params->dilation.w == 1;
  const bool same = output_dims->n == input_dims->n && output_dims->h == input_dims->h &&
                    output_dims->w == input_dims->w;
  const bool buffer = needed == 0 || (ctx->buf != nullptr && ctx->size >= needed &&
                                      (reinterpret_cast<uintptr_t>(ctx->buf) & 3u) == 0);
  if (!one_by_one || !plain || !same || !buffer) {
    return ARM_CMSIS_NN_ARG_ERROR;
  }
  Call call{input_dims->n * input_dims->h * input_dims->w,
            input_dims->c,
            output_dims->c,
            filter,
            bias,
            quant->multiplier,
            quant->shift,
            conv_params->input_offset,
            conv_params->output_offset,
            conv_params->activation.min,
            conv_params->activation.max};
  uint32_t stack[kStackDepth];
  uint32_t* widened = needed > 0 ? static_cast<uint32_t*>(ctx->buf) : stack;
  const bool top = call.high == 127;
  const bool fast = fast_rounding(call);
#if defined(ARM_MATH_DSP)
  if (fast && top && assembly_computes(call)) {
    pixels_assembly(call, input, widened, output);
    return ARM_CMSIS_NN_SUCCESS;
  }
#endif
  if (fast) {
    (top ? pixels<true, true> : pixels<true, false>)(call, input, widened, output);
  } else {
    (top ? pixels<false, true> : pixels<false, false>)(call, input, widened, output);
  }
  return ARM_CMSIS_NN_SUCCESS;
}

}  // namespace compute
}  // namespace cortex_m_nn
