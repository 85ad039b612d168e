// What the recurrent kernels (lstm, gru) share: the shape of a call over a [B, T, I] or
// [T, B, I] sequence, and the checks of their per-gate weights and biases ([G, H, K] and
// [G, H]: G = 4 gates for the LSTM, 3 for the GRU, in PyTorch's order) and of their states.
#pragma once

#include <cstdint>
#include <optional>

#include "cortex_m_nn/kernel_checks.h"

namespace cortex_m_nn {
namespace native {

// Shapes of one call: batch, steps, input features, hidden units.
struct RecurrentShape {
  int32_t batch;
  int32_t steps;
  int32_t features;
  int32_t units;
};

inline RecurrentShape recurrent_shape(
    const Tensor& input, const Tensor& hidden_weights, bool time_major) {
  const int32_t first = static_cast<int32_t>(input.size(0));
  const int32_t second = static_cast<int32_t>(input.size(1));
  return RecurrentShape{
      time_major ? second : first,
      time_major ? first : second,
      static_cast<int32_t>(input.size(2)),
      static_cast<int32_t>(hidden_weights.size(1))};
}

// int8 weights [gates, H, columns].
inline bool valid_gate_weights(
    const Tensor& weights, int gates, const RecurrentShape& s, int64_t columns) {
  return has_layout(weights, ScalarType::Char, 3) && weights.size(0) == gates &&
      weights.size(1) == s.units && weights.size(2) == columns;
}

// Biases [gates, H] of `type` (int32; the int16 LSTM's int64).
inline bool valid_gate_biases(
    const Tensor& biases, int gates, const RecurrentShape& s, ScalarType type) {
  return has_layout(biases, type, 2) && biases.size(0) == gates && biases.size(1) == s.units;
}

// An optional state [B, H] of `type` (an initial or a kept state; the LSTM's cell in int16).
inline bool valid_state(
    const std::optional<Tensor>& state, ScalarType type, const RecurrentShape& s) {
  return !state.has_value() ||
      (is_type(*state, type) && state->numel() == static_cast<ssize_t>(s.batch) * s.units);
}

}  // namespace native
}  // namespace cortex_m_nn
