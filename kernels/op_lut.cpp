// cortex_m_nn::lut.out: int8 → int8 through a 256-entry table computed at compile time
// (table[i] is the output for input i - 128). CMSIS-NN has no s8 kernel for these functions
// (sigmoid, tanh, hardswish, gelu, ...); this is the table lookup. Reference:
// python/cortex_m_nn/ops/lut.py.
#include "cortex_m_nn/kernel_support.h"
#include "cortex_m_nn_operators.h"

namespace cortex_m_nn {
namespace native {

void lut_out(KernelRuntimeContext& context, const Tensor& input, const Tensor& table, Tensor& out) {
  CORTEX_M_NN_CHECK(
      context,
      is_type(input, ScalarType::Char) && is_type(out, ScalarType::Char) &&
          out.numel() == input.numel() && has_layout(table, ScalarType::Char, 1) &&
          table.numel() == 256,
      "lut",
      "input and out must be int8 of the same size and table int8[256]");
  const int8_t* source = input.const_data_ptr<int8_t>();
  const int8_t* entries = table.const_data_ptr<int8_t>();
  int8_t* destination = out.mutable_data_ptr<int8_t>();
  const ssize_t count = input.numel();
  for (ssize_t i = 0; i < count; ++i) {
    destination[i] = entries[static_cast<uint8_t>(source[i]) ^ 0x80u];
  }
}

}  // namespace native
}  // namespace cortex_m_nn
