// cortex_m_nn::lstm.out → arm_lstm_unidirectional_s8 (lstm_out: int8 input and hidden state)
// or, the int16 case (lstm_int16_out), arm_lstm_unidirectional_s16 (int64 biases): one LSTM
// layer over a [B, T, I] or [T, B, I] sequence, every step's hidden state out. Gates are stored
// in PyTorch's order (input, forget, cell, output); gate_parameters rows are (input multiplier,
// input shift, hidden multiplier, hidden shift). The scratch holds the two int16 gate buffers,
// the int16 cell state and, with an initial or a kept state, a copy of the hidden state: the
// kernel updates both in place. Only a kept state (state and cell_state, buffers of the
// program: nn.Streaming) is written: the last step's hidden and cell states, for the next
// call. Shape and weight checks: cortex_m_nn/recurrent_common.h.
// Reference: python/cortex_m_nn/ops/lstm.py.
#include <cstring>

#include "cortex_m_nn/recurrent_common.h"
#include "cortex_m_nn_operators.h"

namespace cortex_m_nn {
namespace native {
namespace {

constexpr const char* kOp = "lstm";
constexpr int kGates = 4;
enum Gate { kInput = 0, kForget = 1, kCell = 2, kOutput = 3 };

bool valid_gate_parameters(const Tensor& parameters) {
  if (!has_layout(parameters, ScalarType::Int, 2) || parameters.size(0) != kGates ||
      parameters.size(1) != 4) {
    return false;
  }
  const int32_t* p = parameters.const_data_ptr<int32_t>();
  for (int k = 0; k < kGates; ++k) {
    if (!is_shift(p[4 * k + 1]) || !is_shift(p[4 * k + 3])) {
      return false;
    }
  }
  return true;
}

// One gate's CMSIS-NN view: row k of the weights, biases and gate_parameters.
cmsis_nn_lstm_gate gate_of(
    const Tensor& input_weights,
    const Tensor& hidden_weights,
    const Tensor& input_biases,
    const Tensor& hidden_biases,
    const Tensor& gate_parameters,
    int k,
    arm_nn_activation_type activation) {
  const int32_t* p = gate_parameters.const_data_ptr<int32_t>() + 4 * k;
  const size_t bias_row = input_biases.nbytes() / kGates;
  const int8_t* wx = input_weights.const_data_ptr<int8_t>() + input_weights.numel() / kGates * k;
  const int8_t* wh = hidden_weights.const_data_ptr<int8_t>() + hidden_weights.numel() / kGates * k;
  const auto* bx = static_cast<const uint8_t*>(input_biases.const_data_ptr()) + bias_row * k;
  const auto* bh = static_cast<const uint8_t*>(hidden_biases.const_data_ptr()) + bias_row * k;
  return cmsis_nn_lstm_gate{p[0], p[1], wx, bx, p[2], p[3], wh, bh, nullptr, activation};
}

// The integer arguments after the tensors, as the schema orders them.
struct LstmScalars {
  int64_t time_major;
  int64_t cell_scale_power;
  int64_t cell_clip;
  int64_t forget_multiplier;
  int64_t forget_shift;
  int64_t update_multiplier;
  int64_t update_shift;
  int64_t output_multiplier;
  int64_t output_shift;
  int64_t output_offset;
};

bool valid_scalars(const LstmScalars& a, bool s16) {
  return is_requantization(a.forget_multiplier, a.forget_shift) &&
      is_requantization(a.update_multiplier, a.update_shift) &&
      is_requantization(a.output_multiplier, a.output_shift) && a.cell_scale_power >= -27 &&
      a.cell_scale_power <= 0 && a.cell_clip >= 0 && a.cell_clip <= 32767 &&
      (s16 ? a.output_offset == 0 : is_s8_output_offset(a.output_offset));
}

// Bytes of the kernel's buffers: two gate buffers and the cell state (int16), the hidden state.
int64_t needed_scratch(const RecurrentShape& s, bool s16) {
  return static_cast<int64_t>(s.batch) * s.units * (6 + (s16 ? 2 : 1));
}

// The tensors of one call that CMSIS-NN's parameters point into.
struct LstmTensors {
  const Tensor& input_weights;
  const Tensor& hidden_weights;
  const Tensor& input_biases;
  const Tensor& hidden_biases;
  const Tensor& gate_parameters;
};

bool valid_tensors(const LstmTensors& t, const RecurrentShape& s, bool s16) {
  const ScalarType bias = s16 ? ScalarType::Long : ScalarType::Int;
  return valid_gate_weights(t.input_weights, kGates, s, s.features) &&
      valid_gate_weights(t.hidden_weights, kGates, s, s.units) &&
      valid_gate_biases(t.input_biases, kGates, s, bias) &&
      valid_gate_biases(t.hidden_biases, kGates, s, bias) &&
      valid_gate_parameters(t.gate_parameters);
}

bool valid_output(
    const Tensor& input, const Tensor& out, const RecurrentShape& s, ScalarType type) {
  return has_layout(out, type, 3) && out.size(0) == input.size(0) &&
      out.size(1) == input.size(1) && out.size(2) == s.units;
}

cmsis_nn_lstm_params params_of(
    const RecurrentShape& s, const LstmScalars& a, const LstmTensors& t) {
  const auto gate = [&](int k, arm_nn_activation_type activation) {
    return gate_of(
        t.input_weights, t.hidden_weights, t.input_biases, t.hidden_biases, t.gate_parameters, k,
        activation);
  };
  return cmsis_nn_lstm_params{
      a.time_major != 0 ? 1 : 0,
      s.batch,
      s.steps,
      s.features,
      s.units,
      0,  // input_offset: folded into the input biases, unused by the kernels
      static_cast<int32_t>(a.forget_multiplier),
      static_cast<int32_t>(a.forget_shift),
      static_cast<int32_t>(a.update_multiplier),
      static_cast<int32_t>(a.update_shift),
      static_cast<int32_t>(a.cell_clip),
      static_cast<int32_t>(a.cell_scale_power),
      static_cast<int32_t>(a.output_multiplier),
      static_cast<int32_t>(a.output_shift),
      static_cast<int32_t>(a.output_offset),
      gate(kForget, ARM_SIGMOID),
      gate(kInput, ARM_SIGMOID),
      gate(kCell, ARM_TANH),
      gate(kOutput, ARM_SIGMOID)};
}

// The scratch as CMSIS-NN's buffers; an initial state is copied in (the kernel writes it).
cmsis_nn_lstm_context buffers_of(
    Tensor& scratch,
    const RecurrentShape& s,
    const std::optional<Tensor>& hidden,
    const std::optional<Tensor>& cell) {
  auto* bytes = scratch.mutable_data_ptr<int8_t>();
  const size_t gate_bytes = static_cast<size_t>(s.batch) * s.units * sizeof(int16_t);
  cmsis_nn_lstm_context buffers{bytes, bytes + gate_bytes, bytes + 2 * gate_bytes, nullptr};
  if (hidden.has_value()) {
    buffers.hidden_state = bytes + 3 * gate_bytes;
    std::memcpy(buffers.hidden_state, hidden->const_data_ptr(), hidden->nbytes());
    std::memcpy(buffers.cell_state, cell->const_data_ptr(), gate_bytes);
  }
  return buffers;
}

// A streaming layer's state: buffers of the program, read first, written last.
struct KeptState {
  const std::optional<Tensor>& state;
  const std::optional<Tensor>& cell_state;
};

// The last step's hidden state (from the output) and the cell state (from the scratch) into
// the kept state, for the next call.
void keep(const RecurrentShape& s, bool time_major, const Tensor& out,
          const cmsis_nn_lstm_context& buffers, const KeptState& k) {
  const auto* y = static_cast<const uint8_t*>(out.const_data_ptr());
  auto* h = static_cast<uint8_t*>(k.state->mutable_data_ptr());
  const size_t row = k.state->nbytes() / static_cast<size_t>(s.batch);
  for (int32_t b = 0; s.steps > 0 && b < s.batch; ++b) {  // no step: the state as it was
    const int64_t last = time_major ? static_cast<int64_t>(s.steps - 1) * s.batch + b
                                    : static_cast<int64_t>(b) * s.steps + s.steps - 1;
    std::memcpy(h + b * row, y + last * static_cast<int64_t>(row), row);
  }
  std::memcpy(k.cell_state->mutable_data_ptr(), buffers.cell_state, k.cell_state->nbytes());
}

// Either case: int8 (kS16 false: arm_lstm_unidirectional_s8) or int16 activations
// (arm_lstm_unidirectional_s16).
template <bool kS16>
void lstm(CallContext& context, const Tensor& input, const std::optional<Tensor>& hidden,
          const std::optional<Tensor>& cell, const KeptState& k, const LstmTensors& t,
          const LstmScalars& a, int64_t scratch_bytes, Tensor& out, Tensor& scratch) {
  constexpr bool s16 = kS16;
  constexpr ScalarType type = s16 ? ScalarType::Short : ScalarType::Char;
  CORTEX_M_NN_CHECK(
      context,
      has_layout(input, type, 3) && has_layout(t.hidden_weights, ScalarType::Char, 3) &&
          t.hidden_weights.size(0) == kGates,
      "lstm",
      "input must be a 3-D int8 (or int16) sequence, hidden_weights int8 [4, H, H]");
  const RecurrentShape s = recurrent_shape(input, t.hidden_weights, a.time_major != 0);
  CORTEX_M_NN_CHECK(
      context,
      valid_tensors(t, s, s16) && valid_output(input, out, s, type) &&
          valid_state(hidden, type, s) && valid_state(cell, ScalarType::Short, s) &&
          hidden.has_value() == cell.has_value() && valid_state(k.state, type, s) &&
          valid_state(k.cell_state, ScalarType::Short, s) &&
          k.state.has_value() == k.cell_state.has_value() &&
          !(hidden.has_value() && k.state.has_value()),
      "lstm",
      "weights int8 [4, H, I] and [4, H, H], biases [4, H] (int32; int64 for int16), gate "
      "parameters int32 [4, 4] with shifts in [-31, 30], out [.., .., H] and an initial or a "
      "kept state (hidden [B, H] of the input's type and cell [B, H] int16, or neither; not "
      "both)");
  CORTEX_M_NN_CHECK(
      context,
      valid_scalars(a, s16) && scratch_bytes == needed_scratch(s, s16) &&
          check_scratch_type(context, kOp, scratch) &&
          scratch.nbytes() >= static_cast<size_t>(scratch_bytes),
      "lstm",
      "requantizations, cell scale power in [-27, 0], cell clip, output offset or scratch "
      "(B x H x 7 bytes, x 8 for int16) out of range");
  if (!context.computes()) {  // no prepared form: the boxed entry checked the plan has none
    return;
  }
  const bool kept = k.state.has_value();
  cmsis_nn_lstm_context buffers =
      buffers_of(scratch, s, kept ? k.state : hidden, kept ? k.cell_state : cell);
  const cmsis_nn_lstm_params params = params_of(s, a, t);
  if constexpr (s16) {
    check_status(context, kOp,
                 arm_lstm_unidirectional_s16(input.const_data_ptr<int16_t>(),
                                             out.mutable_data_ptr<int16_t>(), &params, &buffers));
  } else {
    check_status(context, kOp,
                 arm_lstm_unidirectional_s8(input.const_data_ptr<int8_t>(),
                                            out.mutable_data_ptr<int8_t>(), &params, &buffers));
  }
  if (kept) {
    keep(s, a.time_major != 0, out, buffers, k);
  }
}

}  // namespace

void lstm_out(
    CallContext& context,
    const Tensor& input,
    const std::optional<Tensor>& hidden,
    const std::optional<Tensor>& cell,
    const std::optional<Tensor>& state,
    const std::optional<Tensor>& cell_state,
    const Tensor& input_weights,
    const Tensor& hidden_weights,
    const Tensor& input_biases,
    const Tensor& hidden_biases,
    const Tensor& gate_parameters,
    int64_t time_major,
    int64_t cell_scale_power,
    int64_t cell_clip,
    int64_t forget_multiplier,
    int64_t forget_shift,
    int64_t update_multiplier,
    int64_t update_shift,
    int64_t output_multiplier,
    int64_t output_shift,
    int64_t output_offset,
    int64_t scratch_bytes,
    Tensor& out,
    Tensor& scratch) {
  const LstmTensors t{input_weights, hidden_weights, input_biases, hidden_biases, gate_parameters};
  const LstmScalars a{
      time_major,        cell_scale_power, cell_clip,         forget_multiplier, forget_shift,
      update_multiplier, update_shift,     output_multiplier, output_shift,      output_offset};
  lstm<false>(context, input, hidden, cell, KeptState{state, cell_state}, t, a, scratch_bytes,
              out, scratch);
}

void lstm_int16_out(
    CallContext& context, const Tensor& input, const std::optional<Tensor>& hidden,
    const std::optional<Tensor>& cell, const std::optional<Tensor>& state,
    const std::optional<Tensor>& cell_state, const Tensor& input_weights,
    const Tensor& hidden_weights,
    const Tensor& input_biases, const Tensor& hidden_biases, const Tensor& gate_parameters,
    int64_t time_major, int64_t cell_scale_power, int64_t cell_clip, int64_t forget_multiplier,
    int64_t forget_shift, int64_t update_multiplier, int64_t update_shift,
    int64_t output_multiplier, int64_t output_shift, int64_t output_offset,
    int64_t scratch_bytes, Tensor& out, Tensor& scratch) {
  const LstmTensors t{input_weights, hidden_weights, input_biases, hidden_biases, gate_parameters};
  const LstmScalars a{
      time_major,        cell_scale_power, cell_clip,         forget_multiplier, forget_shift,
      update_multiplier, update_shift,     output_multiplier, output_shift,      output_offset};
  lstm<true>(context, input, hidden, cell, KeptState{state, cell_state}, t, a, scratch_bytes,
             out, scratch);
}

}  // namespace native
}  // namespace cortex_m_nn
