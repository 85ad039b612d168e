// Our compute functions (kernels/compute) on the target, one case after another: each case's
// tensors come from a seeded generator (tests/target/compute_cases.py draws the same numbers and
// writes the Python reference's outputs into cases.h); the case runs our function and the
// CMSIS-NN function it stands in for, each between bench markers (the instruction-count
// plugin's regions 2i and 2i + 1; the convolution cases after the depthwise ones), and both
// outputs are compared with the reference's.
// Prints one line per case, exits with the number of cases whose outputs differ.
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "arm_nnfunctions.h"
extern "C" {
#include "bench.h"
}
#include "cases.h"
#include "cortex_m_nn/compute.h"

namespace {

// The generator compute_cases.py mirrors: a 32-bit linear congruential sequence.
struct Numbers {
  uint32_t state;
  uint32_t next() {
    state = state * 1664525u + 1013904223u;
    return state;
  }
  int8_t byte() { return static_cast<int8_t>(next() >> 24); }
  int8_t weight() { return static_cast<int8_t>(static_cast<int32_t>((next() >> 8) % 255) - 127); }
};

alignas(16) int8_t g_input[kMaxInput];
alignas(16) int8_t g_weight[kMaxWeight];
alignas(16) int32_t g_bias[kMaxChannels];
alignas(16) int32_t g_multiplier[kMaxChannels];
alignas(16) int32_t g_shift[kMaxChannels];
alignas(16) int8_t g_out[kMaxOutput];
alignas(16) int8_t g_buffer[kMaxBuffer];
alignas(16) int8_t g_place[kMaxInput];  // a pointwise call in place: its output over its input
alignas(16) int32_t g_sums[kMaxChannels];  // MVE's kernel sums for arm_fully_connected_s8

// A case's tensors: `inputs` input bytes, `weights` weights, `channels` output channels'
// bias, multiplier and shift.
void fill(uint32_t seed, int32_t inputs, int32_t weights, int32_t channels) {
  Numbers numbers{seed};
  for (int32_t i = 0; i < inputs; ++i) g_input[i] = numbers.byte();
  for (int32_t i = 0; i < weights; ++i) g_weight[i] = numbers.weight();
  for (int32_t i = 0; i < channels; ++i) {
    g_bias[i] = static_cast<int32_t>(numbers.next() >> 16) - 32768;
    g_multiplier[i] = static_cast<int32_t>(0x40000000u + (numbers.next() >> 2));
    g_shift[i] = static_cast<int32_t>(numbers.next() % 14) - 11;
  }
}

// The bytes of g_out that differ from the case's expected output.
int32_t differing(const int8_t* expected, int32_t count) {
  int32_t bad = 0;
  for (int32_t i = 0; i < count; ++i) bad += g_out[i] != expected[i];
  return bad;
}

// Convolution case `i`: pointwise_conv_s8 or window_conv_s8 (the pointwise one again in place
// where the output pixels are no larger than the input's and, on MVE, its output channels one
// block, outside the bench markers), then arm_convolve_wrapper_s8. Whether any byte differs.
bool run_conv(int32_t i) {
  const ConvCase& c = kConvCases[i];
  const int32_t pixels = c.batch * c.in_h * c.in_w;
  const int32_t weights = c.channels * c.kernel_h * c.kernel_w * c.depth;
  fill(c.seed, pixels * c.depth, weights, c.channels);
  cmsis_nn_conv_params params{};
  params.input_offset = c.input_offset;
  params.output_offset = c.output_offset;
  params.stride = {c.stride_w, c.stride_h};
  params.padding = {c.pad_w, c.pad_h};
  params.dilation = {1, 1};
  params.activation = {c.activation_min, c.activation_max};
  cmsis_nn_per_channel_quant_params quant{g_multiplier, g_shift};
  const cmsis_nn_dims input{c.batch, c.in_h, c.in_w, c.depth};
  const cmsis_nn_dims filter{c.channels, c.kernel_h, c.kernel_w, c.depth};
  const cmsis_nn_dims bias{1, 1, 1, c.channels};
  const cmsis_nn_dims output{c.batch, c.out_h, c.out_w, c.channels};
  const int32_t count = c.batch * c.out_h * c.out_w * c.channels;
  const auto ours_function = c.window ? cortex_m_nn::compute::window_conv_s8
                                      : cortex_m_nn::compute::pointwise_conv_s8;
  const int32_t ours_buffer = c.window
                                  ? cortex_m_nn::compute::window_conv_s8_get_buffer_size(&filter)
                                  : cortex_m_nn::compute::pointwise_conv_s8_get_buffer_size(&input);

  memset(g_out, 0x5a, static_cast<size_t>(count));
  const cmsis_nn_context ours{g_buffer, ours_buffer};
  bench_start();
  const arm_cmsis_nn_status status = ours_function(
      &ours, &params, &quant, &input, g_input, &filter, g_weight, &bias, g_bias, &output, g_out);
  bench_stop();
  int32_t ours_bad = status == ARM_CMSIS_NN_SUCCESS ? differing(c.expected, count) : count;
#if defined(ARM_MATH_MVEI)
  const bool one_block = c.channels <= 64;  // a pixel-quad product's block of output channels
#else
  const bool one_block = true;
#endif
  if (!c.window && c.channels <= c.depth && one_block) {  // again, the output over the input
    memcpy(g_place, g_input, static_cast<size_t>(pixels * c.depth));
    const arm_cmsis_nn_status again = cortex_m_nn::compute::pointwise_conv_s8(
        &ours, &params, &quant, &input, g_place, &filter, g_weight, &bias, g_bias, &output,
        g_place);
    memcpy(g_out, g_place, static_cast<size_t>(count));
    ours_bad += again == ARM_CMSIS_NN_SUCCESS ? differing(c.expected, count) : count;
  }

  memset(g_out, 0x5a, static_cast<size_t>(count));
  const cmsis_nn_context theirs{
      g_buffer, arm_convolve_wrapper_s8_get_buffer_size(&params, &input, &filter, &output)};
  bench_start();
  const arm_cmsis_nn_status wrapper = arm_convolve_wrapper_s8(
      &theirs, &params, &quant, &input, g_input, &filter, g_weight, &bias, g_bias, &output,
      g_out);
  bench_stop();
  const int32_t wrapper_bad = wrapper == ARM_CMSIS_NN_SUCCESS ? differing(c.expected, count)
                                                              : count;
  printf("conv %ld ours %ld wrapper %ld of %ld bytes differ, buffer %ld\n",
         static_cast<long>(i), static_cast<long>(ours_bad), static_cast<long>(wrapper_bad),
         static_cast<long>(count), static_cast<long>(ours.size));
  return ours_bad != 0 || wrapper_bad != 0;
}

// Fully connected case `i`: fully_connected_quads_s8, then arm_fully_connected_s8, per tensor
// with the first channel's multiplier and shift, or their per_channel forms. On MVE both take
// the kernel sums (the bias and the input offset's products) as a program passes them, ours as
// its bias with an input offset of 0; ours then runs again, outside the bench markers, with the
// bias and the offset. Whether any byte differs.
arm_cmsis_nn_status run_quads(const LinearCase& c, const cmsis_nn_fc_params& params,
                              const int32_t* start) {
  const cmsis_nn_per_tensor_quant_params quant{g_multiplier[0], g_shift[0]};
  const cmsis_nn_per_channel_quant_params channels{g_multiplier, g_shift};
  const cmsis_nn_dims input{c.batch, 1, 1, c.depth};
  const cmsis_nn_dims filter{c.depth, 1, 1, c.features};
  const cmsis_nn_dims bias{1, 1, 1, c.features};
  const cmsis_nn_dims output{c.batch, 1, 1, c.features};
  const cmsis_nn_context none{nullptr, 0};
  return c.per_channel ? cortex_m_nn::compute::fully_connected_quads_per_channel_s8(
                             &none, &params, &channels, &input, g_input, &filter, g_weight, &bias,
                             start, &output, g_out)
                       : cortex_m_nn::compute::fully_connected_quads_s8(
                             &none, &params, &quant, &input, g_input, &filter, g_weight, &bias,
                             start, &output, g_out);
}

bool run_linear(int32_t i) {
  const LinearCase& c = kLinearCases[i];
  fill(c.seed, c.batch * c.depth, c.features * c.depth, c.features);
  cmsis_nn_fc_params params{};
  params.input_offset = c.input_offset;
  params.filter_offset = 0;
  params.output_offset = c.output_offset;
  params.activation = {c.activation_min, c.activation_max};
  const cmsis_nn_per_tensor_quant_params quant{g_multiplier[0], g_shift[0]};
  const cmsis_nn_dims input{c.batch, 1, 1, c.depth};
  const cmsis_nn_dims filter{c.depth, 1, 1, c.features};
  const cmsis_nn_dims bias{1, 1, 1, c.features};
  const cmsis_nn_dims output{c.batch, 1, 1, c.features};
  const int32_t count = c.batch * c.features;

  const cmsis_nn_per_channel_quant_params channels{g_multiplier, g_shift};
  cmsis_nn_context theirs{nullptr, 0};
  cmsis_nn_fc_params ours_params = params;
  const int32_t* start = g_bias;
#if defined(ARM_MATH_MVEI)
  arm_vector_sum_s8(g_sums, c.depth, c.features, g_weight, c.input_offset, 0, g_bias);
  theirs = {g_sums, static_cast<int32_t>(c.features * sizeof(int32_t))};
  ours_params.input_offset = 0;
  start = g_sums;
#endif
  memset(g_out, 0x5a, static_cast<size_t>(count));
  bench_start();
  const arm_cmsis_nn_status status = run_quads(c, ours_params, start);
  bench_stop();
  int32_t ours_bad = status == ARM_CMSIS_NN_SUCCESS ? differing(c.expected, count) : count;
#if defined(ARM_MATH_MVEI)
  memset(g_out, 0x5a, static_cast<size_t>(count));
  const arm_cmsis_nn_status again = run_quads(c, params, g_bias);
  ours_bad += again == ARM_CMSIS_NN_SUCCESS ? differing(c.expected, count) : count;
#endif

  memset(g_out, 0x5a, static_cast<size_t>(count));
  bench_start();
  const arm_cmsis_nn_status wrapper =
      c.per_channel ? arm_fully_connected_per_channel_s8(&theirs, &params, &channels, &input,
                                                         g_input, &filter, g_weight, &bias,
                                                         g_bias, &output, g_out)
                    : arm_fully_connected_s8(&theirs, &params, &quant, &input, g_input, &filter,
                                             g_weight, &bias, g_bias, &output, g_out);
  bench_stop();
  const int32_t wrapper_bad = wrapper == ARM_CMSIS_NN_SUCCESS ? differing(c.expected, count)
                                                              : count;
  printf("linear %ld ours %ld wrapper %ld of %ld bytes differ, buffer 0\n", static_cast<long>(i),
         static_cast<long>(ours_bad), static_cast<long>(wrapper_bad), static_cast<long>(count));
  return ours_bad != 0 || wrapper_bad != 0;
}

}  // namespace

int main() {
  int32_t failed = 0;
  for (int32_t i = 0; i < kComputeCount; ++i) {
    const ComputeCase& c = kComputeCases[i];
    fill(c.seed, c.batch * c.in_h * c.in_w * c.channels, 9 * c.channels, c.channels);
    cmsis_nn_dw_conv_params params{};
    params.input_offset = c.input_offset;
    params.output_offset = c.output_offset;
    params.ch_mult = 1;
    params.stride = {c.stride_w, c.stride_h};
    params.padding = {c.pad_w, c.pad_h};
    params.dilation = {1, 1};
    params.activation = {c.activation_min, c.activation_max};
    cmsis_nn_per_channel_quant_params quant{g_multiplier, g_shift};
    const cmsis_nn_dims input{c.batch, c.in_h, c.in_w, c.channels};
    const cmsis_nn_dims filter{1, 3, 3, c.channels};
    const cmsis_nn_dims bias{1, 1, 1, c.channels};
    const cmsis_nn_dims output{c.batch, c.out_h, c.out_w, c.channels};
    const int32_t count = c.batch * c.out_h * c.out_w * c.channels;

    memset(g_out, 0x5a, static_cast<size_t>(count));
    const cmsis_nn_context ours{
        g_buffer, cortex_m_nn::compute::depthwise_conv_lanes_s8_get_buffer_size(
                      &output, c.stride_h, c.stride_w, c.tile)};
    bench_start();
    const arm_cmsis_nn_status status = cortex_m_nn::compute::depthwise_conv_lanes_s8(
        &ours, &params, &quant, &input, g_input, &filter, g_weight, &bias, g_bias, &output, g_out);
    bench_stop();
    const int32_t ours_bad =
        status == ARM_CMSIS_NN_SUCCESS ? differing(c.expected, count) : count;

    memset(g_out, 0x5a, static_cast<size_t>(count));
    const cmsis_nn_context theirs{
        g_buffer, arm_depthwise_conv_wrapper_s8_get_buffer_size(&params, &input, &filter, &output)};
    bench_start();
    const arm_cmsis_nn_status wrapper =
        arm_depthwise_conv_wrapper_s8(&theirs, &params, &quant, &input, g_input, &filter,
                                      g_weight, &bias, g_bias, &output, g_out);
    bench_stop();
    const int32_t wrapper_bad =
        wrapper == ARM_CMSIS_NN_SUCCESS ? differing(c.expected, count) : count;

    printf("case %ld ours %ld wrapper %ld of %ld bytes differ, buffer %ld\n",
           static_cast<long>(i), static_cast<long>(ours_bad), static_cast<long>(wrapper_bad),
           static_cast<long>(count), static_cast<long>(ours.size));
    failed += ours_bad != 0 || wrapper_bad != 0;
  }
  for (int32_t i = 0; i < kConvCount; ++i) {
    failed += run_conv(i);
  }
  for (int32_t i = 0; i < kLinearCount; ++i) {
    failed += run_linear(i);
  }
  return static_cast<int>(failed > 125 ? 125 : failed);
}
