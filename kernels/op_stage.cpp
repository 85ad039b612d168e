// cortex_m_nn::stage.out: a patch-based stage in one call. The program (an int32 constant
// written by python/cortex_m_nn/plan/fold.py; encoding in python/cortex_m_nn/ops/stage.py:
// each step its layer's template with its holes filled) lists the stage's strip calls: each
// step one call of conv2d, depthwise_conv2d, add, mul, lut or
// strided_copy, on views of the stage's input, its output and its scratch (rows of a strip
// buffer, a halo copy, a call's CMSIS-NN scratch) and on the stage's constants. Each step runs
// that operator's own kernel (the same function a call of it in the graph runs) in this call's
// mode, unprepared: while arguments are checked every step is checked too — its words, every
// view inside its tensor, the views a step writes apart from those it reads (except a halo
// moved down its own buffer: one memmove), then the operator's own checks — and a proven call
// only decodes and computes. The first step that fails fails the call. Int8 only (a stage
// holds int8 calls), so only those cases are linked.
// Reference: python/cortex_m_nn/ops/stage.py.
#include <cstring>
#include <new>

#include "cortex_m_nn/conv_common.h"
#include "cortex_m_nn/kernel_support.h"
#include "cortex_m_nn_operators.h"

namespace cortex_m_nn {
namespace native {
namespace {

using executorch::aten::ArrayRef;
using executorch::aten::DimOrderType;
using executorch::aten::SizesType;
using executorch::aten::StridesType;
using executorch::aten::TensorImpl;

constexpr int32_t kMagic = 0x53544732;  // "STG2"
constexpr int32_t kMaxStepWords = 64;   // a step's words (python: MAX_STEP_WORDS)
constexpr int32_t kConstants = 3;       // a tensor source of 3 + k: constant k
constexpr int32_t kMaxRank = 4;
constexpr int32_t kMaxInts = 8;      // the longest int[] a step operator takes
constexpr int kTensorsPerStep = 4;   // views one step makes: at most two inputs, out, scratch
constexpr int kListsPerStep = 3;     // int[] arguments of one step

enum StepOperator : int32_t {
  kConv2d = 1,
  kDepthwiseConv2d,
  kAdd,
  kMul,
  kLut,
  kStridedCopy,
};

// One view as an ExecuTorch tensor: its own sizes, dim order, strides and TensorImpl.
struct ViewSlot {
  SizesType sizes[kMaxRank];
  DimOrderType dim_order[kMaxRank];
  StridesType strides[kMaxRank];
  // TensorImpl has no default constructor: built in place by Reader::tensor.
  alignas(TensorImpl) unsigned char impl[sizeof(TensorImpl)];
  const uint8_t* begin = nullptr;  // the view's bytes, for the checks
  size_t bytes = 0;
  bool written = false;
};

// Reads one step's arguments from the program's words; views go into slots.
class Reader {
 public:
  Reader(CallContext& context, const int32_t* words, size_t count, Tensor* tensors,
         ArrayRef<Tensor> constants)
      : context_(context), words_(words), count_(count), tensors_(tensors),
        constants_(constants) {}

  // The next word (0 and `broken_` past the end).
  int32_t word() {
    if (at_ >= count_) {
      broken_ = true;
      return 0;
    }
    return words_[at_++];
  }
  size_t at() const { return at_; }
  size_t count() const { return count_; }
  bool broken() const { return broken_; }

  // A tensor argument: a constant, or a view in the next slot. Out of line: a step reads up to
  // seven tensors, and inlined at each the kernel grows by about a kilobyte each.
  __attribute__((noinline)) Tensor tensor(bool written = false) {
    const int32_t source = word();
    const int32_t offset = word();
    const int32_t rank = word();
    if (source >= kConstants) {
      const size_t index = static_cast<size_t>(source - kConstants);
      if (context_.checks() && (index >= constants_.size() || written)) {
        broken_ = true;
        return constants_.size() ? constants_[0] : tensors_[0];
      }
      return constants_[index];
    }
    // Kept in proven calls too (a few compares): the slots' arrays stay in bounds whatever
    // the words say.
    if (source < 0 || offset < 0 || rank < 1 || rank > kMaxRank ||
        slots_used_ == kTensorsPerStep) {
      broken_ = true;
      return tensors_[0];
    }
    ViewSlot& slot = slots_[slots_used_++];
    size_t bytes = 1;
    bool negative = false;
    for (int32_t k = 0; k < rank; ++k) {
      slot.sizes[k] = static_cast<SizesType>(word());
      slot.dim_order[k] = static_cast<DimOrderType>(k);
      negative |= slot.sizes[k] < 0;
      bytes *= static_cast<size_t>(slot.sizes[k] < 0 ? 0 : slot.sizes[k]);
    }
    for (int32_t k = rank - 1, stride = 1; k >= 0; stride *= slot.sizes[k], --k) {
      slot.strides[k] = static_cast<StridesType>(stride);
    }
    const Tensor& base = tensors_[source];
    uint8_t* data = static_cast<uint8_t*>(base.mutable_data_ptr()) + offset;
    if (context_.checks() && (negative || !is_type(base, ScalarType::Char) ||
                              static_cast<size_t>(offset) + bytes > base.nbytes() ||
                              (written && source == 0))) {
      broken_ = true;  // outside its tensor, or a write to the stage's input
    }
    slot.begin = data;
    slot.bytes = bytes;
    slot.written = written;
    auto* impl = new (slot.impl) TensorImpl(
        ScalarType::Char, rank, slot.sizes, data, slot.dim_order, slot.strides);
    return Tensor(impl);
  }

  int64_t integer() { return word(); }

  // An int[] argument, kept in the next list.
  IntArrayRef list() {
    const int32_t length = word();
    if (length < 0 || length > kMaxInts || lists_used_ == kListsPerStep) {
      broken_ = true;
      return IntArrayRef();
    }
    int64_t* values = lists_[lists_used_++];
    for (int32_t k = 0; k < length; ++k) {
      values[k] = word();
    }
    return IntArrayRef(values, static_cast<size_t>(length));
  }

  // Whether the step's arguments were read whole and, while checking, the views it writes
  // share no byte with any other of its views (unless `may_meet`: a copy of one run of
  // bytes, which memmove makes exact however its ends overlap); marks the step damaged
  // otherwise.
  bool ready(bool may_meet = false) {
    if (context_.checks() && !broken_ && !may_meet && !writes_apart()) {
      broken_ = true;
    }
    return !broken_;
  }

  bool writes_apart() const {
    for (int i = 0; i < slots_used_; ++i) {
      for (int j = 0; j < i; ++j) {
        const ViewSlot& a = slots_[i];
        const ViewSlot& b = slots_[j];
        const bool meet = a.begin < b.begin + b.bytes && b.begin < a.begin + a.bytes;
        if ((a.written || b.written) && meet && a.bytes && b.bytes) {
          return false;
        }
      }
    }
    return true;
  }

 private:
  CallContext& context_;
  const int32_t* words_;
  size_t count_;
  size_t at_ = 0;
  bool broken_ = false;
  Tensor* tensors_;  // input, out, scratch
  ArrayRef<Tensor> constants_;
  ViewSlot slots_[kTensorsPerStep];
  int slots_used_ = 0;
  int64_t lists_[kListsPerStep][kMaxInts];
  int lists_used_ = 0;
};

// The convolution steps: conv2d and depthwise_conv2d (one more int, the depth multiplier).
void convolution(CallContext& step, Reader& r, bool depthwise) {
  const Tensor input = r.tensor();
  const Tensor weight = r.tensor();
  const Tensor bias = r.tensor();
  const Tensor multipliers = r.tensor();
  const Tensor shifts = r.tensor();
  const IntArrayRef stride = r.list();
  const IntArrayRef padding = r.list();
  const IntArrayRef dilation = r.list();
  const int64_t multiplier = depthwise ? r.integer() : 0;
  const int64_t input_offset = r.integer();
  const int64_t output_offset = r.integer();
  const int64_t activation_min = r.integer();
  const int64_t activation_max = r.integer();
  const int64_t path = r.integer();
  const int64_t scratch_bytes = r.integer();
  Tensor out = r.tensor(true);
  Tensor scratch = r.tensor(true);
  if (!r.ready()) {
    return;
  }
  // The path's case (operators.yaml), as the registration would dispatch the call; any other
  // path is refused by the wrapper's case while checking.
  if (depthwise) {
    const auto run = path == kLanesPath   ? depthwise_conv2d_lanes_out
                     : path == kOtherPath ? depthwise_conv2d_three_by_three_out
                                          : depthwise_conv2d_out;
    run(step, input, weight, bias, multipliers, shifts, stride, padding, dilation, multiplier,
        input_offset, output_offset, activation_min, activation_max, path, scratch_bytes, out,
        scratch);
  } else {
    const auto run = path == kOtherPath ? conv2d_rows_out : conv2d_out;
    run(step, input, weight, bias, multipliers, shifts, stride, padding, dilation, input_offset,
        output_offset, activation_min, activation_max, path, scratch_bytes, out, scratch);
  }
}

// add (twelve ints) and mul (seven) of two inputs.
void binary(CallContext& step, Reader& r, bool add) {
  const Tensor input1 = r.tensor();
  const Tensor input2 = r.tensor();
  int64_t v[12];
  const int count = add ? 12 : 7;
  for (int k = 0; k < count; ++k) {
    v[k] = r.integer();
  }
  Tensor out = r.tensor(true);
  if (!r.ready()) {
    return;
  }
  if (add) {
    add_out(step, input1, input2, v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7], v[8], v[9],
            v[10], v[11], out);
  } else {
    mul_out(step, input1, input2, v[0], v[1], v[2], v[3], v[4], v[5], v[6], out);
  }
}

void table(CallContext& step, Reader& r) {
  const Tensor input = r.tensor();
  const Tensor values = r.tensor();
  Tensor out = r.tensor(true);
  if (r.ready()) {
    lut_out(step, input, values, out);
  }
}

void copy(CallContext& step, Reader& r) {
  const Tensor input = r.tensor();
  const IntArrayRef sizes = r.list();
  const IntArrayRef strides = r.list();
  const int64_t offset = r.integer();
  Tensor out = r.tensor(true);
  // A halo moved down inside its strip buffer (python/cortex_m_nn/plan/fold.py): one run.
  const bool one_run = sizes.size() == 1 && strides.size() == 1 && strides[0] == 1;
  if (r.ready(one_run)) {
    strided_copy_out(step, input, sizes, strides, offset, out);
  }
}

// One step; false when it failed (its words, its views or its operator's checks).
bool run_step(CallContext& context, Reader& r) {
  const size_t start = r.at();
  const int32_t code = r.word();
  const int32_t length = r.word();
  CallContext step = context.unprepared();
  switch (code) {
    case kConv2d:
    case kDepthwiseConv2d:
      convolution(step, r, code == kDepthwiseConv2d);
      break;
    case kAdd:
    case kMul:
      binary(step, r, code == kAdd);
      break;
    case kLut:
      table(step, r);
      break;
    case kStridedCopy:
      copy(step, r);
      break;
    default:
      if (context.checks()) {
        ET_LOG(Error, "cortex_m_nn::stage: unknown step operator %d", static_cast<int>(code));
        context.fail(Error::InvalidProgram);
        return false;
      }
  }
  if (context.checks() &&
      (r.broken() || r.at() - start != static_cast<size_t>(length) || r.at() != r.count())) {
    ET_LOG(Error, "cortex_m_nn::stage: step at word %u is damaged (its words or a view "
           "outside its tensor): compile the program again", static_cast<unsigned>(start));
    context.fail(Error::InvalidProgram);
    return false;
  }
  return !context.failed();
}

// The header's counts: templates and steps not negative, the templates' offsets and the steps'
// first word inside the program (numel >= 4 checked before).
bool program_header_fits(const Tensor& program) {
  const int32_t* words = program.const_data_ptr<int32_t>();
  const int64_t count = program.numel();
  return words[1] >= 0 && words[2] >= 0 && 4 + static_cast<int64_t>(words[1]) <= words[3] &&
      words[3] <= count;
}

// Step `*at`'s words into `filled`: its template's words with its holes' values, and `*at`
// moved past it. The step's word count, or -1 where the words do not make one. Checked in
// every mode (a few compares a step): `filled` and the program stay in bounds whatever the
// words say.
int32_t fill_step(const int32_t* words, size_t count, size_t* at, int32_t* filled) {
  const int32_t templates = words[1];
  const size_t steps_start = static_cast<size_t>(words[3]);
  if (*at >= count) {
    return -1;
  }
  const int32_t index = words[(*at)++];
  if (index < 0 || index >= templates) {
    return -1;
  }
  const int32_t offset = words[4 + index];
  if (offset < 4 + templates || static_cast<size_t>(offset) + 2 > steps_start) {
    return -1;
  }
  const int32_t length = words[offset];
  const int32_t holes = words[offset + 1];
  if (length < 2 || length > kMaxStepWords || holes < 0 ||
      static_cast<size_t>(offset) + 2 + static_cast<size_t>(holes) + static_cast<size_t>(length) >
          steps_start ||
      *at + static_cast<size_t>(holes) > count) {
    return -1;
  }
  const int32_t* positions = words + offset + 2;
  std::memcpy(filled, positions + holes, static_cast<size_t>(length) * sizeof(int32_t));
  for (int32_t h = 0; h < holes; ++h) {
    if (positions[h] < 0 || positions[h] >= length) {
      return -1;
    }
    filled[positions[h]] = words[(*at)++];
  }
  return length;
}

}  // namespace

void stage_out(
    CallContext& context,
    const Tensor& input,
    executorch::aten::ArrayRef<Tensor> constants,
    const Tensor& program,
    IntArrayRef out_shape,
    int64_t scratch_bytes,
    Tensor& out,
    Tensor& scratch) {
  CORTEX_M_NN_CHECK(
      context,
      is_type(input, ScalarType::Char) && is_type(out, ScalarType::Char) &&
          is_type(scratch, ScalarType::Char) && is_type(program, ScalarType::Int) &&
          program.dim() == 1 && program.numel() >= 4 &&
          program.const_data_ptr<int32_t>()[0] == kMagic && program_header_fits(program) &&
          out.dim() == static_cast<ssize_t>(out_shape.size()) &&
          scratch.numel() >= scratch_bytes,
      "stage",
      "input, out and scratch must be int8, program an int32 stage program, scratch at least "
      "%d bytes",
      static_cast<int>(scratch_bytes));
  for (size_t k = 0; k < out_shape.size(); ++k) {
    CORTEX_M_NN_CHECK(context, out.size(k) == out_shape[k], "stage",
                      "out's dim %d is %d, not %d", static_cast<int>(k),
                      static_cast<int>(out.size(k)), static_cast<int>(out_shape[k]));
  }
  Tensor tensors[3] = {input, out, scratch};
  const int32_t* words = program.const_data_ptr<int32_t>();
  const size_t count = static_cast<size_t>(program.numel());
  size_t at = static_cast<size_t>(words[3]);
  int32_t filled[kMaxStepWords];
  for (int32_t i = 0; i < words[2]; ++i) {
    const int32_t length = fill_step(words, count, &at, filled);
    if (length < 0) {
      ET_LOG(Error, "cortex_m_nn::stage: step %d's template or holes are damaged: compile the "
             "program again", static_cast<int>(i));
      context.fail(Error::InvalidProgram);
      return;
    }
    Reader reader(context, filled, static_cast<size_t>(length), tensors, constants);
    if (!run_step(context, reader)) {
      return;
    }
  }
  CORTEX_M_NN_CHECK(context, at == count, "stage", "the program has words after its %d steps",
                    static_cast<int>(words[2]));
}

}  // namespace native
}  // namespace cortex_m_nn
