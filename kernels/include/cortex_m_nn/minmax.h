// The element-wise minimum and maximum kernels: both call a CMSIS-NN function of one shape,
// which broadcasts itself (inputs and output share one quantization).
#pragma once

#include "cortex_m_nn/broadcast.h"
#include "cortex_m_nn/kernel_support.h"

extern "C" {
#include "arm_nnfunctions.h"
}

namespace cortex_m_nn {
namespace native {

using MinMaxFunction = arm_cmsis_nn_status (*)(
    const cmsis_nn_context*,
    const int8_t*,
    const cmsis_nn_dims*,
    const int8_t*,
    const cmsis_nn_dims*,
    int8_t*,
    const cmsis_nn_dims*);

inline void minmax(
    CallContext& context,
    const char* op,
    MinMaxFunction function,
    const Tensor& input1,
    const Tensor& input2,
    Tensor& out) {
  if (context.checks() && !check_broadcast(context, op, input1, input2, out)) {
    return;
  }
  const cmsis_nn_dims dims1 = dims4(shape4(input1));
  const cmsis_nn_dims dims2 = dims4(shape4(input2));
  const cmsis_nn_dims output_dims = dims4(shape4(out));
  // CMSIS-NN's pointer walk is wrong for one pattern (extent 1 in w and c but not h, against
  // w > 1); collapsed shapes from the lowering never have it, so refuse it here.
  for (const cmsis_nn_dims* d : {&dims1, &dims2}) {
    if (context.checks() && d->h > 1 && d->w == 1 && d->c == 1 && output_dims.w > 1) {
      ET_LOG(
          Error,
          "cortex_m_nn::%s: broadcast pattern [.., %d, 1, 1] against width %d is not "
          "supported by CMSIS-NN",
          op, (int)d->h, (int)output_dims.w);
      context.fail(Error::InvalidArgument);
      return;
    }
  }
  if (!context.computes()) {
    return;
  }
  const cmsis_nn_context no_buffer{nullptr, 0};
  check_status(
      context,
      op,
      function(
          &no_buffer,
          input1.const_data_ptr<int8_t>(),
          &dims1,
          input2.const_data_ptr<int8_t>(),
          &dims2,
          out.mutable_data_ptr<int8_t>(),
          &output_dims));
}

}  // namespace native
}  // namespace cortex_m_nn
