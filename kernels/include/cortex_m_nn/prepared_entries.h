/* The entries of the prepared-call table (cortex_m_nn/prepared.h), one struct per operator
 * with a prepared form, of CMSIS-NN's own types: what its kernel hands CMSIS-NN besides the
 * tensors' data. python/cortex_m_nn/embed/prepared.py writes them with the same field names. */
#ifndef CORTEX_M_NN_PREPARED_ENTRIES_H
#define CORTEX_M_NN_PREPARED_ENTRIES_H

#include <stdint.h>

#include "arm_nn_types.h"
#include "cortex_m_nn/prepared.h"

#ifdef __cplusplus
extern "C" {
#endif

/* conv2d → arm_convolve_wrapper_s8, or arm_convolve_s8 itself when `direct` (op_conv2d.cpp). */
typedef struct {
  cmsis_nn_conv_params params;
  cmsis_nn_dims input;
  cmsis_nn_dims filter;
  cmsis_nn_dims bias;
  cmsis_nn_dims output;
  int32_t direct;
} cortex_m_nn_conv2d_prepared;

/* depthwise_conv2d → arm_depthwise_conv_wrapper_s8. */
typedef struct {
  cmsis_nn_dw_conv_params params;
  cmsis_nn_dims input;
  cmsis_nn_dims filter;
  cmsis_nn_dims bias;
  cmsis_nn_dims output;
} cortex_m_nn_depthwise_conv2d_prepared;

/* linear → arm_fully_connected_s8, or arm_fully_connected_per_channel_s8 when `per_channel`
 * (the call's multipliers and shifts tensors; `quant` is then {0, 0}). */
typedef struct {
  cmsis_nn_fc_params params;
  cmsis_nn_per_tensor_quant_params quant;
  cmsis_nn_dims input;
  cmsis_nn_dims filter;
  cmsis_nn_dims bias;
  cmsis_nn_dims output;
  int32_t per_channel;
} cortex_m_nn_linear_prepared;

/* avg_pool2d → arm_avgpool_s8. */
typedef struct {
  cmsis_nn_pool_params params;
  cmsis_nn_dims input;
  cmsis_nn_dims filter;
  cmsis_nn_dims output;
} cortex_m_nn_avg_pool2d_prepared;

/* add → arm_elementwise_add_s8 over all `size` elements at once: only a call whose inputs have
 * out's shape has an entry (a broadcasting call runs unprepared, row by row). */
typedef struct {
  int32_t input1_offset;
  int32_t input1_multiplier;
  int32_t input1_shift;
  int32_t input2_offset;
  int32_t input2_multiplier;
  int32_t input2_shift;
  int32_t left_shift;
  int32_t output_offset;
  int32_t output_multiplier;
  int32_t output_shift;
  int32_t activation_min;
  int32_t activation_max;
  int32_t size;
} cortex_m_nn_add_prepared;

/* softmax → arm_softmax_s8 over `rows` rows of `row` elements. */
typedef struct {
  int32_t rows;
  int32_t row;
  int32_t multiplier;
  int32_t shift;
  int32_t diff_min;
} cortex_m_nn_softmax_prepared;

#ifdef __cplusplus
}
#endif

#endif /* CORTEX_M_NN_PREPARED_ENTRIES_H */
