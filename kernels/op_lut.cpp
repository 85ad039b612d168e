// cortex_m_nn::lut.out: int8 → int8 through a 256-entry table computed at compile time
// (table[i] is the output for input i - 128), or one such table per channel (int8[C, 256],
// C the input's innermost dim: PReLU with a slope per channel). CMSIS-NN has no s8 kernel for
// these functions (sigmoid, tanh, hardswish, gelu, ...); this is the table lookup. The int16
// case (lut_int16_out) interpolates between the knots of an int16 table (one every 2^b inputs, b in [4, 7]).
// Reference: python/cortex_m_nn/ops/lut.py.
#include "cortex_m_nn/kernel_support.h"
#include "cortex_m_nn_operators.h"

namespace cortex_m_nn {
namespace native {

namespace {

constexpr ssize_t kTableSize = 256;
// An int16 table has (65536 >> b) + 1 knots, one every 2^b inputs, b in [4, 7]; 0 for a
// table of another length.
int32_t step_bits(const Tensor& table) {
  if (!has_layout(table, ScalarType::Short, 1)) {
    return 0;
  }
  for (int32_t bits = 4; bits <= 7; ++bits) {
    if (table.size(0) == (65536 >> bits) + 1) {
      return bits;
    }
  }
  return 0;
}

void lut_s16(CallContext& context, const Tensor& input, const Tensor& table, Tensor& out) {
  const int32_t bits = step_bits(table);
  CORTEX_M_NN_CHECK(
      context,
      is_type(out, ScalarType::Short) && out.numel() == input.numel() && bits > 0,
      "lut",
      "an int16 input needs an int16 out of the same size and an int16 table of 513, 1025, "
      "2049 or 4097 knots");
  if (!context.computes()) {
    return;
  }
  const int16_t* source = input.const_data_ptr<int16_t>();
  const int16_t* knots = table.const_data_ptr<int16_t>();
  int16_t* destination = out.mutable_data_ptr<int16_t>();
  const ssize_t count = input.numel();
  for (ssize_t i = 0; i < count; ++i) {
    const int32_t u = static_cast<int32_t>(source[i]) + 32768;
    const int32_t index = u >> bits;
    const int32_t fraction = u & ((1 << bits) - 1);
    const int32_t low = knots[index];
    const int32_t step = static_cast<int32_t>(knots[index + 1]) - low;
    // floor division by 2^b of a possibly negative product: an arithmetic shift
    const int32_t delta = (step * fraction + (1 << (bits - 1))) >> bits;
    destination[i] = static_cast<int16_t>(low + delta);
  }
}

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

void lut_int16_out(CallContext& context, const Tensor& input, const Tensor& table, Tensor& out) {
  lut_s16(context, input, table, out);
}

}  // namespace native
}  // namespace cortex_m_nn
