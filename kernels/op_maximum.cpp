// cortex_m_nn::maximum.out → arm_maximum_s8, which broadcasts itself (inputs and output share
// one quantization, so no requantization). Reference: python/cortex_m_nn/ops/maximum.py.
#include "cortex_m_nn/broadcast.h"
#include "cortex_m_nn/kernel_support.h"
#include "cortex_m_nn_operators.h"

extern "C" {
#include "arm_nnfunctions.h"
}

namespace cortex_m_nn {
namespace native {

void maximum_out(
    KernelRuntimeContext& context,
    const Tensor& input1,
    const Tensor& input2,
    Tensor& out) {
  if (!check_broadcast(context, "maximum", input1, input2, out)) {
    return;
  }
  const cmsis_nn_dims dims1 = dims4(shape4(input1));
  const cmsis_nn_dims dims2 = dims4(shape4(input2));
  const cmsis_nn_dims output_dims = dims4(shape4(out));
  // CMSIS-NN's pointer walk is wrong for one pattern (extent 1 in w and c but not h, against
  // w > 1); collapsed shapes from the lowering never have it, so refuse it here.
  for (const cmsis_nn_dims* d : {&dims1, &dims2}) {
    CORTEX_M_NN_CHECK(
        context,
        !(d->h > 1 && d->w == 1 && d->c == 1 && output_dims.w > 1),
        "maximum",
        "broadcast pattern [.., %d, 1, 1] against width %d is not supported by CMSIS-NN",
        (int)d->h, (int)output_dims.w);
  }
  const cmsis_nn_context no_buffer{nullptr, 0};
  check_status(
      context,
      "maximum",
      arm_maximum_s8(
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
