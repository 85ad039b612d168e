// cortex_m_nn::resize.out: nearest and bilinear upsampling of an int8 NHWC tensor. CMSIS-NN has
// no resize kernel; this is ours. Source rows/columns (and bilinear weights, Q11) arrive as
// int16 tables computed at compile time. Reference and arithmetic:
// python/cortex_m_nn/ops/resize.py.
#include <cstring>

#include "cortex_m_nn/kernel_support.h"
#include "cortex_m_nn_operators.h"

namespace cortex_m_nn {
namespace native {
namespace {

constexpr int64_t kNearest = 0;
constexpr int64_t kBilinear = 1;
constexpr int32_t kFractionBits = 11;
constexpr int32_t kOne = 1 << kFractionBits;
constexpr int32_t kHalf = 1 << (2 * kFractionBits - 1);
static_assert((-3 >> 1) == -2, "the rounding relies on an arithmetic right shift");

// Entries per table row: a source index (nearest) or (i0, i1, weight of i1) (bilinear).
ssize_t entries(int64_t mode) {
  return mode == kNearest ? 1 : 3;
}

// A table of `count` rows of the mode's shape whose indices lie in [0, size) and whose
// weights lie in [0, kOne].
bool valid_table(const Tensor& table, int64_t mode, int64_t count, int64_t size) {
  const ssize_t width = entries(mode);
  const bool shaped = mode == kNearest
      ? has_layout(table, ScalarType::Short, 1)
      : has_layout(table, ScalarType::Short, 2) && table.size(1) == 3;
  if (!shaped || table.size(0) != count) {
    return false;
  }
  const int16_t* t = table.const_data_ptr<int16_t>();
  for (ssize_t i = 0; i < count; ++i) {
    const int16_t* row = t + i * width;
    for (ssize_t k = 0; k < (width == 1 ? 1 : 2); ++k) {
      if (row[k] < 0 || row[k] >= size) {
        return false;
      }
    }
    if (width == 3 && (row[2] < 0 || row[2] > kOne)) {
      return false;
    }
  }
  return true;
}

struct Shape {
  int32_t batches, height, width, channels, out_h, out_w;
};

// out[n, oy, ox, :] = in[n, rows[oy], columns[ox], :]; a row repeating the previous source row
// is one copy of the output row before it.
void nearest(
    const int8_t* in, const int16_t* rows, const int16_t* columns, const Shape& s, int8_t* out) {
  const size_t channels = static_cast<size_t>(s.channels);
  const size_t out_row = static_cast<size_t>(s.out_w) * channels;
  for (int32_t n = 0; n < s.batches; ++n) {
    const int8_t* image = in + static_cast<size_t>(n) * s.height * s.width * channels;
    for (int32_t oy = 0; oy < s.out_h; ++oy) {
      int8_t* destination = out + (static_cast<size_t>(n) * s.out_h + oy) * out_row;
      if (oy > 0 && rows[oy] == rows[oy - 1]) {
        std::memcpy(destination, destination - out_row, out_row);
        continue;
      }
      const int8_t* source = image + static_cast<size_t>(rows[oy]) * s.width * channels;
      for (int32_t ox = 0; ox < s.out_w; ++ox) {
        std::memcpy(destination + ox * channels, source + columns[ox] * channels, channels);
      }
    }
  }
}

// One output row of the bilinear case from source rows `upper` and `lower` (weight `wy` of the
// lower one), in int32: |intermediates| < 2^31 (see the reference's docstring).
void bilinear_row(
    const int8_t* upper,
    const int8_t* lower,
    int32_t wy,
    const int16_t* columns,
    const Shape& s,
    int8_t* out) {
  const int32_t channels = s.channels;
  for (int32_t ox = 0; ox < s.out_w; ++ox, out += channels) {
    const int16_t* column = columns + 3 * ox;
    const int32_t left = column[0] * channels, right = column[1] * channels, wx = column[2];
    for (int32_t c = 0; c < channels; ++c) {
      const int32_t a = upper[left + c], b = upper[right + c];
      const int32_t d = lower[left + c], e = lower[right + c];
      const int32_t top = a * kOne + (b - a) * wx;
      const int32_t bottom = d * kOne + (e - d) * wx;
      const int32_t acc = top * kOne + (bottom - top) * wy;
      out[c] = static_cast<int8_t>((acc + kHalf) >> (2 * kFractionBits));
    }
  }
}

void bilinear(
    const int8_t* in, const int16_t* rows, const int16_t* columns, const Shape& s, int8_t* out) {
  const size_t in_row = static_cast<size_t>(s.width) * s.channels;
  const size_t out_row = static_cast<size_t>(s.out_w) * s.channels;
  for (int32_t n = 0; n < s.batches; ++n) {
    const int8_t* image = in + static_cast<size_t>(n) * s.height * in_row;
    for (int32_t oy = 0; oy < s.out_h; ++oy) {
      const int16_t* row = rows + 3 * oy;
      int8_t* destination = out + (static_cast<size_t>(n) * s.out_h + oy) * out_row;
      const int8_t* upper = image + row[0] * in_row;
      bilinear_row(upper, image + row[1] * in_row, row[2], columns, s, destination);
    }
  }
}

}  // namespace

void resize_out(
    CallContext& context,
    const Tensor& input,
    const Tensor& rows,
    const Tensor& columns,
    int64_t mode,
    Tensor& out) {
  CORTEX_M_NN_CHECK(
      context,
      has_layout(input, ScalarType::Char, 4) && has_layout(out, ScalarType::Char, 4) &&
          (mode == kNearest || mode == kBilinear) && out.size(0) == input.size(0) &&
          out.size(3) == input.size(3),
      "resize",
      "input and out must be int8 NHWC of one batch and channel count, mode 0 or 1 (got %d)",
      static_cast<int>(mode));
  CORTEX_M_NN_CHECK(
      context,
      valid_table(rows, mode, out.size(1), input.size(1)) &&
          valid_table(columns, mode, out.size(2), input.size(2)),
      "resize",
      "rows/columns must be int16 tables of the output's height/width with indices inside the "
      "input and weights in 0..%d",
      static_cast<int>(kOne));
  if (!context.computes()) {
    return;
  }
  const Shape shape{
      static_cast<int32_t>(input.size(0)), static_cast<int32_t>(input.size(1)),
      static_cast<int32_t>(input.size(2)), static_cast<int32_t>(input.size(3)),
      static_cast<int32_t>(out.size(1)),   static_cast<int32_t>(out.size(2))};
  const int8_t* source = input.const_data_ptr<int8_t>();
  const int16_t* row_table = rows.const_data_ptr<int16_t>();
  const int16_t* column_table = columns.const_data_ptr<int16_t>();
  int8_t* destination = out.mutable_data_ptr<int8_t>();
  if (mode == kNearest) {
    nearest(source, row_table, column_table, shape, destination);
  } else {
    bilinear(source, row_table, column_table, shape, destination);
  }
}

}  // namespace native
}  // namespace cortex_m_nn
