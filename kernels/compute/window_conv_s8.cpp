// window_conv_s8 (cortex_m_nn/compute.h): an int8 convolution of any window, stride, padding
// and dilation, no groups, whose input channels are a multiple of 4 off MVE.
//
// Each output element is bias + the sum over its window of (input + input_offset) * weight, a
// tap outside the input contributing nothing (CMSIS-NN's zero-point padding), requantized per
// output channel by CMSIS-NN's arithmetic (either rounding), plus output_offset, clamped: the
// integers of arm_convolve_s8. Off MVE a pixel-pair convolution (pixel_pairs.h) whose pixels'
// inputs are their windows, gathered tap by tap (the weights' OHWI order) and widened into the
// buffer, four bytes per weight of an output channel: the buffer arm_convolve_s8 takes off MVE
// for its two int16 columns. On MVE a pixel-quad convolution (pixel_quads.h): the quad's
// windows gathered a window row at a time where the row lies inside the input (a tap at a
// time at its edges), a tap outside it as the input offset's negation (which adds nothing),
// into 64 bytes per 16 weights of an output channel (at most 32 bytes more than
// arm_convolve_s8's MVE buffer). Each pair's (quad's) windows are read before its outputs are
// written. The host build computes the pixel-pair products in C.
#include "cortex_m_nn/compute.h"

#include "pixel_pairs.h"
#include "pixel_quads.h"

namespace cortex_m_nn {
namespace compute {
namespace {

// Where output pixels' windows lie in the input.
struct Geometry {
  const int8_t* input;
  int32_t in_h;
  int32_t in_w;
  int32_t depth;  // input channels
  int32_t kernel_h;
  int32_t kernel_w;
  int32_t stride_h;
  int32_t stride_w;
  int32_t pad_h;
  int32_t pad_w;
  int32_t dilation_h;
  int32_t dilation_w;
  int32_t out_h;
  int32_t out_w;

  // Output pixel p's image, and its window's first row and column (may lie outside).
  void origin(int32_t p, int32_t* image, int32_t* y, int32_t* x) const {
    const int32_t per_image = out_h * out_w;
    *image = p / per_image;
    const int32_t rest = p - *image * per_image;
    *y = rest / out_w * stride_h - pad_h;
    *x = rest % out_w * stride_w - pad_w;
  }

  // The input channels at (row y, column x) of `image`, or null outside the input.
  const int8_t* at(int32_t image, int32_t y, int32_t x) const {
    if (y < 0 || y >= in_h || x < 0 || x >= in_w) {
      return nullptr;
    }
    return input + ((image * in_h + y) * in_w + x) * depth;
  }

#if defined(ARM_MATH_MVEI)
  // The windows of the quad of pixels from p (the last pixel again where there are fewer),
  // a tap outside the input as `pad`: per window row its taps left of the input, inside it and
  // right of it (without dilation across; else a tap at a time).
  void gather_quad(int32_t p, int32_t pixels, int8_t pad, int8_t* to) const {
    const int32_t row_bytes = kernel_w * depth;
    for (int32_t i = 0; i < quads::kPixels; ++i, to += quads::kChunk) {
      int32_t image, y, x;
      origin(p + i < pixels ? p + i : pixels - 1, &image, &y, &x);
      if (dilation_w != 1) {
        gather_taps(image, y, x, pad, to);
        continue;
      }
      const int32_t left = x < 0 ? (-x < kernel_w ? -x : kernel_w) : 0;
      const int32_t over = x + kernel_w - in_w;
      const int32_t right = over <= 0 ? 0 : (over < kernel_w - left ? over : kernel_w - left);
      const int32_t middle = kernel_w - left - right;
      int32_t from = ((image * in_h + y) * in_w + x + left) * depth;
      for (int32_t ky = 0, k = 0; ky < kernel_h; ++ky, k += row_bytes) {
        const int32_t row = y + ky * dilation_h;
        if (row < 0 || row >= in_h || middle == 0) {
          quads::fill(to, k, pad, row_bytes);
        } else if (left == 0 && right == 0) {
          quads::put(to, k, input + from, row_bytes);
        } else {
          quads::fill(to, k, pad, left * depth);
          quads::put(to, k + left * depth, input + from, middle * depth);
          quads::fill(to, k + (left + middle) * depth, pad, right * depth);
        }
        from += dilation_h * in_w * depth;
      }
    }
  }

  // One pixel's window (origin y, x of `image`) a tap at a time.
  void gather_taps(int32_t image, int32_t y, int32_t x, int8_t pad, int8_t* to) const {
    for (int32_t ky = 0, k = 0; ky < kernel_h; ++ky) {
      for (int32_t kx = 0; kx < kernel_w; ++kx, k += depth) {
        const int8_t* tap = at(image, y + ky * dilation_h, x + kx * dilation_w);
        if (tap != nullptr) {
          quads::put(to, k, tap, depth);
        } else {
          quads::fill(to, k, pad, depth);
        }
      }
    }
  }
#else
  // Pixels p and q's windows, widened tap by tap.
  void gather(int32_t p, int32_t q, uint32_t offsets, uint32_t* to) const {
    int32_t image_a, ya, xa, image_b, yb, xb;
    origin(p, &image_a, &ya, &xa);
    origin(q, &image_b, &yb, &xb);
    for (int32_t ky = 0; ky < kernel_h; ++ky) {
      const int32_t dy = ky * dilation_h;
      for (int32_t kx = 0; kx < kernel_w; ++kx, to += depth) {
        const int32_t dx = kx * dilation_w;
        pairs::widen(at(image_a, ya + dy, xa + dx), at(image_b, yb + dy, xb + dx), depth,
                     offsets, to);
      }
    }
  }
#endif
};

// Every output pixel of the call, its windows from `geometry`, through the buffer.
void products(const pairs::Call& call, const Geometry& geometry, void* buffer, int8_t* output) {
#if defined(ARM_MATH_MVEI)
  const int8_t pad = static_cast<int8_t>(-call.input_offset);
  const int32_t pixels = call.pixels;
  quads::run(
      call,
      [&geometry, pixels, pad](int32_t p, int8_t* to) {
        geometry.gather_quad(p, pixels, pad, to);
      },
      static_cast<int8_t*>(buffer), output);
#else
  const uint32_t offsets = (static_cast<uint32_t>(call.input_offset) & 0xFFFFu) * 0x10001u;
  pairs::run(
      call,
      [&geometry, offsets](int32_t p, int32_t q, uint32_t* to) {
        geometry.gather(p, q, offsets, to);
      },
      static_cast<uint32_t*>(buffer), output);
#endif
}

}  // namespace

int32_t window_conv_s8_get_buffer_size(const cmsis_nn_dims* filter_dims) {
  const int32_t depth = filter_dims->h * filter_dims->w * filter_dims->c;
#if defined(ARM_MATH_MVEI)
  return quads::gathered_bytes(depth);
#else
  return depth * static_cast<int32_t>(sizeof(uint32_t));  // two int16 per weight
#endif
}

arm_cmsis_nn_status window_conv_s8(
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
  const int32_t needed = window_conv_s8_get_buffer_size(filter_dims);
#if defined(ARM_MATH_MVEI)
  const bool depths = true;
#else
  const bool depths = input_dims->c % pairs::kGroup == 0;
#endif
  const bool shapes = filter_dims->c == input_dims->c && depths &&
                      filter_dims->n == output_dims->c && output_dims->n == input_dims->n;
  const bool buffer = ctx->buf != nullptr && ctx->size >= needed &&
                      (reinterpret_cast<uintptr_t>(ctx->buf) & 3u) == 0;
  if (!shapes || !buffer || conv_params->stride.h < 1 || conv_params->stride.w < 1 ||
      conv_params->dilation.h < 1 || conv_params->dilation.w < 1) {
    return ARM_CMSIS_NN_ARG_ERROR;
  }
  const pairs::Call call{output_dims->n * output_dims->h * output_dims->w,
                         filter_dims->h * filter_dims->w * filter_dims->c,
                         output_dims->c,
                         filter,
                         bias,
                         quant->multiplier,
                         quant->shift,
                         conv_params->input_offset,
                         conv_params->output_offset,
                         conv_params->activation.min,
                         conv_params->activation.max};
  const Geometry geometry{input,
                          input_dims->h,
                          input_dims->w,
                          input_dims->c,
                          filter_dims->h,
                          filter_dims->w,
                          conv_params->stride.h,
                          conv_params->stride.w,
                          conv_params->padding.h,
                          conv_params->padding.w,
                          conv_params->dilation.h,
                          conv_params->dilation.w,
                          output_dims->h,
                          output_dims->w};
  products(call, geometry, ctx->buf, output);
  return ARM_CMSIS_NN_SUCCESS;
}

}  // namespace compute
}  // namespace cortex_m_nn
