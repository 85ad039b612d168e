// cortex_m_nn::lut.out: int8 → int8 through a 256-entry table computed at compile time
// (table[i] is the output for input i - 128), or one such table per channel (int8[C, 256],
// C the input's innermost dim: PReLU with a slope per channel). CMSIS-NN has no s8 kernel for
// these functions (sigmoid, tanh, hardswish, gelu, ...); this is the table lookup. Reference:
// python/cortex_m_nn/ops/lut.py.
#include "cortex_m_nn/kernel_support.h"
#include "cortex_m_nn_operators.h"

namespace cortex_m_nn {
namespace native {

namespace {

constexpr ssize_t kTableSize = 256;

// Tables in `table`: 1 for int8[256], C for int8[C, 256] (0 when the shape is neither).
ssize_t table_count(const Tensor& table) {
  if (has_layout(table, ScalarType::Char, 1)) {
    return table.size(0) == kTableSize ? 1 : 0;
  }
  if (has_layout(table, ScalarType::Char, 2) && table.size(1) == kTableSize) {
    return table.size(0);
  }
  return 0;
}

}  // namespace

void lut_out(CallContext& context, const Tensor& input, const Tensor& table, Tensor& out) {
  const ssize_t channels = table_count(table);
  const bool innermost = channels == 1 ||
      (channels > 1 && input.dim() > 0 && input.size(input.dim() - 1) == channels);
  CORTEX_M_NN_CHECK(
      context,
      is_type(input, ScalarType::Char) && is_type(out, ScalarType::Char) &&
          out.numel() == input.numel() && channels > 0 && innermost,
      "lut",
      "input and out must be int8 of the same size and table int8[256] or int8[C, 256] with C "
      "the input's innermost dim");
  if (!context.computes()) {
    return;
  }
  const int8_t* source = input.const_data_ptr<int8_t>();
  const int8_t* entries = table.const_data_ptr<int8_t>();
  int8_t* destination = out.mutable_data_ptr<int8_t>();
  const ssize_t count = input.numel();
  if (channels == 1) {
    for (ssize_t i = 0; i < count; ++i) {
      destination[i] = entries[static_cast<uint8_t>(source[i]) ^ 0x80u];
    }
    return;
  }
  for (ssize_t i = 0; i < count; i += channels) {
    const int8_t* row = entries;
    for (ssize_t c = 0; c < channels; ++c, row += kTableSize) {
      destination[i + c] = row[static_cast<uint8_t>(source[i + c]) ^ 0x80u];
    }
  }
}

}  // namespace native
}  // namespace cortex_m_nn
