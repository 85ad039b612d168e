// cortex_m_nn::Model: the embedded program run by ExecuTorch in memory reserved at build time.
//
// Built by the Zephyr module (CMakeLists.txt) and the bare-metal runner (tests/target/runner)
// with the cortex_m_nn_model.h that `cortex-m-compile embed` generates (sizes and target of the
// embedded .pte) and the kernels' cortex_m_nn/abi.h (what they were built for); nothing
// Zephyr-specific unless CORTEX_M_NN_ARENA_NODELABEL places the arena: host tests build it.
#include "cortex_m_nn/model.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <new>

#include <executorch/extension/data_loader/buffer_data_loader.h>
#include <executorch/runtime/core/hierarchical_allocator.h>
#include <executorch/runtime/core/memory_allocator.h>
#include <executorch/runtime/executor/memory_manager.h>
#include <executorch/runtime/executor/program.h>
#include <executorch/runtime/platform/runtime.h>

#include "cortex_m_nn/abi.h"
#include "cortex_m_nn/call_mode.h"
#include "cortex_m_nn_model.h"

// --- the embedded program against this build's kernel ABI (cortex_m_nn/abi.h) -----------------

// The Zephyr Kconfig choice of ISA must be the CMSIS-NN path the compiler's flags select.
#if defined(CONFIG_CORTEX_M_NN_ISA_MVE) && CORTEX_M_NN_ABI_ISA != CORTEX_M_NN_ABI_ISA_MVE
#error "CONFIG_CORTEX_M_NN_ISA_MVE is set but the compiler does not emit MVE: set CONFIG_FPU=y"
#elif defined(CONFIG_CORTEX_M_NN_ISA_DSP) && CORTEX_M_NN_ABI_ISA != CORTEX_M_NN_ABI_ISA_DSP
#error "CONFIG_CORTEX_M_NN_ISA_DSP does not match the compiler's -mcpu (see cmake/gcc-m-cpu.cmake)"
#elif defined(CONFIG_CORTEX_M_NN_ISA_SCALAR) && CORTEX_M_NN_ABI_ISA != CORTEX_M_NN_ABI_ISA_SCALAR
#error "CONFIG_CORTEX_M_NN_ISA_SCALAR does not match the compiler's -mcpu (it emits DSP)"
#endif

// What cortex-m-compile embed read from the .pte (cortex_m_nn_model.h), checked at build time;
// load() checks the program itself (check_program_abi) at run time.
static_assert(cortex_m_nn::abi::same(CORTEX_M_NN_MODEL_ISA, cortex_m_nn::abi::kIsa),
              "the embedded .pte was compiled for another CMSIS-NN code path than this build's "
              "compiler emits (cortex_m_nn_model.h: CORTEX_M_NN_MODEL_ISA): recompile it with "
              "cortex-m-compile --target <core>+<isa of this build>");
static_assert(cortex_m_nn::abi::same(CORTEX_M_NN_MODEL_ROUNDING, cortex_m_nn::abi::kRounding),
              "the embedded .pte was compiled for another requantization rounding than CMSIS-NN "
              "is built with: recompile it with cortex-m-compile --rounding, or change "
              "CONFIG_CORTEX_M_NN_ROUNDING");
static_assert(CORTEX_M_NN_MODEL_OPS_VERSION == cortex_m_nn::abi::kOpsVersion,
              "the embedded .pte uses another operator version than these kernels: compile the "
              "model and build the firmware with the same cortex-m-nn release");

// --- memory reserved at build time ----------------------------------------------------------

#if defined(CORTEX_M_NN_ARENA_NODELABEL)
// The arena goes to the memory-region node CONFIG_CORTEX_M_NN_ARENA_MEMORY names: Zephyr's
// linker script gives every "zephyr,memory-region" node a NOLOAD section of that name.
#include <zephyr/devicetree.h>
#include <zephyr/linker/devicetree_regions.h>
#define CORTEX_M_NN_ARENA_PLACEMENT \
  __attribute__((section(LINKER_DT_NODE_REGION_NAME(DT_NODELABEL(CORTEX_M_NN_ARENA_NODELABEL)))))
#else
#define CORTEX_M_NN_ARENA_PLACEMENT
#endif

#ifndef CORTEX_M_NN_TEMP_ALLOCATOR_BYTES
#define CORTEX_M_NN_TEMP_ALLOCATOR_BYTES 0
#endif
#ifndef CORTEX_M_NN_LOAD_TEMP_BYTES
#error "cortex_m_nn_model.h records no load-time allocator: regenerate it (cortex-m-compile embed)"
#endif
// The temporary allocator: what loading forward needs (cortex-m-compile sized the method
// allocator for it) or what the application asked for, whichever is larger.
#define CORTEX_M_NN_TEMP_POOL_BYTES                                  \
  (CORTEX_M_NN_TEMP_ALLOCATOR_BYTES > CORTEX_M_NN_LOAD_TEMP_BYTES ? \
       CORTEX_M_NN_TEMP_ALLOCATOR_BYTES                             \
                                                                  : CORTEX_M_NN_LOAD_TEMP_BYTES)

#if !defined(CORTEX_M_NN_MODEL_INPUT_INT8) || !defined(CORTEX_M_NN_MODEL_PREPARED_CALLS)
#error "cortex_m_nn_model.h lacks I/O types or prepared calls: regenerate it (cortex-m-compile)"
#endif
// forward's kernel calls prepared ahead of time (cortex_m_nn_model.c, cortex_m_nn/prepared.h)
extern "C" const cortex_m_nn_prepared_call cortex_m_nn_model_prepared[];

namespace cortex_m_nn {
namespace {

using executorch::aten::ScalarType;
using executorch::extension::BufferDataLoader;
using executorch::runtime::Error;
using executorch::runtime::EValue;
using executorch::runtime::HierarchicalAllocator;
using executorch::runtime::MemoryAllocator;
using executorch::runtime::MemoryManager;
using executorch::runtime::Method;
using executorch::runtime::MethodMeta;
using executorch::runtime::Program;
using executorch::runtime::Result;
using executorch::runtime::Span;
using executorch::runtime::TensorInfo;

constexpr size_t kAlignment = 16;
constexpr size_t kPlannedBuffers = CORTEX_M_NN_PLANNED_BUFFERS;
constexpr size_t kPlannedSizes[kPlannedBuffers > 0 ? kPlannedBuffers : 1] =
    CORTEX_M_NN_PLANNED_BUFFER_SIZES;
constexpr size_t kArenaBytes = CORTEX_M_NN_ARENA_BYTES > 0 ? CORTEX_M_NN_ARENA_BYTES : 1;
constexpr size_t kMaxDims = 16;  // ExecuTorch's kTensorDimensionLimit
constexpr size_t kMaxInputs = 8;
constexpr const char* kForward = "forward";

// Each input's and output's type and quantization, as cortex-m-compile embed read them.
constexpr uint8_t kInputInt8[] = CORTEX_M_NN_MODEL_INPUT_INT8;
constexpr float kInputScales[] = CORTEX_M_NN_MODEL_INPUT_SCALES;
constexpr int32_t kInputZeroPoints[] = CORTEX_M_NN_MODEL_INPUT_ZERO_POINTS;
constexpr uint8_t kOutputInt8[] = CORTEX_M_NN_MODEL_OUTPUT_INT8;
constexpr float kOutputScales[] = CORTEX_M_NN_MODEL_OUTPUT_SCALES;
constexpr int32_t kOutputZeroPoints[] = CORTEX_M_NN_MODEL_OUTPUT_ZERO_POINTS;
constexpr size_t kInputTypes = sizeof(kInputInt8) / sizeof(kInputInt8[0]);
constexpr size_t kOutputTypes = sizeof(kOutputInt8) / sizeof(kOutputInt8[0]);

alignas(kAlignment) uint8_t arena[kArenaBytes] CORTEX_M_NN_ARENA_PLACEMENT;
alignas(kAlignment) uint8_t method_pool[CORTEX_M_NN_METHOD_ALLOCATOR_BYTES];
#if CORTEX_M_NN_TEMP_POOL_BYTES > 0
alignas(kAlignment) uint8_t temp_pool[CORTEX_M_NN_TEMP_POOL_BYTES];
#endif
// The prepared calls and each one's argument list (the proof finds them): see call_mode.h.
const void* prepared_arguments[CORTEX_M_NN_MODEL_PREPARED_CALLS + 1];
CallPlan plan{cortex_m_nn_model_prepared, CORTEX_M_NN_MODEL_PREPARED_CALLS, prepared_arguments};

// ExecuTorch objects live in static storage, constructed by load().
alignas(BufferDataLoader) uint8_t loader_storage[sizeof(BufferDataLoader)];
alignas(Program) uint8_t program_storage[sizeof(Program)];
alignas(Method) uint8_t method_storage[sizeof(Method)];
alignas(MemoryAllocator) uint8_t method_allocator_storage[sizeof(MemoryAllocator)];
alignas(MemoryAllocator) uint8_t temp_allocator_storage[sizeof(MemoryAllocator)];
alignas(HierarchicalAllocator) uint8_t planned_storage[sizeof(HierarchicalAllocator)];
alignas(MemoryManager) uint8_t manager_storage[sizeof(MemoryManager)];
Span<uint8_t> planned_spans[kPlannedBuffers > 0 ? kPlannedBuffers : 1];

char error_text[288] = "";
char model_abi_text[96] = "unknown";

Program& program() { return *reinterpret_cast<Program*>(program_storage); }
Method& method() { return *reinterpret_cast<Method*>(method_storage); }
MemoryAllocator& method_allocator() {
  return *reinterpret_cast<MemoryAllocator*>(method_allocator_storage);
}

// The temporary allocator: none when neither loading forward nor the application needs one.
MemoryAllocator* temp_allocator() {
#if CORTEX_M_NN_TEMP_POOL_BYTES > 0
  return new (temp_allocator_storage)
      MemoryAllocator(static_cast<uint32_t>(sizeof(temp_pool)), temp_pool);
#else
  (void)temp_allocator_storage;
  return nullptr;
#endif
}

size_t numel(const TensorInfo& info) {
  size_t count = 1;
  for (int32_t size : info.sizes()) {
    count *= static_cast<size_t>(size);
  }
  return count;
}

}  // namespace

const char* to_string(Status status) {
  static const char* const kNames[] = {  // in the order of Status
      "ok", "not loaded", "load failed", "compiled for other kernels", "bad input", "run failed"};
  const size_t index = static_cast<size_t>(status);
  return index < sizeof(kNames) / sizeof(kNames[0]) ? kNames[index] : "unknown";
}

Model& Model::embedded() {
  static Model model;
  return model;
}

const char* Model::error() const { return error_text; }
const char* Model::model_abi() const { return model_abi_text; }
const char* Model::kernels_abi() { return abi::kText; }
size_t Model::arena_bytes() { return CORTEX_M_NN_ARENA_BYTES; }
size_t Model::method_allocator_bytes() { return CORTEX_M_NN_METHOD_ALLOCATOR_BYTES; }
size_t Model::method_allocator_used() const {
  return loaded_ ? method_allocator().used_size() : 0;
}

Status Model::fail(Status status, const char* format, ...) {
  va_list arguments;
  va_start(arguments, format);
  vsnprintf(error_text, sizeof(error_text), format, arguments);
  va_end(arguments);
  return status;
}

// The planned buffers, carved out of the arena exactly as the build sized it.
Status Model::place_planned_buffers(size_t* count) {
  Result<MethodMeta> meta = program().method_meta(kForward);
  if (!meta.ok()) {
    return fail(Status::kLoadFailed, "the .pte has no forward method (error 0x%x)",
                static_cast<unsigned>(meta.error()));
  }
  const size_t buffers = meta->num_memory_planned_buffers();
  if (buffers != kPlannedBuffers) {
    return fail(Status::kLoadFailed,
                "forward plans %u buffers but the build reserved %u: rebuild with this .pte",
                static_cast<unsigned>(buffers), static_cast<unsigned>(kPlannedBuffers));
  }
  size_t offset = 0;
  for (size_t i = 0; i < buffers; ++i) {
    Result<int64_t> size = meta->memory_planned_buffer_size(i);
    if (!size.ok() || static_cast<size_t>(size.get()) > kPlannedSizes[i]) {
      return fail(Status::kLoadFailed, "planned buffer %u needs %ld B but the build reserved "
                  "%u B: rebuild with this .pte", static_cast<unsigned>(i),
                  size.ok() ? static_cast<long>(size.get()) : -1L,
                  static_cast<unsigned>(kPlannedSizes[i]));
    }
    planned_spans[i] = Span<uint8_t>(arena + offset, kPlannedSizes[i]);
    offset += (kPlannedSizes[i] + kAlignment - 1) / kAlignment * kAlignment;
  }
  *count = buffers;
  return Status::kOk;
}

Status Model::load() {
  if (loaded_) {
    return Status::kOk;
  }
  executorch::runtime::runtime_init();
  auto* loader = new (loader_storage)
      BufferDataLoader(cortex_m_nn_model, cortex_m_nn_model_size);
  Result<Program> parsed = Program::load(loader);
  if (!parsed.ok()) {
    return fail(Status::kLoadFailed, "the embedded .pte cannot be read (error 0x%x)",
                static_cast<unsigned>(parsed.error()));
  }
  new (program_storage) Program(std::move(parsed.get()));

  // What the program was compiled for, against what the kernels were built for.
  auto* method_allocator = new (method_allocator_storage)
      MemoryAllocator(static_cast<uint32_t>(sizeof(method_pool)), method_pool);
  AbiCheck abi_check = check_program_abi(program(), *method_allocator);
  if (abi_check.program[0] != '\0') {
    snprintf(model_abi_text, sizeof(model_abi_text), "%s", abi_check.program);
  }
  if (!abi_check.ok()) {
    return fail(Status::kMismatch, "%s", abi_check.message);
  }

  size_t buffers = 0;
  const Status placed = place_planned_buffers(&buffers);
  if (placed != Status::kOk) {
    return placed;
  }
  auto* planned = new (planned_storage)
      HierarchicalAllocator(Span<Span<uint8_t>>(planned_spans, buffers));
  auto* manager =
      new (manager_storage) MemoryManager(method_allocator, planned, temp_allocator());
  Result<Method> forward = program().load_method(kForward, manager);
  if (!forward.ok()) {
    return fail(Status::kLoadFailed,
                "forward cannot be loaded (error 0x%x): an operator may be missing from the "
                "image (or ExecuTorch's kernel registry full: "
                "CONFIG_CORTEX_M_NN_KERNEL_REGISTRY_EXTRA), or the method allocator (%u B) may "
                "be too small (raise CONFIG_CORTEX_M_NN_METHOD_ALLOCATOR_MARGIN)",
                static_cast<unsigned>(forward.error()), static_cast<unsigned>(sizeof(method_pool)));
  }
  new (method_storage) Method(std::move(forward.get()));
  Status checked = check_io_types();  // both read the method directly, before loaded_
  if (checked == Status::kOk) {
    checked = prove_forward();
  }
  if (checked != Status::kOk) {
    return checked;
  }
  loaded_ = true;
  error_text[0] = '\0';
  return Status::kOk;
}

// Every kernel call of forward checks its arguments once, here (cortex_m_nn::prove; forward's
// argument lists lie in method_pool); other kernels (fp32 fallbacks) compute on a zeroed arena
// meanwhile: safe, as the only buffers kept between runs are SVDF states (zero when loaded).
Status Model::prove_forward() {
  memset(arena, 0, sizeof(arena));
  size_t instruction = 0;
  const Error error =
      prove(method(), method_pool, method_pool + sizeof(method_pool), &instruction, &plan);
  if (error == Error::OperatorMissing) {  // the generated registration's missing_case
    return fail(Status::kLoadFailed, "instruction %u of forward calls a kernel case this image "
                "does not link: build the image for this .pte", static_cast<unsigned>(instruction));
  }
  if (error != Error::Ok) {
    return fail(Status::kLoadFailed, "instruction %u of forward refused its arguments (error "
                "0x%x): the log names the kernel and why; recompile the model with this "
                "cortex-m-compile for this target", static_cast<unsigned>(instruction),
                static_cast<unsigned>(error));
  }
  return Status::kOk;
}

Status Model::check_io_types() {
  const MethodMeta meta = method().method_meta();
  const size_t inputs = method().inputs_size();
  const size_t outputs = method().outputs_size();
  if (inputs > kInputTypes || outputs > kOutputTypes) {
    return fail(Status::kMismatch, "forward has %u inputs and %u outputs; cortex_m_nn_model.h "
                "records %u and %u: regenerate it from this .pte",
                static_cast<unsigned>(inputs), static_cast<unsigned>(outputs),
                static_cast<unsigned>(kInputTypes), static_cast<unsigned>(kOutputTypes));
  }
  for (size_t i = 0; i < inputs + outputs; ++i) {
    const bool input = i < inputs;
    const size_t index = input ? i : i - inputs;
    Result<TensorInfo> info =
        input ? meta.input_tensor_meta(index) : meta.output_tensor_meta(index);
    const bool int8 = input ? input_is_int8(index) : output_is_int8(index);
    const ScalarType expected = int8 ? ScalarType::Char : ScalarType::Float;
    if (!info.ok() || info->scalar_type() != expected) {
      return fail(Status::kMismatch, "%s %u of forward is not %s as cortex_m_nn_model.h "
                  "records: regenerate it from this .pte", input ? "input" : "output",
                  static_cast<unsigned>(index), int8 ? "int8" : "float");
    }
  }
  return Status::kOk;
}

bool Model::input_is_int8(size_t index) { return index < kInputTypes && kInputInt8[index]; }
bool Model::output_is_int8(size_t index) { return index < kOutputTypes && kOutputInt8[index]; }

Quantization Model::input_quantization(size_t index) {
  if (!input_is_int8(index)) {
    return {0.0f, 0};
  }
  return {kInputScales[index], kInputZeroPoints[index]};
}

Quantization Model::output_quantization(size_t index) {
  if (!output_is_int8(index)) {
    return {0.0f, 0};
  }
  return {kOutputScales[index], kOutputZeroPoints[index]};
}

size_t Model::num_inputs() const { return loaded_ ? method().inputs_size() : 0; }
size_t Model::num_outputs() const { return loaded_ ? method().outputs_size() : 0; }

size_t Model::input_size(size_t index) const {
  if (!loaded_ || index >= method().inputs_size()) {
    return 0;
  }
  Result<TensorInfo> info = method().method_meta().input_tensor_meta(index);
  return info.ok() ? numel(info.get()) : 0;
}

size_t Model::output_size(size_t index) const {
  if (!loaded_ || index >= method().outputs_size()) {
    return 0;
  }
  Result<TensorInfo> info = method().method_meta().output_tensor_meta(index);
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
  if (index >= method().inputs_size() || index >= kMaxInputs) {
    return fail(Status::kBadInput, "no input %u (forward has %u)", static_cast<unsigned>(index),
                static_cast<unsigned>(method().inputs_size()));
  }
  Result<TensorInfo> info = method().method_meta().input_tensor_meta(index);
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
  static executorch::aten::SizesType sizes[kMaxDims];
  static executorch::aten::DimOrderType dim_order[kMaxDims];
  static executorch::aten::StridesType strides[kMaxDims];
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
  Error error = method().set_input(EValue(executorch::aten::Tensor(&impl)), index);
  if (error != Error::Ok) {
    return fail(Status::kBadInput, "input %u refused (error 0x%x)", static_cast<unsigned>(index),
                static_cast<unsigned>(error));
  }
  return Status::kOk;
}

Status Model::run() {
  if (!loaded_) {
    return fail(Status::kNotLoaded, "run before a successful load()");
  }
  Error error = method().execute();
  if (error != Error::Ok) {
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
  Method& forward = method();
  size_t call = 0;
  do {  // step() runs one instruction; in_progress() is false once the last one ran
    if (before != nullptr) {
      before(call, context);
    }
    const Error error = forward.step();
    if (after != nullptr) {
      after(call, context);
    }
    if (error != Error::Ok) {
      return fail(Status::kRunFailed,
                  "forward failed at kernel call %u (error 0x%x); the log names the kernel",
                  static_cast<unsigned>(call), static_cast<unsigned>(error));
    }
    ++call;
  } while (forward.in_progress());
  const Error reset = forward.reset_execution();
  if (reset != Error::Ok) {
    return fail(Status::kRunFailed, "forward did not reach its end (error 0x%x)",
                static_cast<unsigned>(reset));
  }
  return Status::kOk;
}
#pragma GCC diagnostic pop

Tensor Model::output(size_t index) const {
  if (!loaded_ || index >= method().outputs_size()) {
    return {nullptr, 0};
  }
  const EValue& value = method().get_output(index);
  if (!value.isTensor()) {
    return {nullptr, 0};
  }
  const executorch::aten::Tensor& tensor = value.toTensor();
  if (tensor.scalar_type() != ScalarType::Float) {
    return {nullptr, 0};
  }
  return {tensor.const_data_ptr<float>(), static_cast<size_t>(tensor.numel())};
}

QuantizedTensor Model::quantized_output(size_t index) const {
  if (!loaded_ || index >= method().outputs_size()) {
    return {nullptr, 0, {0.0f, 0}};
  }
  const EValue& value = method().get_output(index);
  if (!value.isTensor() || value.toTensor().scalar_type() != ScalarType::Char) {
    return {nullptr, 0, {0.0f, 0}};
  }
  const executorch::aten::Tensor& tensor = value.toTensor();
  return {tensor.const_data_ptr<int8_t>(), static_cast<size_t>(tensor.numel()),
          output_quantization(index)};
}

}  // namespace cortex_m_nn
