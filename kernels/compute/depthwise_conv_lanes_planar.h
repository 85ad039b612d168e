// depthwise_conv_lanes_s8 off MVE: DSP (M33, M4, M7) and the host's scalar build. Included by
// depthwise_conv_lanes_s8.cpp inside its anonymous namespace, after Call and clamp (and
// <arm_acle.h> on DSP).
//
// Per block of four channels, the input rows a tile of output rows reads are gathered into
// int16 rows, one plane per channel ("planar": a channel's columns side by side, the zero point
// in the pad columns; one word load per column and an SXTB16 and a pack per two columns give
// all four planes), so that two horizontal taps of a window sit in one word and one SMLAD
// multiplies and adds both: per row of a window, one SMLAD and one 16x16 multiply-add; four
// neighbouring output pixels share the row's words (three word loads for 12 MACs at stride 1,
// five at stride 2). The sum is split as sum(input * weight) + input_offset * sum(weight) as on
// MVE, so a pad column holds the zero point. The sums of a pass of up to 32 pixels go to the
// stack, then are requantized in a second loop (one loop holding both spills its registers).
// Where arm_depthwise_conv_3x3_s8 loads, offsets and multiplies each tap of each channel on its
// own, this leaves the requantization as the largest part of an output's cost.
//
// The buffer holds a tile's rows of a block's four planes; with no buffer (tile 0) each output
// row of each channel gathers its three rows into a strip of 40 columns on the stack (240 bytes).
// Either way output rows are written in order, a tile (or a row) at a time, each after reading
// the rows its windows read. The host build computes the same way, each intrinsic a C function.

inline uint32_t pair(int32_t low, int32_t high) {
  return (static_cast<uint32_t>(low) & 0xFFFFu) | (static_cast<uint32_t>(high) << 16);
}

inline uint32_t load_pair(const int16_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

constexpr int32_t kStripWidth = 40;  // int16 columns per row of the stack strip

// The int16 columns of a gathered row: the window's padded columns and one more (a single
// pixel loads a word from its last column), even (words at 4-byte boundaries).
inline int32_t planar_width(int32_t out_w, int32_t stride_w) {
  return ((out_w - 1) * stride_w + kKernel + 2) & ~1;
}

inline int32_t planar_rows(int32_t tile, int32_t stride_h) {
  return (tile - 1) * stride_h + kKernel;
}

// One channel's window: per row, the words (w0, w1) and (w1, w2), and the first sum.
struct Taps {
  uint32_t w01[kKernel];
  uint32_t w12[kKernel];
  int32_t start;
  int32_t multiplier;
  int32_t shift;
};

Taps channel_taps(const Call& call, const int8_t* kernel, int32_t c) {
  Taps taps{};
  int32_t sum = 0;
  for (int32_t r = 0; r < kKernel; ++r) {
    const int8_t* w = kernel + r * kKernel * call.channels + c;
    const int32_t w0 = w[0], w1 = w[call.channels], w2 = w[2 * call.channels];
    taps.w01[r] = pair(w0, w1);
    taps.w12[r] = pair(w1, w2);
    sum += w0 + w1 + w2;
  }
  taps.start = (call.bias != nullptr ? call.bias[c] : 0) + call.input_offset * sum;
  taps.multiplier = call.multiplier[c];
  taps.shift = call.shift[c];
  return taps;
}

// Channel c of `count` input rows from row `first_row` (of `image`), padded columns
// [from, from + columns) (padded column j is input column j - pad_w), into `out`, `width` int16
// a row: the zero point outside the input. The columns' bounds are the same for every row.
void gather_planar(const Call& call, const int8_t* image, int32_t first_row, int32_t count,
                   int32_t c, int32_t from, int32_t columns, int16_t* out, int32_t width) {
  const int16_t zero = static_cast<int16_t>(-call.input_offset);
  int32_t first = call.pad_w - from;  // where input column 0 lands
  int32_t last = first + call.in_w;
  first = first < 0 ? 0 : (first > columns ? columns : first);
  last = last < first ? first : (last > columns ? columns : last);
  const int32_t step = call.channels;
  const int32_t row_bytes = call.in_w * step;
  const int8_t* row_in = image + (first_row * call.in_w + from + first - call.pad_w) * step + c;
  for (int32_t r = 0; r < count; ++r, out += width, row_in += row_bytes) {
    const int32_t y = first_row + r;
    const int32_t inside = y < 0 || y >= call.in_h ? first : last;
    int32_t j = 0;
    for (; j < first; ++j) {
      out[j] = zero;
    }
    const int8_t* in = row_in;
    for (; j + 2 <= inside; j += 2, in += 2 * step) {
      const uint32_t two = pair(in[0], in[step]);
      std::memcpy(out + j, &two, sizeof(two));
    }
    if (j < inside) {
      out[j++] = in[0];
    }
    for (; j < columns; ++j) {
      out[j] = zero;
    }
  }
}

// Channels [c, c + 4) of `count` input rows from row `first_row`, every padded column, into
// four planes `plane` int16 apart (each `width` int16 a row): a word load per column gives all
// four, two columns' words give each plane a word (SXTB16 and a pack).
void gather_block(const Call& call, const int8_t* image, int32_t first_row, int32_t count,
                  int32_t c, int16_t* out, int32_t width, int32_t plane) {
  const uint32_t zero = pair(-call.input_offset, -call.input_offset);
  const int32_t left = call.pad_w < width ? call.pad_w : width;
  const int32_t inside = left + call.in_w < width ? call.in_w : width - left;
  const int32_t step = call.channels;
  for (int32_t r = 0; r < count; ++r, out += width) {
    const int32_t y = first_row + r;
    const int32_t end = y < 0 || y >= call.in_h ? 0 : inside;
    for (int32_t k = 0; k < 4; ++k) {
      for (int32_t j = 0; j < left; ++j) {
        out[k * plane + j] = static_cast<int16_t>(zero);
      }
    }
    const int8_t* in = end > 0 ? image + (y * call.in_w) * step + c : image;
    int16_t* to = out + left;
    int32_t j = 0;
    for (; j + 2 <= end; j += 2, in += 2 * step, to += 2) {
      uint32_t w0, w1;
      std::memcpy(&w0, in, 4);
      std::memcpy(&w1, in + step, 4);
      const uint32_t e0 = sxtb16(w0), e1 = sxtb16(w1);
      const uint32_t o0 = sxtb16_ror8(w0), o1 = sxtb16_ror8(w1);
      const uint32_t words[4] = {(e0 & 0xFFFFu) | (e1 << 16), (o0 & 0xFFFFu) | (o1 << 16),
                                 (e0 >> 16) | (e1 & 0xFFFF0000u), (o0 >> 16) | (o1 & 0xFFFF0000u)};
      for (int32_t k = 0; k < 4; ++k) {
        std::memcpy(to + k * plane, &words[k], 4);
      }
    }
    for (; j < end; ++j, in += step, ++to) {
      for (int32_t k = 0; k < 4; ++k) {
        to[k * plane] = in[k];
      }
    }
    for (j += left; j < width; ++j) {
      for (int32_t k = 0; k < 4; ++k) {
        out[k * plane + j] = static_cast<int16_t>(zero);
      }
    }
  }
}

// One row of a window for four neighbouring output pixels from `row` (the first pixel's first
// column): three word loads (five at stride 2) and eight multiply-adds for 12 MACs.
template <int kStride>
inline void row4(const int16_t* row, uint32_t w01, uint32_t w12, int32_t (&acc)[4]) {
  const uint32_t a = load_pair(row), b = load_pair(row + 2), c = load_pair(row + 4);
  if (kStride == 1) {
    acc[0] = smlabt(b, w12, smlad(a, w01, acc[0]));
    acc[1] = smlad(b, w12, smlatb(a, w01, acc[1]));
    acc[2] = smlabt(c, w12, smlad(b, w01, acc[2]));
    acc[3] = smlad(c, w12, smlatb(b, w01, acc[3]));
  } else {
    const uint32_t d = load_pair(row + 6), e = load_pair(row + 8);
    acc[0] = smlabt(b, w12, smlad(a, w01, acc[0]));
    acc[1] = smlabt(c, w12, smlad(b, w01, acc[1]));
    acc[2] = smlabt(d, w12, smlad(c, w01, acc[2]));
    acc[3] = smlabt(e, w12, smlad(d, w01, acc[3]));
  }
}

constexpr int32_t kChunk = 32;  // output pixels whose sums one pass keeps on the stack

// The sums of `count` output pixels one at a time (a row's last few), from `row`.
template <int kStride>
__attribute__((noinline)) void single_sums(const Taps& taps, const int16_t* row, int32_t width,
                                           int32_t count, int32_t* sums) {
  for (int32_t x = 0; x < count; ++x, row += kStride) {
    int32_t acc = smlad(load_pair(row), taps.w01[0], taps.start);
    acc = smlabt(load_pair(row + 2), taps.w12[0], acc);
    const int16_t* next = row + width;
    acc = smlabt(load_pair(next + 2), taps.w12[1], smlad(load_pair(next), taps.w01[1], acc));
    next += width;
    sums[x] = smlabt(load_pair(next + 2), taps.w12[2], smlad(load_pair(next), taps.w01[2], acc));
  }
}

// The sums of `lines` output rows of `count` pixels, the rows of their windows from `rows`
// (`width` int16 apart; each output row's `advance` int16 after the last's), into `sums` row
// after row: four pixels at a time, then one at a time. Apart from the requantization, so that
// the weights, sums and rows stay in registers.
template <int kStride>
__attribute__((noinline)) void chunk_sums(const Taps& taps, const int16_t* rows, int32_t width,
                                          int32_t advance, int32_t count, int32_t lines,
                                          int32_t* sums) {
  const uint32_t a01 = taps.w01[0], a12 = taps.w12[0], b01 = taps.w01[1], b12 = taps.w12[1];
  const uint32_t c01 = taps.w01[2], c12 = taps.w12[2];
  const int32_t groups = count & ~3;
  for (int32_t line = 0; line < lines; ++line, rows += advance) {
    const int16_t* row = rows;
    int32_t x = 0;
    for (; x < groups; x += 4, row += 4 * kStride, sums += 4) {
      int32_t acc[4] = {taps.start, taps.start, taps.start, taps.start};
      row4<kStride>(row, a01, a12, acc);
      row4<kStride>(row + width, b01, b12, acc);
      row4<kStride>(row + 2 * width, c01, c12, acc);
      sums[0] = acc[0];
      sums[1] = acc[1];
      sums[2] = acc[2];
      sums[3] = acc[3];
    }
    if (x < count) {
      single_sums<kStride>(taps, row, width, count - x, sums);
      sums += count - x;
    }
  }
}

// The output bytes of `lines` rows of `count` pixels of one channel from their sums (`stride`
// sums a row), `channels` bytes apart and `line_bytes` a row from `out`: CMSIS-NN's
// requantization (`requantize`), the output offset and the clamp. Where the range reaches
// int8's top (ReLU or none), the clamp is a saturation to 8 bits and a lower bound.
template <typename Requantize>
inline void requantize_lines(const Call& call, const int32_t* sums, int32_t stride,
                             int32_t count, int32_t lines, int32_t line_bytes, int8_t* out,
                             Requantize requantize) {
  const int32_t step = call.channels, offset = call.output_offset;
  const int32_t low = call.activation_min, high = call.activation_max;
  const bool to_top = high == 127;
  for (int32_t line = 0; line < lines; ++line, sums += stride, out += line_bytes) {
    int8_t* to = out;
    const int32_t* const end = sums + count;  // the sum pointer is the loop's only counter
    if (to_top) {
      for (const int32_t* sum = sums; sum != end; ++sum, to += step) {
        *to = static_cast<int8_t>(saturate8(requantize(*sum) + offset, low));
      }
      continue;
    }
    for (const int32_t* sum = sums; sum != end; ++sum, to += step) {
      int32_t v = requantize(*sum) + offset;
      v = v < low ? low : v;
      *to = static_cast<int8_t>(v > high ? high : v);
    }
  }
}

__attribute__((noinline)) void requantize_chunk(const Call& call, const Taps& taps,
                                                const int32_t* sums, int32_t stride,
                                                int32_t count, int32_t lines,
                                                int32_t line_bytes, int8_t* out) {
  const int32_t multiplier = taps.multiplier, shift = taps.shift;
#if !defined(CMSIS_NN_USE_SINGLE_ROUNDING)
  // every sum lies within |start| + 9 * 128 * 128 < |start| + 2^18
  const int32_t left = shift > 0 ? shift : 0;
  if (doubling_fits(taps.start, 1u << 18, left)) {
    const int32_t doubled = left + 1, right = shift < 0 ? -shift : 0;
    if (right == 0) {
      requantize_lines(call, sums, stride, count, lines, line_bytes, out,
                       [=](int32_t v) { return smmulr(v << doubled, multiplier); });
    } else {
      requantize_lines(call, sums, stride, count, lines, line_bytes, out, [=](int32_t v) {
        return shift_rounded(smmulr(v << doubled, multiplier), right);
      });
    }
    return;
  }
#endif
  requantize_lines(call, sums, stride, count, lines, line_bytes, out,
                   [=](int32_t v) { return arm_nn_requantize(v, multiplier, shift); });
}

// `lines` output rows of `count` pixels of one channel from gathered rows (`width` int16
// apart, holding the columns of a multiple of four pixels; each output row's `advance` int16
// after the last's), written `channels` bytes apart from `out`, `line_bytes` a row.
template <int kStride>
void channel_rows(const Call& call, const Taps& taps, const int16_t* rows, int32_t width,
                  int32_t advance, int32_t count, int32_t lines, int32_t line_bytes,
                  int8_t* out) {
  int32_t sums[kChunk];
  if (count <= kChunk) {  // several rows a pass
    const int32_t per_pass = kChunk / count;
    for (int32_t line = 0; line < lines; line += per_pass) {
      const int32_t n = line + per_pass <= lines ? per_pass : lines - line;
      chunk_sums<kStride>(taps, rows + line * advance, width, advance, count, n, sums);
      requantize_chunk(call, taps, sums, count, count, n, line_bytes, out + line * line_bytes);
    }
    return;
  }
  for (int32_t line = 0; line < lines; ++line, rows += advance, out += line_bytes) {
    for (int32_t x = 0; x < count; x += kChunk) {  // a row in passes
      const int32_t n = x + kChunk <= count ? kChunk : count - x;
      chunk_sums<kStride>(taps, rows + x * kStride, width, 0, n, 1, sums);
      requantize_chunk(call, taps, sums, 0, n, 1, 0, out + x * call.channels);
    }
  }
}

// One image in tiles of `tile` output rows: per tile and channel, gather the rows the tile
// reads into `rows`, then compute the tile's rows of that channel.
template <int kStride>
void planar_tiles(const Call& call, const int8_t* in, const int8_t* kernel, int16_t* rows,
                  int32_t tile, int8_t* out) {
  const int32_t width = planar_width(call.out_w, kStride);
  for (int32_t y = 0; y < call.out_h; y += tile) {
    const int32_t count = y + tile <= call.out_h ? tile : call.out_h - y;
    const int32_t first = y * call.stride_h - call.pad_h;
    const int32_t gathered = planar_rows(count, call.stride_h);
    const int32_t plane = gathered * width;
    for (int32_t c = 0; c < call.channels; c += 4) {
      gather_block(call, in, first, gathered, c, rows, width, plane);
      for (int32_t k = 0; k < 4; ++k) {
        const Taps taps = channel_taps(call, kernel, c + k);
        channel_rows<kStride>(call, taps, rows + k * plane, width, call.stride_h * width,
                              call.out_w, count, call.out_w * call.channels,
                              out + y * call.out_w * call.channels + c + k);
      }
    }
  }
}

// One image with no buffer: per output row and channel, strips of the row's pixels, each
// gathering its three rows into the stack.
template <int kStride>
void planar_strips(const Call& call, const int8_t* in, const int8_t* kernel, int8_t* out) {
  constexpr int32_t kPixels = (kStripWidth - kKernel - 2) / kStride + 1;
  alignas(4) int16_t strip[kKernel * kStripWidth];
  for (int32_t y = 0; y < call.out_h; ++y) {
    const int32_t first = y * call.stride_h - call.pad_h;
    int8_t* row_out = out + y * call.out_w * call.channels;
    for (int32_t c = 0; c < call.channels; ++c) {
      const Taps taps = channel_taps(call, kernel, c);
      for (int32_t x = 0; x < call.out_w; x += kPixels) {
        const int32_t count = x + kPixels <= call.out_w ? kPixels : call.out_w - x;
        const int32_t columns = planar_width(count, kStride);
        gather_planar(call, in, first, kKernel, c, x * kStride, columns, strip, kStripWidth);
        channel_rows<kStride>(call, taps, strip, kStripWidth, 0, count, 1, 0,
                              row_out + x * call.channels + c);
      }
    }
  }
}

// One image off MVE: in tiles of the output rows the buffer holds, or strip by strip.
arm_cmsis_nn_status planar_image(const cmsis_nn_context* ctx, const Call& call,
                                 const int8_t* in, const int8_t* kernel, int8_t* out) {
  const int32_t width = planar_width(call.out_w, call.stride_w);
  const int32_t room = ctx == nullptr || ctx->buf == nullptr ? 0 : ctx->size / (8 * width);
  const int32_t tile = room < kKernel ? 0 : (room - kKernel) / call.stride_h + 1;
  if (tile == 0) {
    if (call.stride_w == 1) {
      planar_strips<1>(call, in, kernel, out);
    } else {
      planar_strips<2>(call, in, kernel, out);
    }
    return ARM_CMSIS_NN_SUCCESS;
  }
  if (reinterpret_cast<uintptr_t>(ctx->buf) % 4 != 0) {
    return ARM_CMSIS_NN_ARG_ERROR;
  }
  int16_t* rows = static_cast<int16_t*>(ctx->buf);
  if (call.stride_w == 1) {
    planar_tiles<1>(call, in, kernel, rows, tile, out);
  } else {
    planar_tiles<2>(call, in, kernel, rows, tile, out);
  }
  return ARM_CMSIS_NN_SUCCESS;
}
