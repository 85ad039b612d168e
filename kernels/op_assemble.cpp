// cortex_m_nn::assemble.out: the strips of an NHWC tensor, top to bottom, as the tensor they
// are (a patch-based stage's output). Each strip was computed into its rows of out (the
// planner places strip i after the rows of the strips before it), so nothing moves: while
// arguments are checked the call fails unless every strip is exactly there; a proven call does
// nothing. Reference: python/cortex_m_nn/ops/assemble.py.
#include "cortex_m_nn/kernel_support.h"
#include "cortex_m_nn_operators.h"

namespace cortex_m_nn {
namespace native {

void assemble_out(CallContext& context, executorch::aten::ArrayRef<Tensor> parts, Tensor& out) {
  CORTEX_M_NN_CHECK(context, out.dim() == 4 && parts.size() >= 1, "assemble",
                    "out must be 4-D, with at least one strip");
  const uint8_t* const start = static_cast<const uint8_t*>(out.const_data_ptr());
  size_t offset = 0;
  int64_t rows = 0;
  for (const Tensor& part : parts) {
    CORTEX_M_NN_CHECK(
        context,
        part.dim() == 4 && part.scalar_type() == out.scalar_type() &&
            part.size(0) == out.size(0) && part.size(2) == out.size(2) &&
            part.size(3) == out.size(3),
        "assemble", "a strip must be rows of out (4-D, out's type and other dims)");
    CORTEX_M_NN_CHECK(
        context, static_cast<const uint8_t*>(part.const_data_ptr()) == start + offset,
        "assemble", "the strip from row %d is not planned inside out: compile the program again",
        (int)rows);
    offset += part.nbytes();
    rows += part.size(1);
  }
  CORTEX_M_NN_CHECK(context, rows == out.size(1), "assemble",
                    "the strips have %d rows, out %d", (int)rows, (int)out.size(1));
}

}  // namespace native
}  // namespace cortex_m_nn
