// The pixel-pair convolution our pointwise_conv_s8 and window_conv_s8 share (DSP, and the host's
// scalar build): an int8 convolution as a matrix product of output channels by pairs of output
// pixels, each pair's inputs gathered first (by the caller's `gather`: the pixels' own inputs,
// or their windows) and widened to int16 plus the input offset, in the order SXTB16 gives the
// weights (inputs 0 and 2 in a word, then 1 and 3), the two pixels' words side by side.
//
// CMSIS-NN's matrix products off MVE (arm_nn_mat_mult_nt_t_s8, arm_nn_mat_mult_kernel_s8_s16)
// compute two pixels by two output channels as this does, but sign-extend again for every pair
// of output channels (or copy the window to int16 and read it back as halfwords) and keep more
// values live than the core has registers. Here, for each pair of output channels, one LDM
// takes four words of both pixels, and per four inputs of each channel one weight load, two
// SXTB16 and four SMLAD give eight MACs: 32 instructions for 32 MACs, the loop in assembly, all
// fourteen registers used; the four sums are requantized (double rounding in its SMMULR form
// where every sum of the call allows it), offset, clamped and stored in the same pass. The last
// depth % 4 inputs, and calls of another form, are summed and requantized in C. An odd last
// pixel or channel is computed as its own pair (the same bytes written twice).
//
// Output pixels are written in order, a pair at a time, each after reading its inputs.
#pragma once

#include <stdint.h>

#include "arm_nnsupportfunctions.h"
#include "dsp_arith.h"

namespace cortex_m_nn {
namespace compute {
namespace pairs {

using namespace dsp;  // NOLINT: the DSP arithmetic by its instructions' names

constexpr int32_t kGroup = 4;  // inputs per group: a pixel's two words of int16 pairs

// One convolution's shapes and arithmetic.
struct Call {
  int32_t pixels;
  int32_t depth;  // inputs per output (a weight row)
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

// Pixels a and b's `depth` inputs plus the input offset (`offsets`: in both halves), widened:
// per group of four the words (a0 a2) (a1 a3) (b0 b2) (b1 b3), then the last depth % 4 as int16
// pairs (a, b). A null pixel is outside the input: its words are 0 (no contribution).
void widen(const int8_t* a, const int8_t* b, int32_t depth, uint32_t offsets, uint32_t* to);

// One pair of output channels (c, d) on one pair of pixels (a, b): the sums' first values
// and the groups of four inputs to add, then the four sums (ac, bc, ad, bd).
struct Block {
  int32_t start_c;
  int32_t start_d;
  int32_t groups;
  int32_t sums[4];
};

// The block's sums: its groups (at least one) of widened pixel words from `pixels` and of
// weights from `c` and `d` (any alignment).
void block_sums(Block* block, const uint32_t* pixels, const int8_t* c, const int8_t* d);

#if defined(ARM_MATH_DSP)
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

void channel_pairs(Pass* pass);
#endif

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
  int32_t v = rescale<kFast>(sum, scale) + range.offset;
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
    const Scale sc = scale_of(multiplier[c], shift[c]), sd = scale_of(multiplier[d], shift[d]);
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

// Every output pixel, a pair at a time: `gather(p, q, widened)` widens pixels p and q (q = p
// for an odd last pixel) before their outputs are written; in assembly where the call has the
// common form.
template <typename Gather>
void run(const Call& call, Gather gather, uint32_t* widened, int8_t* output) {
  const bool fast = sums_fit(call.bias, call.shift, 0, call.channels, call.depth);
  const bool top = call.high == 127;
#if defined(ARM_MATH_DSP)
  const bool assembly = fast && top && call.bias != nullptr && call.depth % kGroup == 0;
#endif
  for (int32_t p = 0; p < call.pixels; p += 2) {
    const int32_t q = p + 1 < call.pixels ? p + 1 : p;
    gather(p, q, widened);
    int8_t* const out_a = output + p * call.channels;
    int8_t* const out_b = output + q * call.channels;
    int32_t first = 0;
#if defined(ARM_MATH_DSP)
    if (assembly && call.channels >= 2) {
      Pass pass{call.bias,  call.multiplier,    call.shift, call.filter,  out_a,
                static_cast<int32_t>(out_b - out_a), call.channels / 2,
                call.depth / kGroup, call.depth, call.output_offset, call.low, widened};
      channel_pairs(&pass);
      first = call.channels & ~1;
    }
#endif
    if (first == call.channels) {
      continue;
    }
    if (fast) {
      (top ? pixel_pair<true, true> : pixel_pair<true, false>)(call, widened, out_a, out_b, first);
    } else {
      (top ? pixel_pair<false, true> : pixel_pair<false, false>)(call, widened, out_a, out_b,
                                                                first);
    }
  }
}

}  // namespace pairs
}  // namespace compute
}  // namespace cortex_m_nn
