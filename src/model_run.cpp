// cortex_m_nn::Model's inputs, runs and outputs (loading: src/model.cpp).
#include <stddef.h>

#include "cortex_m_nn/model.h"
#include "model_state.h"

namespace cortex_m_nn {
namespace {

namespace rt = executorch::runtime;
using detail::method_of;
using detail::numel;
using executorch::aten::ScalarType;

constexpr size_t kMaxDims = 16;  // ExecuTorch's kTensorDimensionLimit

}  // namespace

bool Model::input_is_int8(size_t index) const {
  return index < state().io.inputs && state().io.input_int8[index];
}
bool Model::output_is_int8(size_t index) const {
  return index < state().io.outputs && state().io.output_int8[index];
}

Quantization Model::input_quantization(size_t index) const {
  if (!input_is_int8(index)) {
    return {0.0f, 0};
  }
  return {state().io.input_scales[index], state().io.input_zero_points[index]};
}

Quantization Model::output_quantization(size_t index) const {
  if (!output_is_int8(index)) {
    return {0.0f, 0};
  }
  return {state().io.output_scales[index], state().io.output_zero_points[index]};
}

size_t Model::num_inputs() const { return loaded_ ? method_of(state()).inputs_size() : 0; }
size_t Model::num_outputs() const { return loaded_ ? method_of(state()).outputs_size() : 0; }

size_t Model::input_size(size_t index) const {
  if (!loaded_ || index >= method_of(state()).inputs_size()) {
    return 0;
  }
  rt::Result<rt::TensorInfo> info = method_of(state()).method_meta().input_tensor_meta(index);
  return info.ok() ? numel(info.get()) : 0;
}

size_t Model::output_size(size_t index) const {
  if (!loaded_ || index >= method_of(state()).outputs_size()) {
    return 0;
  }
  rt::Result<rt::TensorInfo> info = method_of(state()).method_meta().output_tensor_meta(index);
  return info.ok() ? numel(info.get()) : 0;
}

Status Model::set_input(size_t index, const float* data, size_t size) {
  return set_input_values(index, false, data, size);
}

Status Model::set_input(size_t index, const int8_t* data, size_t size) {
  return set_input_values(index, true, data, size);
}

Status Model::set_input_values(size_t index, bool int8, const void* data, size_t size) {
  if (!loaded_) {
    return fail(Status::kNotLoaded, "set_input before a successful load()");
  }
  rt::Method& forward = method_of(state());
  if (index >= forward.inputs_size() || index >= kMaxIo) {
    return fail(Status::kBadInput, "no input %u (forward has %u)", static_cast<unsigned>(index),
                static_cast<unsigned>(forward.inputs_size()));
  }
  rt::Result<rt::TensorInfo> info = forward.method_meta().input_tensor_meta(index);
  const ScalarType type = int8 ? ScalarType::Char : ScalarType::Float;
  if (!info.ok() || info->scalar_type() != type) {
    return fail(Status::kBadInput, "input %u is not %s (the model was compiled with --io %s)",
                static_cast<unsigned>(index), int8 ? "int8" : "float",
                int8 ? "float" : "int8");
  }
  if (!info->is_memory_planned()) {
    return fail(Status::kBadInput, "input %u has no planned memory: compile with cortex-m-compile",
                static_cast<unsigned>(index));
  }
  if (size != numel(info.get())) {
    return fail(Status::kBadInput, "input %u takes %u values, not %u",
                static_cast<unsigned>(index), static_cast<unsigned>(numel(info.get())),
                static_cast<unsigned>(size));
  }
  // A tensor header over the caller's data; set_input copies it into the planned input.
  executorch::aten::SizesType sizes[kMaxDims];
  executorch::aten::DimOrderType dim_order[kMaxDims];
  executorch::aten::StridesType strides[kMaxDims];
  size_t dims = info->sizes().size();
  if (dims > kMaxDims || info->dim_order().size() != dims) {
    return fail(Status::kBadInput, "input %u has %u dimensions", static_cast<unsigned>(index),
                static_cast<unsigned>(dims));
  }
  for (size_t d = 0; d < dims; ++d) {
    sizes[d] = info->sizes()[d];
    dim_order[d] = info->dim_order()[d];
  }
  executorch::aten::StridesType stride = 1;
  for (size_t k = dims; k-- > 0;) {
    strides[dim_order[k]] = stride;
    stride *= sizes[dim_order[k]];
  }
  executorch::aten::TensorImpl impl(type, static_cast<ssize_t>(dims), sizes,
                                    const_cast<void*>(data), dim_order, strides);
  rt::Error error = forward.set_input(rt::EValue(executorch::aten::Tensor(&impl)), index);
  if (error != rt::Error::Ok) {
    return fail(Status::kBadInput, "input %u refused (error 0x%x)", static_cast<unsigned>(index),
                static_cast<unsigned>(error));
  }
  return Status::kOk;
}

Status Model::run() {
  if (!loaded_) {
    return fail(Status::kNotLoaded, "run before a successful load()");
  }
  rt::Error error = method_of(state()).execute();
  if (error != rt::Error::Ok) {
    return fail(Status::kRunFailed, "forward failed (error 0x%x); the log names the kernel",
                static_cast<unsigned>(error));
  }
  return Status::kOk;
}

// ExecuTorch marks Method::step(), in_progress() and reset_execution() experimental with the
// deprecated attribute; only run_profiled (here) and cortex_m_nn::prove use them, so only there
// is that warning (an error under Zephyr's -Werror builds) silenced.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
Status Model::run_profiled(CallHook before, CallHook after, void* context) {
  if (!loaded_) {
    return fail(Status::kNotLoaded, "run before a successful load()");
  }
  rt::Method& forward = method_of(state());
  size_t call = 0;
  do {  // step() runs one instruction; in_progress() is false once the last one ran
    if (before != nullptr) {
      before(call, context);
    }
    const rt::Error error = forward.step();
    if (after != nullptr) {
      after(call, context);
    }
    if (error != rt::Error::Ok) {
      return fail(Status::kRunFailed,
                  "forward failed at kernel call %u (error 0x%x); the log names the kernel",
                  static_cast<unsigned>(call), static_cast<unsigned>(error));
    }
    ++call;
  } while (forward.in_progress());
  const rt::Error reset = forward.reset_execution();
  if (reset != rt::Error::Ok) {
    return fail(Status::kRunFailed, "forward did not reach its end (error 0x%x)",
                static_cast<unsigned>(reset));
  }
  return Status::kOk;
}
#pragma GCC diagnostic pop

Tensor Model::output(size_t index) const {
  if (!loaded_ || index >= method_of(state()).outputs_size()) {
    return {nullptr, 0};
  }
  const rt::EValue& value = method_of(state()).get_output(index);
  if (!value.isTensor() || value.toTensor().scalar_type() != ScalarType::Float) {
    return {nullptr, 0};
  }
  const executorch::aten::Tensor& tensor = value.toTensor();
  return {tensor.const_data_ptr<float>(), static_cast<size_t>(tensor.numel())};
}

QuantizedTensor Model::quantized_output(size_t index) const {
  if (!loaded_ || index >= method_of(state()).outputs_size()) {
    return {nullptr, 0, {0.0f, 0}};
  }
  const rt::EValue& value = method_of(state()).get_output(index);
  if (!value.isTensor() || value.toTensor().scalar_type() != ScalarType::Char) {
    return {nullptr, 0, {0.0f, 0}};
  }
  const executorch::aten::Tensor& tensor = value.toTensor();
  return {tensor.const_data_ptr<int8_t>(), static_cast<size_t>(tensor.numel()),
          output_quantization(index)};
}

}  // namespace cortex_m_nn
