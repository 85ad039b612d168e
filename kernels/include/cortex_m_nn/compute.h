// Our own compute functions: where a CMSIS-NN function leaves instructions on the table for a
// layer shape, one of these computes the same integers (CMSIS-NN's arithmetic, its
// requantization helpers, either rounding) faster. Each takes CMSIS-NN's arguments for the
// function it stands in for, so a kernel case calls it as it would call CMSIS-NN's, and the
// Python references stay the oracle. One function per file in kernels/compute/; the compiler
// chooses them per call through the call's `path` (python/cortex_m_nn/core/cmsis_nn.py).
#pragma once

#include "arm_nn_types.h"

namespace cortex_m_nn {
namespace compute {

// A 3x3 depthwise convolution of multiplier 1, no dilation, stride 1 or 2 across (any down),
// any padding and batch, int8, per-channel requantization, a channel count that is a multiple
// of 4 and an input at a 4-byte boundary (ARM_CMSIS_NN_ARG_ERROR otherwise). On MVE four
// channels sit in vector lanes, and the buffer (4-byte aligned) holds the blocks' weights and
// the input rows a tile of output rows reads, four channels at a time, gathered so that every
// load has an immediate address (where arm_depthwise_conv_s8_opt copies every window):
// the tallest tile the buffer holds (depthwise_conv_lanes_s8_get_buffer_size); with less than
// one row's tile (tile 0: no buffer), each group of four output pixels gathers its window into
// 160 bytes of stack. Writes the output a tile (or a row) at a time, each after reading the
// input rows of its windows. Other ISAs (DSP, and the host tests' build): per block of four
// channels the tile's rows are gathered as four int16 planes, one per channel, so that one SMLAD
// takes two taps; with no buffer each output row of each channel gathers its rows into 240 bytes
// of stack (depthwise_conv_lanes_planar.h).
int32_t depthwise_conv_lanes_s8_get_buffer_size(const cmsis_nn_dims* output_dims,
                                                int32_t stride_h, int32_t stride_w,
                                                int32_t tile);

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
    int8_t* output);

// A 1x1 convolution, stride 1, no padding or dilation, any batch, int8, per-channel
// requantization (ARM_CMSIS_NN_ARG_ERROR otherwise): arm_convolve_1x1_s8_fast's integers. Off
// MVE, per pair of pixels their inputs plus the input offset are widened to int16, on the stack
// up to 64 input channels (256 bytes), else into the buffer (4-byte aligned,
// pointwise_conv_s8_get_buffer_size: four bytes per input channel), then each pair of output
// channels takes four SMLAD per four inputs; pixels are written in order, a pair at a time,
// after reading their inputs (the output may start where the input does). On MVE, per quad of
// pixels their inputs are gathered 16 of each pixel after the other, on the stack up to 64 input
// channels (256 bytes), else into the buffer (64 bytes per 16 input channels), then each pair of
// output channels takes two weight loads, four input loads and eight VMLADAVA per 16 inputs
// (kernels/compute/pixel_quads.h); 64 output channels at a time, their requantization on the
// stack (768 bytes), the quads written in order after reading their inputs (with up to 64
// output channels the output may start where the input does).
int32_t pointwise_conv_s8_get_buffer_size(const cmsis_nn_dims* input_dims);

arm_cmsis_nn_status pointwise_conv_s8(
    const cmsis_nn_context* ctx,
    const cmsis_nn_conv_params* conv_params,
    const cmsis_nn_per_channel_quant_params* quant,
    const cmsis_nn_dims* input_dims,
    const int8_t* input,
    const cmsis_nn_dims* filter_dims,
    const int8_t* filter,
    const cmsis_nn_dims* bias_dims,
    const int32_t* bias,
    const cmsis_nn_dims* output_dims,
    int8_t* output);

// An int8 convolution of any window, stride, padding and dilation, no groups, any batch,
// per-channel requantization, input channels a multiple of 4 off MVE (ARM_CMSIS_NN_ARG_ERROR
// otherwise): arm_convolve_s8's integers. Off MVE, per pair of output pixels their windows plus
// the input offset are widened to int16 into the buffer (4-byte aligned,
// window_conv_s8_get_buffer_size: four bytes per weight of an output channel, what
// arm_convolve_s8 takes off MVE), then as pointwise_conv_s8. On MVE, per quad of output pixels
// their windows are gathered into the buffer (64 bytes per 16 weights of an output channel, at
// most 32 bytes more than arm_convolve_s8's MVE buffer), a tap outside the input as the input
// offset's negation, then as pointwise_conv_s8. Pixels are written in order, a pair (quad) at a
// time, after reading their windows.
int32_t window_conv_s8_get_buffer_size(const cmsis_nn_dims* filter_dims);

arm_cmsis_nn_status window_conv_s8(
    const cmsis_nn_context* ctx,
    const cmsis_nn_conv_params* conv_params,
    const cmsis_nn_per_channel_quant_params* quant,
    const cmsis_nn_dims* input_dims,
    const int8_t* input,
    const cmsis_nn_dims* filter_dims,
    const int8_t* filter,
    const cmsis_nn_dims* bias_dims,
    const int32_t* bias,
    const cmsis_nn_dims* output_dims,
    int8_t* output);

// An int8 fully connected layer, per-tensor requantization, a filter offset of 0
// (ARM_CMSIS_NN_ARG_ERROR otherwise): arm_fully_connected_s8's integers (the bias, or the kernel
// sums with an input offset of 0). Four output features at a time share each input word (one
// load, two SXTAB16), each feature then one weight load, two SXTB16 and two SMLAD per four
// inputs; on MVE each 16-input load, each feature then one weight load and one VMLADAVA. No
// buffer.
arm_cmsis_nn_status fully_connected_quads_s8(
    const cmsis_nn_context* ctx,
    const cmsis_nn_fc_params* fc_params,
    const cmsis_nn_per_tensor_quant_params* quant,
    const cmsis_nn_dims* input_dims,
    const int8_t* input,
    const cmsis_nn_dims* filter_dims,
    const int8_t* weights,
    const cmsis_nn_dims* bias_dims,
    const int32_t* bias,
    const cmsis_nn_dims* output_dims,
    int8_t* output);

// The same, requantized per output feature: arm_fully_connected_per_channel_s8's integers.
arm_cmsis_nn_status fully_connected_quads_per_channel_s8(
    const cmsis_nn_context* ctx,
    const cmsis_nn_fc_params* fc_params,
    const cmsis_nn_per_channel_quant_params* quant,
    const cmsis_nn_dims* input_dims,
    const int8_t* input,
    const cmsis_nn_dims* filter_dims,
    const int8_t* weights,
    const cmsis_nn_dims* bias_dims,
    const int32_t* bias,
    const cmsis_nn_dims* output_dims,
    int8_t* output);

}  // namespace compute
}  // namespace cortex_m_nn
