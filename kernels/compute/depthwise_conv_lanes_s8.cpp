// depthwise_conv_lanes_s8 (cortex_m_nn/compute.h): a 3x3 depthwise convolution.
//
// Each output element is bias + the sum over the window's taps of (input + input_offset) *
// weight, a tap outside the input contributing nothing (CMSIS-NN's zero-point padding),
// requantized per channel by CMSIS-NN's own helper (arm_requantize_mve_32x4 /
// arm_nn_requantize, so either rounding), plus output_offset, clamped: the integers of
// arm_depthwise_conv_s8 and its _opt and _3x3 variants.
//
// MVE. Four channels sit in the lanes of an int32 vector. MVE multiplies lanes but does not
// accumulate their products in one instruction, and a vector load takes its address from a
// register plus an immediate, so what costs is addresses: arm_depthwise_conv_s8_opt copies
// every window into its buffer to load it at fixed offsets. Here, per output row and block of
// four channels, the three input rows the row reads are gathered into the buffer once, a word
// (four channels of a pixel) per column, pad columns and rows filled with the input's zero point;
// then four neighbouring output pixels share each weight load and read their inputs at
// offsets fixed at compile time (per stride), the sum split as
// sum(input * weight) + input_offset * sum(weight): per tap one weight load and four loads,
// multiplies and adds for 16 MACs. Output rows are written in order, each after the three
// input rows it reads (python/cortex_m_nn/plan/overlap.py).
//
// Other ISAs (DSP, and the host tests' build): the rows gathered as int16, one plane per
// channel, so that one SMLAD takes two taps (depthwise_conv_lanes_planar.h).
#include "cortex_m_nn/compute.h"

#include <cstring>

#include "arm_nnsupportfunctions.h"
#include "dsp_arith.h"

namespace cortex_m_nn {
namespace compute {
namespace {

constexpr int32_t kKernel = 3;

// One convolution's shapes and arithmetic.
struct Call {
  int32_t in_w;
  int32_t in_h;
  int32_t channels;
  int32_t stride_w;
  int32_t stride_h;
  int32_t pad_w;
  int32_t pad_h;
  int32_t out_w;
  int32_t out_h;
  const int32_t* bias;  // may be null
  const int32_t* multiplier;
  const int32_t* shift;
  int32_t input_offset;
  int32_t output_offset;
  int32_t activation_min;
  int32_t activation_max;
};

inline int32_t clamp(const Call& call, int32_t v) {
  v += call.output_offset;
  v = v < call.activation_min ? call.activation_min : v;
  return v > call.activation_max ? call.activation_max : v;
}

#if defined(ARM_MATH_MVEI)

// The buffer: the current block's first sum (bias + input_offset * the weights' sum, four
// int32) and weights (a word per tap), prepared per tile; then the gathered rows of a tile of
// output rows, `padded` words each (column j holds input column j - pad_w).
constexpr int32_t kBlockBytes = 4 * 4 + 4 * 9;

struct Rows {
  int8_t* rows;
  int32_t padded;
  int8_t* weights;
  int32_t* start;
};

inline int32_t padded_width(int32_t out_w, int32_t stride_w) {
  return (out_w - 1) * stride_w + kKernel;
}

// The input rows a tile of `tile` output rows reads.
inline int32_t tile_rows(int32_t tile, int32_t stride_h) { return (tile - 1) * stride_h + kKernel; }

// Block [c, c + 4)'s first sum and weights into the buffer.
void prepare_block(const Call& call, const int8_t* kernel, int32_t c, const Rows& rows) {
  int32x4_t sum = vdupq_n_s32(0);
  for (int32_t t = 0; t < kKernel * kKernel; ++t) {
    const int8_t* w = kernel + t * call.channels + c;
    std::memcpy(rows.weights + 4 * t, w, 4);
    sum = vaddq_s32(sum, vldrbq_s32(w));
  }
  const int32x4_t bias = call.bias != nullptr ? vldrwq_s32(call.bias + c) : vdupq_n_s32(0);
  vstrwq_s32(rows.start, vmlaq_n_s32(bias, sum, call.input_offset));
}

// Where a gathered row's columns come from, the same for every row: `left` pad columns, then
// `inside` input columns from input column `first`, then pads to `padded`.
struct Columns {
  int32_t left;
  int32_t inside;
  int32_t first;
  int32_t padded;
  uint32x4_t pads;     // the input's zero point in every byte
  uint32x4_t offsets;  // 0, C, 2C, 3C: four input columns' byte offsets
};

Columns columns(const Call& call, int32_t padded) {
  const int32_t left = call.pad_w < padded ? call.pad_w : padded;
  const int32_t end = left + call.in_w < padded ? left + call.in_w : padded;
  const uint32_t pad = 0x01010101u * static_cast<uint8_t>(-call.input_offset);
  return Columns{left, end - left, left - call.pad_w, padded, vdupq_n_u32(pad),
                 vmulq_n_u32(vidupq_n_u32(0, 1), static_cast<uint32_t>(call.channels))};
}

// Stores `count` pad words at `out`, four at a time (the last store predicated).
inline void pad_words(uint32_t* out, int32_t count, uint32x4_t pads) {
  for (int32_t j = 0; j < count; j += 4) {
    vstrwq_p_u32(out + j, pads, vctp32q(static_cast<uint32_t>(count - j)));
  }
}

// Gathers channels [c, c + 4) of input row `y` (of `image`; pads outside it) into `out`, a
// word per column, four columns per vector gather (the last one predicated).
void gather_row(const Call& call, const Columns& cols, const int8_t* image, int32_t y,
                int32_t c, uint32_t* out) {
  if (y < 0 || y >= call.in_h) {
    pad_words(out, cols.padded, cols.pads);
    return;
  }
  pad_words(out, cols.left, cols.pads);
  const uint32_t* in = reinterpret_cast<const uint32_t*>(
      image + (y * call.in_w + cols.first) * call.channels + c);
  uint32_t* to = out + cols.left;
  const int32_t step = 4 * call.channels;
  for (int32_t j = 0; j < cols.inside; j += 4) {
    const mve_pred16_t lanes = vctp32q(static_cast<uint32_t>(cols.inside - j));
    vstrwq_p_u32(to + j, vldrwq_gather_offset_z_u32(in, cols.offsets, lanes), lanes);
    in = reinterpret_cast<const uint32_t*>(reinterpret_cast<const int8_t*>(in) + step);
  }
  pad_words(to + cols.inside, cols.padded - cols.left - cols.inside, cols.pads);
}

#include "depthwise_conv_lanes_mve.h"  // the inner loops, in inline assembly

// Four output pixels of the gathered rows from column `column`, kStride apart.
template <int kStride>
inline void four_pixels(const Call& call, const Output& output, const Rows& rows,
                        int32_t column, int32_t c, int8_t* out) {
  const int32x4_t start = vldrwq_s32(rows.start);
  int32x4_t a0 = start, a1 = start, a2 = start, a3 = start;
  const int8_t* in = rows.rows + 4 * column;
  const int32_t row_bytes = 4 * rows.padded;
  mac_row4<kStride>(in, rows.weights, a0, a1, a2, a3);
  mac_row4<kStride>(in + row_bytes, rows.weights + 12, a0, a1, a2, a3);
  mac_row4<kStride>(in + 2 * row_bytes, rows.weights + 24, a0, a1, a2, a3);
  store4(a0, a1, a2, a3, call.multiplier + c, call.shift + c, output, call.channels, out);
}

// One output pixel of the gathered rows from column `column`.
inline void one_pixel(const Call& call, const Output& output, const Rows& rows, int32_t column,
                      int32_t c, int8_t* out) {
  int32x4_t a0 = vldrwq_s32(rows.start);
  const int8_t* in = rows.rows + 4 * column;
  const int32_t row_bytes = 4 * rows.padded;
  mac_row1(in, rows.weights, a0);
  mac_row1(in + row_bytes, rows.weights + 12, a0);
  mac_row1(in + 2 * row_bytes, rows.weights + 24, a0);
  store1(a0, call.multiplier + c, call.shift + c, output, call.channels, out);
}

// One output row of channels [c, c + 4) from the gathered rows, from gathered row `first`.
template <int kStride>
void row_block(const Call& call, const Output& output, const Rows& rows, int32_t first,
               int32_t c, int8_t* out) {
  Rows from = rows;
  from.rows += 4 * first * rows.padded;
  int32_t x = 0;
  for (; x + 4 <= call.out_w; x += 4) {
    four_pixels<kStride>(call, output, from, x * kStride, c, out + x * call.channels + c);
  }
  for (; x < call.out_w; ++x) {
    one_pixel(call, output, from, x * kStride, c, out + x * call.channels + c);
  }
}

// One image: per tile of `tile` output rows, per block, gather the rows the tile reads, then
// compute its output rows.
template <int kStride>
void image(const Call& call, const int8_t* in, const int8_t* kernel, const Rows& rows,
           int32_t tile, int8_t* out) {
  const Columns cols = columns(call, rows.padded);
  const Output output{call.output_offset, call.activation_min, call.activation_max};
  for (int32_t y = 0; y < call.out_h; y += tile) {
    const int32_t count = y + tile <= call.out_h ? tile : call.out_h - y;
    const int32_t first_row = y * call.stride_h - call.pad_h;
    for (int32_t c = 0; c < call.channels; c += 4) {
      prepare_block(call, kernel, c, rows);
      for (int32_t r = 0; r < tile_rows(count, call.stride_h); ++r) {
        gather_row(call, cols, in, first_row + r, c,
                   reinterpret_cast<uint32_t*>(rows.rows) + r * rows.padded);
      }
      for (int32_t t = 0; t < count; ++t) {
        row_block<kStride>(call, output, rows, t * call.stride_h, c,
                           out + (y + t) * call.out_w * call.channels);
      }
    }
  }
}

// Gathers channels [c, c + 4) of the kKernel input rows from `first_row`, columns
// [first_col, first_col + span), into `window` (kSpan words a row), pads outside the input.
template <int kSpan>
void gather_window(const Call& call, const Columns& cols, const int8_t* image, int32_t first_row,
                   int32_t first_col, int32_t span, int32_t c, uint32_t* window) {
  const bool inside_columns = first_col >= 0 && first_col + span <= call.in_w;
  if (inside_columns && span == kSpan && first_row >= 0 && first_row + kKernel <= call.in_h) {
    // the usual case: every word in the input, kSpan a constant, no lane tested
    const int8_t* row = image + (first_row * call.in_w + first_col) * call.channels + c;
    const int32_t row_bytes = call.in_w * call.channels;
    for (int32_t r = 0; r < kKernel; ++r, row += row_bytes, window += kSpan) {
      const int8_t* from = row;
      for (int32_t j = 0; j < kSpan; j += 4, from += 4 * call.channels) {
        const mve_pred16_t lanes = vctp32q(static_cast<uint32_t>(kSpan - j));
        const uint32_t* words = reinterpret_cast<const uint32_t*>(from);
        vstrwq_p_u32(window + j, vldrwq_gather_offset_z_u32(words, cols.offsets, lanes), lanes);
      }
    }
    return;
  }
  const uint32x4_t lane = vidupq_n_u32(0, 1);
  for (int32_t r = 0; r < kKernel; ++r, window += kSpan) {
    const int32_t y = first_row + r;
    if (y < 0 || y >= call.in_h) {
      pad_words(window, span, cols.pads);
      continue;
    }
    const uint32_t* row = reinterpret_cast<const uint32_t*>(
        image + (y * call.in_w + first_col) * call.channels + c);
    for (int32_t j = 0; j < span; j += 4) {
      mve_pred16_t lanes = vctp32q(static_cast<uint32_t>(span - j));
      if (!inside_columns) {  // lanes whose column lies in the input (unsigned: x >= 0 too)
        const uint32x4_t x = vaddq_n_u32(lane, static_cast<uint32_t>(first_col + j));
        lanes &= vcmphiq_u32(vdupq_n_u32(static_cast<uint32_t>(call.in_w)), x);
      }
      const uint32x4_t v = vldrwq_gather_offset_z_u32(row, cols.offsets, lanes);
      vstrwq_p_u32(window + j, vpselq_u32(v, cols.pads, lanes),
                   vctp32q(static_cast<uint32_t>(span - j)));
      row = reinterpret_cast<const uint32_t*>(reinterpret_cast<const int8_t*>(row) +
                                              4 * call.channels);
    }
  }
}

// One image with no buffer: per output row and block, each group of four pixels (then each
// pixel left) gathers its own window into a few words of stack.
template <int kStride>
void image_windows(const Call& call, const int8_t* in, const int8_t* kernel, int8_t* out) {
  constexpr int32_t kSpan = 3 * kStride + kKernel;  // the columns four pixels read
  alignas(16) int8_t block[kBlockBytes];
  alignas(16) uint32_t window[kKernel * kSpan];
  const Rows rows{reinterpret_cast<int8_t*>(window), kSpan, block + 16,
                  reinterpret_cast<int32_t*>(block)};
  const Columns cols = columns(call, kSpan);
  const Output output{call.output_offset, call.activation_min, call.activation_max};
  for (int32_t y = 0; y < call.out_h; ++y) {
    const int32_t first_row = y * call.stride_h - call.pad_h;
    int8_t* row_out = out + y * call.out_w * call.channels;
    for (int32_t c = 0; c < call.channels; c += 4) {
      prepare_block(call, kernel, c, rows);
      int32_t x = 0;
      for (; x + 4 <= call.out_w; x += 4) {
        gather_window<kSpan>(call, cols, in, first_row, x * kStride - call.pad_w, kSpan, c,
                             window);
        four_pixels<kStride>(call, output, rows, 0, c, row_out + x * call.channels + c);
      }
      for (; x < call.out_w; ++x) {
        gather_window<kSpan>(call, cols, in, first_row, x * kStride - call.pad_w, kKernel, c,
                             window);
        one_pixel(call, output, rows, 0, c, row_out + x * call.channels + c);
      }
    }
  }
}

#else
using namespace dsp;  // NOLINT: the planar code names the DSP arithmetic unqualified
#include "depthwise_conv_lanes_planar.h"  // DSP and the host build
#endif

}  // namespace

int32_t depthwise_conv_lanes_s8_get_buffer_size(const cmsis_nn_dims* output_dims,
                                                int32_t stride_h, int32_t stride_w,
                                                int32_t tile) {
#if defined(ARM_MATH_MVEI)
  if (tile < 1) {
    return 0;  // each group of pixels gathers its own window on the stack
  }
  const int32_t rows = tile_rows(tile < output_dims->h ? tile : output_dims->h, stride_h);
  return kBlockBytes + 4 * rows * padded_width(output_dims->w, stride_w);
#else
  if (tile < 1) {
    return 0;  // each output row of each channel gathers its rows on the stack
  }
  const int32_t rows = planar_rows(tile < output_dims->h ? tile : output_dims->h, stride_h);
  return 8 * rows * planar_width(output_dims->w, stride_w);  // four channels' planes
#endif
}

namespace {

#if defined(ARM_MATH_MVEI)
// One image on MVE: in tiles of output rows its buffer holds, or window by window without one.
arm_cmsis_nn_status mve_image(const cmsis_nn_context* ctx, const Call& call, const int8_t* in,
                              const int8_t* kernel, int8_t* out) {
  const int32_t padded = padded_width(call.out_w, call.stride_w);
  const int32_t room = ctx->buf == nullptr ? 0 : (ctx->size - kBlockBytes) / 4;
  const int32_t tile = room < kKernel * padded ? 0 : (room / padded - kKernel) / call.stride_h + 1;
  if (tile == 0) {  // no room for one row's tile: each group of pixels gathers its own window
    if (call.stride_w == 1) {
      image_windows<1>(call, in, kernel, out);
    } else {
      image_windows<2>(call, in, kernel, out);
    }
    return ARM_CMSIS_NN_SUCCESS;
  }
  if (reinterpret_cast<uintptr_t>(ctx->buf) % 4 != 0) {
    return ARM_CMSIS_NN_ARG_ERROR;
  }
  int8_t* buffer = static_cast<int8_t*>(ctx->buf);
  const Rows rows{buffer + kBlockBytes, padded, buffer + 16, reinterpret_cast<int32_t*>(buffer)};
  if (call.stride_w == 1) {
    image<1>(call, in, kernel, rows, tile, out);
  } else {
    image<2>(call, in, kernel, rows, tile, out);
  }
  return ARM_CMSIS_NN_SUCCESS;
}
#endif

}  // namespace

arm_cmsis_nn_status depthwise_conv_lanes_s8(
    const cmsis_nn_context* ctx,
    const cmsis_nn_dw_conv_params* params,
    const cmsis_nn_per_channel_quant_params* quant,
    const cmsis_nn_dims* input_dims,
    const int8_t* input,
    const cmsis_nn_dims* filter_dims,
    const int8_t* kernel,
    const cmsis_nn_dims* bias_dims,
    const int32_t* bias,
    const cmsis_nn_dims* output_dims,
    int8_t* output) {
  (void)bias_dims;
  const int32_t channels = input_dims->c;
  if (params->ch_mult != 1 || output_dims->c != channels || channels % 4 != 0 ||
      filter_dims->w != kKernel || filter_dims->h != kKernel || params->dilation.w != 1 ||
      params->dilation.h != 1 || (params->stride.w != 1 && params->stride.w != 2) ||
      reinterpret_cast<uintptr_t>(input) % 4 != 0) {
    return ARM_CMSIS_NN_ARG_ERROR;
  }
  const Call call{input_dims->w,   input_dims->h,          channels,
                  params->stride.w, params->stride.h,      params->padding.w,
                  params->padding.h, output_dims->w,       output_dims->h,
                  bias,            quant->multiplier,      quant->shift,
                  params->input_offset, params->output_offset, params->activation.min,
                  params->activation.max};
  const int32_t image_in = call.in_h * call.in_w * channels;
  const int32_t image_out = call.out_h * call.out_w * channels;
  for (int32_t n = 0; n < input_dims->n; ++n) {
#if defined(ARM_MATH_MVEI)
    const arm_cmsis_nn_status status =
        mve_image(ctx, call, input + n * image_in, kernel, output + n * image_out);
#else
    const arm_cmsis_nn_status status =
        planar_image(ctx, call, input + n * image_in, kernel, output + n * image_out);
#endif
    if (status != ARM_CMSIS_NN_SUCCESS) {
      return status;
    }
  }
  return ARM_CMSIS_NN_SUCCESS;
}

}  // namespace compute
}  // namespace cortex_m_nn
