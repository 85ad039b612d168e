// cortex_m_nn::masked_softmax.out: arm_softmax_s8 over each row's kept entries (attention under
// a causal or boolean mask); a masked entry is -128 (probability 0 at output scale 1/256, zero
// point -128). keep is an int8 [R, N] constant (1 kept, 0 masked), row i of the input takes
// mask row i mod R. Per row: the kept entries are gathered into the scratch (N bytes), their
// softmax written to the row's first places, then spread back to theirs from the last (each
// moves right or stays, so none is overwritten before it moves), the masked places set to -128.
// Reference: python/cortex_m_nn/ops/masked_softmax.py.
#include "cortex_m_nn/kernel_checks.h"
#include "cortex_m_nn_operators.h"

namespace cortex_m_nn {
namespace native {
namespace {

constexpr int8_t kMasked = -128;
// As the softmax's: longer rows can reach sums where CMSIS-NN's final shift is undefined.
constexpr int64_t kMaxRow = 511;

// Every mask row keeps at least one entry; entries are 0 or 1.
bool valid_keep(const Tensor& keep, int32_t row, int64_t rows) {
  if (!has_layout(keep, ScalarType::Char, 2) || keep.size(1) != row || keep.size(0) < 1 ||
      rows % keep.size(0) != 0) {
    return false;
  }
  const int8_t* k = keep.const_data_ptr<int8_t>();
  for (int64_t r = 0; r < keep.size(0); ++r) {
    int32_t kept = 0;
    for (int32_t j = 0; j < row; ++j) {
      const int8_t v = k[r * row + j];
      if (v != 0 && v != 1) {
        return false;
      }
      kept += v;
    }
    if (kept == 0) {
      return false;
    }
  }
  return true;
}

// One row: gather, softmax, spread back, mask.
void masked_row(
    const int8_t* in, const int8_t* keep, int32_t row, int32_t multiplier, int32_t shift,
    int32_t diff_min, int8_t* gathered, int8_t* out) {
  int32_t count = 0;
  for (int32_t j = 0; j < row; ++j) {
    if (keep[j] != 0) {
      gathered[count++] = in[j];
    }
  }
  arm_softmax_s8(gathered, 1, count, multiplier, shift, diff_min, out);
  for (int32_t j = row - 1; j >= 0; --j) {
    if (keep[j] != 0) {
      out[j] = out[--count];
    } else {
      out[j] = kMasked;
    }
  }
}

}  // namespace

void masked_softmax_out(
    CallContext& context,
    const Tensor& input,
    const Tensor& keep,
    int64_t multiplier,
    int64_t shift,
    int64_t diff_min,
    int64_t scratch_bytes,
    Tensor& out,
    Tensor& scratch) {
  CORTEX_M_NN_CHECK(
      context,
      is_type(input, ScalarType::Char) && is_type(out, ScalarType::Char) && input.dim() >= 1 &&
          out.numel() == input.numel(),
      "masked_softmax", "input and out must be int8 tensors of the same size");
  const int32_t row = input.size(input.dim() - 1);
  const int64_t rows = row > 0 ? input.numel() / row : 0;
  CORTEX_M_NN_CHECK(
      context,
      row >= 1 && row <= kMaxRow && valid_keep(keep, row, rows) && fits_int32(multiplier) &&
          shift >= 0 && shift <= 31 && fits_int32(diff_min) && scratch_bytes == row &&
          check_scratch_type(context, "masked_softmax", scratch) &&
          scratch.nbytes() >= static_cast<size_t>(scratch_bytes),
      "masked_softmax",
      "rows of 1..%d, a 0/1 int8 mask [R, row] tiling the rows and keeping an entry in each, "
      "softmax parameters in range, a scratch of one row",
      (int)kMaxRow);
  if (!context.computes()) {  // no prepared form: the boxed entry checked the plan has none
    return;
  }
  const int8_t* in = input.const_data_ptr<int8_t>();
  const int8_t* mask = keep.const_data_ptr<int8_t>();
  int8_t* y = out.mutable_data_ptr<int8_t>();
  int8_t* gathered = scratch.mutable_data_ptr<int8_t>();
  const int64_t mask_rows = keep.size(0);
  for (int64_t r = 0; r < rows; ++r) {
    masked_row(
        in + r * row, mask + (r % mask_rows) * row, row, static_cast<int32_t>(multiplier),
        static_cast<int32_t>(shift), static_cast<int32_t>(diff_min), gathered, y + r * row);
  }
}

}  // namespace native
}  // namespace cortex_m_nn
