// pointwise_conv_s8 (cortex_m_nn/compute.h): a 1x1 convolution, stride 1, no padding.
//
// Each output element is bias + the sum over the input channels of (input + input_offset) *
// weight, requantized per output channel by CMSIS-NN's arithmetic (either rounding), plus
// output_offset, clamped: the integers of arm_convolve_1x1_s8_fast. Off MVE a pixel-pair
// convolution (pixel_pairs.h) whose pixels' inputs are their own channels: up to 64 input
// channels the widened pair sits on the stack (256 bytes); deeper calls take the buffer, four
// bytes per input channel. On MVE a pixel-quad convolution (pixel_quads.h): up to 64 input
// channels the gathered quad sits on the stack (256 bytes), deeper calls take the buffer (64
// bytes per 16 input channels). Each pair (quad) is read before it is written: the output may
// take the input's bytes (python/cortex_m_nn/plan/overlap.py; on MVE with up to 64 output
// channels, one block). The host build computes the pixel-pair products in C.
#include "cortex_m_nn/compute.h"

#include "pixel_pairs.h"
#include "pixel_quads.h"

namespace cortex_m_nn {
namespace compute {
namespace {

// Up to this depth a pixel pair's widened inputs (a quad's gathered, on MVE) sit on the stack
// (256 bytes), not the buffer.
constexpr int32_t kStackDepth = 64;

// Every pixel of the call from `input`, through `buffer` (null: the stack's).
void products(const pairs::Call& call, const int8_t* input, void* buffer, int8_t* output) {
  const int32_t depth = call.depth;
#if defined(ARM_MATH_MVEI)
  alignas(16) int8_t stack[kStackDepth * quads::kPixels];
  const int32_t last = call.pixels - 1;
  quads::run(
      call,
      [=](int32_t p, int8_t* to) {
        for (int32_t i = 0; i < quads::kPixels; ++i) {
          const int32_t q = p + i < last ? p + i : last;
          quads::put(to + i * quads::kChunk, 0, input + q * depth, depth);
        }
      },
      buffer != nullptr ? static_cast<int8_t*>(buffer) : stack, output);
#else
  uint32_t stack[kStackDepth];
  const uint32_t offsets = (static_cast<uint32_t>(call.input_offset) & 0xFFFFu) * 0x10001u;
  pairs::run(
      call,
      [=](int32_t p, int32_t q, uint32_t* to) {
        pairs::widen(input + p * depth, input + q * depth, depth, offsets, to);
      },
      buffer != nullptr ? static_cast<uint32_t*>(buffer) : stack, output);
#endif
}

}  // namespace

int32_t pointwise_conv_s8_get_buffer_size(const cmsis_nn_dims* input_dims) {
  if (input_dims->c <= kStackDepth) {
    return 0;
  }
#if defined(ARM_MATH_MVEI)
  return quads::gathered_bytes(input_dims->c);
#else
  return input_dims->c * static_cast<int32_t>(sizeof(uint32_t));  // two int16 per input
#endif
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
  const pairs::Call call{input_dims->n * input_dims->h * input_dims->w,
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
  products(call, input, needed > 0 ? ctx->buf : nullptr, output);
  return ARM_CMSIS_NN_SUCCESS;
}

}  // namespace compute
}  // namespace cortex_m_nn
