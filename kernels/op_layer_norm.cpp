// cortex_m_nn::layer_norm.out: int8 layer norm and group norm in integer arithmetic. CMSIS-NN
// has no normalization kernel; the arithmetic is ours, written down (with its error bound) in
// the reference, python/cortex_m_nn/ops/layer_norm.py, which this file matches bit for bit.
// The input is viewed as [outer, spatial, channels]; each (outer, group of channels/groups
// channels) is normalized over its spatial * channels/groups elements.
#include "cortex_m_nn/kernel_checks.h"
#include "cortex_m_nn_operators.h"

namespace cortex_m_nn {
namespace native {
namespace {

constexpr int64_t kMaxGroup = int64_t{1} << 16;
constexpr int kEpsFractionBits = 14;
constexpr int64_t kMaxShift = 52;
constexpr int64_t kMaxBias = int64_t{1} << 61;
constexpr int64_t kMaxEpsilon = int64_t{1} << 61;

// What every group of one call shares.
struct Norm {
  int32_t spatial = 1;
  int32_t channels = 1;
  int32_t width = 1;  // channels per group
  int64_t epsilon = 0;
  const int32_t* multipliers = nullptr;
  const int32_t* shifts = nullptr;
  const int64_t* biases = nullptr;
  int32_t activation_min = -128;
  int32_t activation_max = 127;
};

// One group: its sum, and 1/sqrt(variance) as reciprocal * 2^(-shift) in Q16 per unit of d.
struct GroupScale {
  int32_t sum;
  int64_t reciprocal;
  int shift;
};

// floor(sqrt(value)), digit by digit (exact).
uint64_t isqrt(uint64_t value) {
  uint64_t root = 0;
  uint64_t bit = uint64_t{1} << 62;
  while (bit > value) {
    bit >>= 2;
  }
  while (bit != 0) {
    if (value >= root + bit) {
      value -= root + bit;
      root = (root >> 1) + bit;
    } else {
      root >>= 1;
    }
    bit >>= 2;
  }
  return root;
}

// int32 sum and sum of squares of the group at `x`, then the exact inverse square root:
// D = (n * sumsq - sum^2) * 2^14 + epsilon, k = (62 - bitlength(D)) / 2,
// reciprocal = floor(2^60 / isqrt(D * 4^k)), shift = 37 - k (D = 0: reciprocal 0).
GroupScale group_scale(const int8_t* x, const Norm& norm) {
  int32_t sum = 0;
  int32_t squares = 0;
  for (int32_t s = 0; s < norm.spatial; ++s) {
    const int8_t* row = x + static_cast<ssize_t>(s) * norm.channels;
    for (int32_t c = 0; c < norm.width; ++c) {
      const int32_t v = row[c];
      sum += v;
      squares += v * v;
    }
  }
  const int64_t n = static_cast<int64_t>(norm.spatial) * norm.width;
  const int64_t variance = n * squares - static_cast<int64_t>(sum) * sum;
  const uint64_t d =
      (static_cast<uint64_t>(variance) << kEpsFractionBits) + static_cast<uint64_t>(norm.epsilon);
  if (d == 0) {
    return GroupScale{sum, 0, 37};
  }
  const int k = (62 - (64 - __builtin_clzll(d))) / 2;
  const uint64_t root = isqrt(d << (2 * k));
  return GroupScale{sum, static_cast<int64_t>((uint64_t{1} << 60) / root), 37 - k};
}

// Normalize the group at `x` (its first channel is `first`) into `y`.
void normalize(const int8_t* x, int8_t* y, int32_t first, const Norm& norm) {
  const GroupScale scale = group_scale(x, norm);
  const int64_t n = static_cast<int64_t>(norm.spatial) * norm.width;
  const int64_t half = int64_t{1} << (scale.shift - 1);
  for (int32_t s = 0; s < norm.spatial; ++s) {
    const ssize_t row = static_cast<ssize_t>(s) * norm.channels;
    for (int32_t c = 0; c < norm.width; ++c) {
      const int32_t channel = first + c;
      const int64_t d = n * x[row + c] - scale.sum;
      const int64_t normalized = (d * scale.reciprocal + half) >> scale.shift;
      const int32_t t = norm.shifts[channel];
      const int64_t acc = normalized * norm.multipliers[channel] + norm.biases[channel] +
          (int64_t{1} << (t - 1));
      int64_t value = acc >> t;
      value = value < norm.activation_min ? norm.activation_min : value;
      value = value > norm.activation_max ? norm.activation_max : value;
      y[row + c] = static_cast<int8_t>(value);
    }
  }
}

// Per-channel parameters in the ranges the arithmetic is exact for.
bool valid_channels(const Norm& norm) {
  for (int32_t c = 0; c < norm.channels; ++c) {
    const int64_t bias = norm.biases[c];
    if (norm.shifts[c] < 1 || norm.shifts[c] > kMaxShift || bias > kMaxBias ||
        bias < -kMaxBias) {
      return false;
    }
  }
  return true;
}

}  // namespace

void layer_norm_out(
    CallContext& context,
    const Tensor& input,
    const Tensor& multipliers,
    const Tensor& shifts,
    const Tensor& biases,
    int64_t spatial,
    int64_t groups,
    int64_t epsilon,
    int64_t activation_min,
    int64_t activation_max,
    Tensor& out) {
  const ssize_t channels = multipliers.numel();
  CORTEX_M_NN_CHECK(
      context,
      is_type(input, ScalarType::Char) && is_type(out, ScalarType::Char) &&
          out.numel() == input.numel() && has_layout(multipliers, ScalarType::Int, 1) &&
          has_layout(shifts, ScalarType::Int, 1) && has_layout(biases, ScalarType::Long, 1) &&
          shifts.numel() == channels && biases.numel() == channels && channels >= 1,
      "layer_norm",
      "input and out must be int8 of one size; multipliers, shifts int32 and biases int64 [C]");
  CORTEX_M_NN_CHECK(
      context,
      spatial >= 1 && groups >= 1 && channels % groups == 0 &&
          input.numel() % (spatial * channels) == 0 &&
          spatial * (channels / groups) <= kMaxGroup && epsilon >= 0 && epsilon <= kMaxEpsilon &&
          is_int8_range(activation_min, activation_max),
      "layer_norm",
      "groups of at most %d elements dividing [*, spatial, channels], eps, activation range",
      static_cast<int>(kMaxGroup));
  Norm norm;
  norm.spatial = static_cast<int32_t>(spatial);
  norm.channels = static_cast<int32_t>(channels);
  norm.width = static_cast<int32_t>(channels / groups);
  norm.epsilon = epsilon;
  norm.multipliers = multipliers.const_data_ptr<int32_t>();
  norm.shifts = shifts.const_data_ptr<int32_t>();
  norm.biases = biases.const_data_ptr<int64_t>();
  norm.activation_min = static_cast<int32_t>(activation_min);
  norm.activation_max = static_cast<int32_t>(activation_max);
  CORTEX_M_NN_CHECK(
      context, valid_channels(norm), "layer_norm", "shifts 1..52 and |biases| <= 2^61");
  if (!context.computes()) {
    return;
  }
  const ssize_t block = spatial * channels;
  const int8_t* x = input.const_data_ptr<int8_t>();
  int8_t* y = out.mutable_data_ptr<int8_t>();
  for (ssize_t start = 0; start < input.numel(); start += block) {
    for (int32_t g = 0; g < static_cast<int32_t>(groups); ++g) {
      const ssize_t first = static_cast<ssize_t>(g) * norm.width;
      normalize(x + start + first, y + start + first, static_cast<int32_t>(first), norm);
    }
  }
}

}  // namespace native
}  // namespace cortex_m_nn
