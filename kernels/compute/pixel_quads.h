// The pixel-quad convolution our pointwise_conv_s8 and window_conv_s8 share on MVE: an int8
// convolution as a matrix product of output channels by quads of output pixels, each quad's
// inputs gathered first (by the caller's `gather`: the pixels' own inputs, or their windows)
// into one buffer, 16 inputs of each pixel after the other (pixel 0's inputs 0-15, pixel 1's,
// pixel 2's, pixel 3's, then their inputs 16-31, ...), so that one pointer walks all four.
//
// CMSIS-NN's MVE matrix product (arm_nn_mat_mult_nt_t_s8, after arm_convolve_s8's im2col or on
// a 1x1 convolution's input) computes four pixels by one output channel: per 16 inputs five
// loads, four VMLADAVA and the VADDVA that sums the channel's weights for the input offset again
// for every quad, and around each channel's loop it keeps its state on the stack. Here a quad
// meets two output channels: per 16 inputs two weight loads, four input loads and eight VMLADAVA
// (16 instructions for 128 MACs, the loop in assembly, every accumulator in a core register),
// the weights' sums times the input offset are added once per call (`requantization`), and the
// eight sums are requantized as two vectors with CMSIS-NN's MVE arithmetic (either rounding),
// offset, clamped and scattered to the four pixels in the same pass. The last depth % 16 inputs
// take predicated weight loads (inactive lanes zero), so the gathered tail needs no clearing.
// An odd last channel, and ranges that do not reach 127, are computed in C with intrinsics.
// Output channels are taken 64 at a time (their requantization on the stack, 768 bytes), every
// quad of pixels once per block; pixels are written a quad at a time, each after reading its
// inputs.
#pragma once

#include <stdint.h>

#include "arm_nnsupportfunctions.h"
#include "pixel_pairs.h"

#if defined(ARM_MATH_MVEI)
namespace cortex_m_nn {
namespace compute {
namespace quads {

using Call = pairs::Call;

constexpr int32_t kPixels = 4;  // output pixels a quad computes
constexpr int32_t kChunk = 16;  // inputs of a pixel side by side in the gathered buffer (2^4)
constexpr int32_t kBlock = 64;  // output channels whose requantization the stack holds at once

// The gathered buffer of a quad of `depth` inputs each.
inline int32_t gathered_bytes(int32_t depth) {
  return kPixels * kChunk * ((depth + kChunk - 1) / kChunk);
}

// Calls `piece(to, m)` for each run of m (1 to 16) of inputs k to k + n - 1 of the pixel whose
// first 16 inputs start at `lane` (the buffer plus 16 times the pixel's place in the quad), in
// order, `to` where the run goes.
template <typename Piece>
inline void pieces(int8_t* lane, int32_t k, int32_t n, Piece piece) {
  int32_t at = k & (kChunk - 1);
  int8_t* to = lane + (k >> 4) * kPixels * kChunk + at;  // k >= 0: a shift, not a division
  while (n > 0) {
    const int32_t m = kChunk - at < n ? kChunk - at : n;
    piece(to, m);
    n -= m;
    to += kPixels * kChunk - at;
    at = 0;
  }
}

// Copies `m` (at most 16) bytes from `src` to `to` under a tail predicate (GCC spends three
// instructions more per predicate than this assembly).
inline void copy_piece(int8_t* to, const int8_t* src, int32_t m) {
  __asm volatile(
      "vctp.8 %[m]\n\t"
      "vpstt\n\t"
      "vldrbt.u8 q0, [%[src]]\n\t"
      "vstrbt.8 q0, [%[to]]\n\t"
      :
      : [m] "r"(m), [src] "r"(src), [to] "r"(to)
      : "q0", "memory");
}

// Writes `n` bytes from `src` (or `n` times `value`) as inputs k to k + n - 1 of the pixel at
// `lane`: from the start of a chunk whole chunks unpredicated, then the rest; else a predicated
// copy per run.
inline void put(int8_t* lane, int32_t k, const int8_t* src, int32_t n) {
  if ((k & (kChunk - 1)) != 0) {
    pieces(lane, k, n, [&src](int8_t* to, int32_t m) {
      copy_piece(to, src, m);
      src += m;
    });
    return;
  }
  int8_t* to = lane + (k >> 4) * kPixels * kChunk;
  for (; n >= kChunk; n -= kChunk, src += kChunk, to += kPixels * kChunk) {
    vstrbq_s8(to, vldrbq_s8(src));
  }
  if (n > 0) {
    copy_piece(to, src, n);
  }
}

inline void fill(int8_t* lane, int32_t k, int8_t value, int32_t n) {
  pieces(lane, k, n, [value](int8_t* to, int32_t m) {
    __asm volatile(
        "vdup.8 q0, %[value]\n\t"
        "vctp.8 %[m]\n\t"
        "vpst\n\t"
        "vstrbt.8 q0, [%[to]]\n\t"
        :
        : [m] "r"(m), [value] "r"(static_cast<int32_t>(value)), [to] "r"(to)
        : "q0", "memory");
  });
}

// The requantization of a block of channels, a pair after the other: each pair's first
// values (bias plus the input offset times the sum of the channel's weights), multipliers and
// shifts, six words (kPairWords). An odd last channel takes a pair's place, as its first half.
// Whether every shift of the block is negative (a right shift only).
constexpr int32_t kPairWords = 6;
bool requantization(const Call& call, int32_t first, int32_t count, int32_t* table);

// Every channel pair of one gathered quad in assembly, for a range reaching 127. The pass
// advances its pointers pair by pair.
struct Pass {
  const int8_t* gathered;  // 0
  const int8_t* filter;    // 4: row c
  int32_t depth;           // 8
  int32_t full;            // 12: depth / 16
  int32_t tail;            // 16: depth % 16
  const int32_t* table;    // 20: pair (c, c + 1)'s requantization
  int8_t* out;             // 24: the quad's first pixel's byte of channel c
  int32_t offset;          // 28: the output offset
  int32_t low;             // 32
  int32_t pairs;           // 36: channel pairs left (at least one)
  int32_t lanes[kPixels];  // 40: each pixel's output bytes from the first pixel's
};

void channel_pairs(Pass* pass);
// The same where every shift is negative: no left shift, and double rounding's divide always
// fixed up (four instructions a vector fewer).
void channel_pairs_right(Pass* pass);

// Channels first to first + count - 1 of the quad of pixels from p, gathered, written to
// `output` (the call's, pixel 0); `right`: every shift of the block negative.
void quad(const Call& call, const int32_t* table, bool right, int32_t first, int32_t count,
          int32_t p, const int8_t* gathered, int8_t* output);

// Every output pixel, a quad at a time: `gather(p, gathered)` gathers pixels p to p + 3 (the
// last pixel again where the call has fewer) before their outputs are written.
template <typename Gather>
void run(const Call& call, Gather gather, int8_t* gathered, int8_t* output) {
  int32_t table[kBlock / 2 * kPairWords];
  for (int32_t first = 0; first < call.channels; first += kBlock) {
    const int32_t count = call.channels - first < kBlock ? call.channels - first : kBlock;
    const bool right = requantization(call, first, count, table);
    for (int32_t p = 0; p < call.pixels; p += kPixels) {
      gather(p, gathered);
      quad(call, table, right, first, count, p, gathered, output);
    }
  }
}

}  // namespace quads
}  // namespace compute
}  // namespace cortex_m_nn
#endif
