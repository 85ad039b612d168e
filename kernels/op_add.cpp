// cortex_m_nn::add.out → arm_elementwise_add_s8 (int16: arm_elementwise_add_s16), row by row
// for broadcast inputs (see cortex_m_nn/elementwise.h). Also runs sub: the lowering negates input 2's multiplier.
// Reference: python/cortex_m_nn/ops/add.py.
#include "cortex_m_nn/elementwise.h"
#include "cortex_m_nn_operators.h"

namespace cortex_m_nn {
namespace native {

namespace {
// The int16 case's input side, as add_out receives it.
struct AddS16 {
  int64_t input1_offset, input1_multiplier, input1_shift;
  int64_t input2_offset, input2_multiplier, input2_shift, left_shift;

  // Offsets 0 (the s16 kernel ignores them); a left shift of at most 15 and input shifts of at
  // most 0 keep an int16 in int32.
  bool valid() const {
    return input1_offset == 0 && input2_offset == 0 &&
        is_requantization(input1_multiplier, input1_shift) && input1_shift <= 0 &&
        is_requantization(input2_multiplier, input2_shift) && input2_shift <= 0 &&
        left_shift >= 0 && left_shift <= 15;
  }
};

// The int16 case: arm_elementwise_add_s16, unprepared.
void add_s16(CallContext& context, const Tensor& input1, const Tensor& input2, const AddS16& p,
             const OutputQuant& output, Tensor& out) {
  const bool valid = p.valid() && output.valid_s16();
  if (context.checks() &&
      !context.prepared_agrees("add", CORTEX_M_NN_PREPARED_NONE, nullptr, 0)) {
    return;
  }
  const OutputQuant::Int32 q = output.int32();
  elementwise_rows<int16_t>(
      context, "add", input1, input2, out, valid,
      [&](const int16_t* a, const int16_t* b, int16_t* o, int32_t n) {
        return arm_elementwise_add_s16(
            a, b, 0, static_cast<int32_t>(p.input1_multiplier),
            static_cast<int32_t>(p.input1_shift), 0, static_cast<int32_t>(p.input2_multiplier),
            static_cast<int32_t>(p.input2_shift), static_cast<int32_t>(p.left_shift), o, 0,
            q.multiplier, q.shift, q.activation_min, q.activation_max, n);
      });
}
}  // namespace

void add_out(
    CallContext& context,
    const Tensor& input1,
    const Tensor& input2,
    int64_t input1_offset,
    int64_t input1_multiplier,
    int64_t input1_shift,
    int64_t input2_offset,
    int64_t input2_multiplier,
    int64_t input2_shift,
    int64_t left_shift,
    int64_t output_offset,
    int64_t output_multiplier,
    int64_t output_shift,
    int64_t activation_min,
    int64_t activation_max,
    Tensor& out) {
  const OutputQuant output{
      output_offset, output_multiplier, output_shift, activation_min, activation_max};
  if (is_type(input1, ScalarType::Short)) {
    const AddS16 p{input1_offset, input1_multiplier, input1_shift, input2_offset,
                   input2_multiplier, input2_shift, left_shift};
    add_s16(context, input1, input2, p, output, out);
    return;
  }
  const bool valid = output.valid_s8() && is_requantization(input1_multiplier, input1_shift) &&
      is_requantization(input2_multiplier, input2_shift) && left_shift >= 0 &&
      left_shift <= 30 && is_s8_input_offset(input1_offset) && is_s8_input_offset(input2_offset);
  const OutputQuant::Int32 q = output.int32();
  if (context.checks() && valid) {  // an entry only where nothing broadcasts (prepared.h)
    const Shape4 shape = shape4(out);
    const bool whole = same_shape(shape4(input1), shape) && same_shape(shape4(input2), shape);
    const cortex_m_nn_add_prepared derived{
        static_cast<int32_t>(input1_offset), static_cast<int32_t>(input1_multiplier),
        static_cast<int32_t>(input1_shift), static_cast<int32_t>(input2_offset),
        static_cast<int32_t>(input2_multiplier), static_cast<int32_t>(input2_shift),
        static_cast<int32_t>(left_shift), q.offset, q.multiplier, q.shift, q.activation_min,
        q.activation_max, shape.d[0] * shape.d[1] * shape.d[2] * shape.d[3]};
    const bool agrees = whole
        ? context.prepared_agrees("add", CORTEX_M_NN_PREPARED_ADD, &derived, sizeof(derived))
        : context.prepared_agrees("add", CORTEX_M_NN_PREPARED_NONE, nullptr, 0);
    if (!agrees) {
      return;
    }
  }
  elementwise_rows(
      context, "add", input1, input2, out, valid,
      [&](const int8_t* a, const int8_t* b, int8_t* o, int32_t n) {
        return arm_elementwise_add_s8(
            a, b,
            static_cast<int32_t>(input1_offset), static_cast<int32_t>(input1_multiplier),
            static_cast<int32_t>(input1_shift),
            static_cast<int32_t>(input2_offset), static_cast<int32_t>(input2_multiplier),
            static_cast<int32_t>(input2_shift),
            static_cast<int32_t>(left_shift),
            o, q.offset, q.multiplier, q.shift, q.activation_min, q.activation_max, n);
      });
}

void add_prepared(CallContext& context, EValue** args) {
  const auto& p = *static_cast<const cortex_m_nn_add_prepared*>(context.prepared());
  check_status(
      context,
      "add",
      arm_elementwise_add_s8(
          proven_tensor(args, add_args::input1).const_data_ptr<int8_t>(),
          proven_tensor(args, add_args::input2).const_data_ptr<int8_t>(), p.input1_offset,
          p.input1_multiplier, p.input1_shift, p.input2_offset, p.input2_multiplier,
          p.input2_shift, p.left_shift,
          proven_tensor(args, add_args::out).mutable_data_ptr<int8_t>(), p.output_offset,
          p.output_multiplier, p.output_shift, p.activation_min, p.activation_max, p.size));
}

}  // namespace native
}  // namespace cortex_m_nn
