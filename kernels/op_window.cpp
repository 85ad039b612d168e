// cortex_m_nn::window.out: rows [row, row + rows) of an NHWC tensor, sharing its bytes (a
// patch-based stage's strip of a tensor). The planner places out inside input, row rows after
// its start, so nothing moves: while arguments are checked the call fails unless out is
// exactly there; a proven call does nothing. Reference: python/cortex_m_nn/ops/window.py.
#include "cortex_m_nn/kernel_support.h"
#include "cortex_m_nn_operators.h"

namespace cortex_m_nn {
namespace native {

void window_out(CallContext& context, const Tensor& input, int64_t row, int64_t rows,
                Tensor& out) {
  CORTEX_M_NN_CHECK(
      context,
      input.dim() == 4 && out.dim() == 4 && input.scalar_type() == out.scalar_type() &&
          row >= 0 && rows >= 1 && row + rows <= input.size(1) && out.size(0) == input.size(0) &&
          out.size(1) == rows && out.size(2) == input.size(2) && out.size(3) == input.size(3),
      "window",
      "out must be rows %d..%d of the 4-D input (%d rows) with its type",
      (int)row, (int)(row + rows - 1), (int)input.size(1));
  const size_t offset = static_cast<size_t>(row) * static_cast<size_t>(input.nbytes()) /
      static_cast<size_t>(input.size(1));
  CORTEX_M_NN_CHECK(
      context,
      static_cast<const uint8_t*>(out.const_data_ptr()) ==
          static_cast<const uint8_t*>(input.const_data_ptr()) + offset,
      "window",
      "out is not planned inside the input at row %d: compile the program again", (int)row);
}

}  // namespace native
}  // namespace cortex_m_nn
