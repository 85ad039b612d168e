// cortex_m_nn::minimum.out → arm_minimum_s8 (see cortex_m_nn/minmax.h).
// Reference: python/cortex_m_nn/ops/minimum.py.
#include "cortex_m_nn/minmax.h"
#include "cortex_m_nn_operators.h"

namespace cortex_m_nn {
namespace native {

void minimum_out(
    CallContext& context,
    const Tensor& input1,
    const Tensor& input2,
    Tensor& out) {
  minmax(context, "minimum", arm_minimum_s8, input1, input2, out);
}

}  // namespace native
}  // namespace cortex_m_nn
