// cortex_m_nn::maximum.out → arm_maximum_s8 (see cortex_m_nn/minmax.h).
// Reference: python/cortex_m_nn/ops/maximum.py.
#include "cortex_m_nn/minmax.h"
#include "cortex_m_nn_operators.h"

namespace cortex_m_nn {
namespace native {

void maximum_out(
    CallContext& context,
    const Tensor& input1,
    const Tensor& input2,
    Tensor& out) {
  minmax(context, "maximum", arm_maximum_s8, input1, input2, out);
}

}  // namespace native
}  // namespace cortex_m_nn
