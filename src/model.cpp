// cortex_m_nn::Model: a program run by ExecuTorch in memory reserved at build time — the
// embedded one (src/model_embedded.cpp gives it its memory and prepared calls) or a program
// image loaded at run time (include/cortex_m_nn/program_image.h checks it first). Loading and
// proving here; inputs, runs and outputs in src/model_run.cpp.
//
// Built by the Zephyr module (CMakeLists.txt) and the bare-metal runner (tests/target/runner)
// with the kernels' cortex_m_nn/abi.h (what they were built for) and the generated
// registration's list of linked kernel cases; nothing Zephyr-specific: host tests build it.
#include "cortex_m_nn/model.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <new>

#include <executorch/runtime/platform/runtime.h>

#include "cortex_m_nn/abi.h"
#include "cortex_m_nn/program_image.h"
#include "model_state.h"

// The kernel cases this image links (the generated registration, cortex_m_nn_register.cpp).
extern "C" const char* const cortex_m_nn_linked_cases[];
extern "C" const size_t cortex_m_nn_linked_case_count;

namespace cortex_m_nn {

namespace {

using executorch::aten::ScalarType;
using detail::bytes_of;
using detail::method_allocator_of;
using detail::method_of;
using detail::program_of;
using executorch::extension::BufferDataLoader;
using executorch::runtime::Error;
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
constexpr const char* kForward = "forward";

size_t aligned(size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

// What this firmware offers a program image: its kernels' ABI and linked cases, `memory`.
ImageLimits limits_of(const ModelMemory& memory) {
#if defined(CMSIS_NN_USE_SINGLE_ROUNDING)
  constexpr uint8_t kRoundingCode = 1;
#else
  constexpr uint8_t kRoundingCode = 0;
#endif
  return ImageLimits{static_cast<uint32_t>(abi::kOpsVersion),
                     static_cast<uint8_t>(CORTEX_M_NN_ABI_ISA),
                     kRoundingCode,
                     memory.arena_bytes,
                     memory.method_allocator_bytes,
                     memory.temp_allocator_bytes,
                     cortex_m_nn_linked_cases,
                     cortex_m_nn_linked_case_count};
}

IoTypes io_of(const ProgramImage& image) {
  IoTypes io;
  io.inputs = image.inputs;
  io.outputs = image.outputs;
  for (size_t i = 0; i < kMaxIo; ++i) {
    io.input_int8[i] = image.input_int8[i];
    io.output_int8[i] = image.output_int8[i];
    io.input_scales[i] = image.input_scales[i];
    io.output_scales[i] = image.output_scales[i];
    io.input_zero_points[i] = image.input_zero_points[i];
    io.output_zero_points[i] = image.output_zero_points[i];
  }
  return io;
}

// The model's memory manager: its method allocator, the `buffers` planned buffers placed in
// its arena, its temporary allocator (none when it has no bytes).
MemoryManager* memory_manager(Model::State& s, size_t buffers) {
  auto* planned = new (s.planned) HierarchicalAllocator(Span<Span<uint8_t>>(s.spans, buffers));
  MemoryAllocator* temp = nullptr;
  if (s.memory.temp_allocator_bytes > 0) {
    temp = new (s.temp_allocator) MemoryAllocator(
        static_cast<uint32_t>(s.memory.temp_allocator_bytes), bytes_of(s.memory.temp_allocator));
  }
  return new (s.manager) MemoryManager(&method_allocator_of(s), planned, temp);
}

}  // namespace

const char* to_string(Status status) {
  static const char* const kNames[] = {  // in the order of Status
      "ok",        "not loaded", "load failed", "compiled for other kernels",
      "bad input", "run failed", "bad program image"};
  const size_t index = static_cast<size_t>(status);
  return index < sizeof(kNames) / sizeof(kNames[0]) ? kNames[index] : "unknown";
}

Model::Model(const ModelMemory& memory) {
  static_assert(sizeof(State) <= kModelStateBytes,
                "cortex_m_nn::Model's state outgrew kModelStateBytes "
                "(include/cortex_m_nn/model.h): raise it");
  State* s = new (state_) State();
  s->memory = memory;
}

Model::Model(const Embedded& embedded) {
  State* s = new (state_) State();
  s->memory = embedded.memory;
  s->embedded = &embedded;
  s->io = embedded.io;
  s->plan = CallPlan{embedded.prepared, embedded.prepared_calls, embedded.prepared_arguments};
}

Model::~Model() {
  unload();
  state().~State();
}

Model::State& Model::state() const {
  return *reinterpret_cast<State*>(const_cast<unsigned char*>(state_));
}

const char* Model::error() const { return state().error; }
const char* Model::model_abi() const { return state().abi; }
const char* Model::kernels_abi() { return abi::kText; }
size_t Model::arena_bytes() const { return state().memory.arena_bytes; }
size_t Model::method_allocator_bytes() const { return state().memory.method_allocator_bytes; }
size_t Model::method_allocator_used() const {
  return loaded_ ? method_allocator_of(state()).used_size() : 0;
}

Status Model::fail(Status status, const char* format, ...) {
  va_list arguments;
  va_start(arguments, format);
  vsnprintf(state().error, sizeof(state().error), format, arguments);
  va_end(arguments);
  return status;
}

void Model::unload() {
  State& s = state();
  if (s.proven) {  // the method's calls forget their mode: its allocator is about to be reused
    uint8_t* pool = bytes_of(s.memory.method_allocator);
    set_call_mode(pool, pool + s.memory.method_allocator_bytes, CallMode::kChecked, nullptr);
    s.proven = false;
  }
  if (s.has_method) {
    method_of(s).~Method();
    s.has_method = false;
  }
  if (s.has_program) {
    program_of(s).~Program();
    s.has_program = false;
  }
  s.image = nullptr;
  s.image_bytes = 0;
  loaded_ = false;
}

Status Model::load() {
  if (loaded_) {
    return Status::kOk;
  }
  const Embedded* embedded = state().embedded;
  if (embedded == nullptr) {
    return fail(Status::kNotLoaded, "this model has no embedded program: load(image, size)");
  }
  return load_program(embedded->program, embedded->program_bytes);
}

Status Model::load(const void* image, size_t size) {
  if (state().embedded != nullptr) {
    return fail(Status::kLoadFailed, "the embedded model runs its own program: give the image "
                "to a Model constructed with its memory");
  }
  ProgramImage checked{};
  char why[sizeof(state().error)];
  const ImageStatus status =
      check_image(image, size, limits_of(state().memory), &checked, why, sizeof(why));
  if (status != ImageStatus::kOk) {  // nothing touched: a program loaded before runs on
    const bool damaged = status <= ImageStatus::kProgramDamaged;
    return fail(damaged ? Status::kBadImage : Status::kMismatch, "program image refused (%s): %s",
                image_status_name(status), why);
  }
  unload();
  state().io = io_of(checked);
  const Status loaded = load_program(checked.program, checked.program_bytes);
  if (loaded == Status::kOk) {
    state().image = static_cast<const uint8_t*>(image);
    state().image_bytes = size;
  }
  return loaded;
}

Status Model::load(ImageSource& source, void* buffer, size_t capacity) {
  State& s = state();
  uint8_t* const into = bytes_of(buffer);
  const uintptr_t at = reinterpret_cast<uintptr_t>(into);
  const uintptr_t image = reinterpret_cast<uintptr_t>(s.image);
  if (loaded_ && s.image != nullptr && at < image + s.image_bytes && image < at + capacity) {
    return fail(Status::kLoadFailed, "%s: the buffer holds the program in service; read the "
                "update into another one", source.name());
  }
  if (into == nullptr || capacity < kImageHeaderBytes) {
    return fail(Status::kMismatch, "%s: a %u-byte buffer cannot hold a program image",
                source.name(), static_cast<unsigned>(capacity));
  }
  const size_t available = source.size();
  if (available < kImageHeaderBytes || !source.read(0, into, kImageHeaderBytes)) {
    return fail(Status::kBadImage, "%s cannot be read (%u B)", source.name(),
                static_cast<unsigned>(available));
  }
  // The image's length from its header, unchecked yet: load(buffer, size) checks it all.
  size_t size = image_length(into);
  if (size < kImageHeaderBytes) {
    size = kImageHeaderBytes;  // not an image, or a damaged one: check_image says which
  } else if (size > capacity || size > available) {
    const bool short_source = size > available;
    return fail(short_source ? Status::kBadImage : Status::kMismatch,
                "%s: its image needs %u B, the %s holds %u B", source.name(),
                static_cast<unsigned>(size), short_source ? "source" : "buffer",
                static_cast<unsigned>(short_source ? available : capacity));
  }
  if (size > kImageHeaderBytes &&
      !source.read(kImageHeaderBytes, into + kImageHeaderBytes, size - kImageHeaderBytes)) {
    return fail(Status::kBadImage, "%s cannot be read (%u B from byte %u)", source.name(),
                static_cast<unsigned>(size - kImageHeaderBytes),
                static_cast<unsigned>(kImageHeaderBytes));
  }
  return load(into, size);
}

Status Model::load_program(const void* bytes, size_t size) {
  unload();  // what a failed load left
  State& s = state();
  executorch::runtime::runtime_init();
  auto* loader = new (s.loader) BufferDataLoader(bytes, size);
  // A program from outside the image has its flatbuffer verified whole where the runtime has
  // the verifier (EXECUTORCH_ENABLE_PROGRAM_VERIFICATION; its CRC-32 caught damage, this
  // catches a program written to mislead); the embedded one is the build's own.
  const Program::Verification verification = s.embedded != nullptr
      ? Program::Verification::Minimal
      : Program::Verification::InternalConsistency;
  Result<Program> parsed = Program::load(loader, verification);
  if (!parsed.ok()) {
    return fail(Status::kLoadFailed, "the .pte cannot be read (error 0x%x)",
                static_cast<unsigned>(parsed.error()));
  }
  new (s.program) Program(std::move(parsed.get()));
  s.has_program = true;

  // What the program was compiled for, against what the kernels were built for.
  auto* method_allocator = new (s.method_allocator) MemoryAllocator(
      static_cast<uint32_t>(s.memory.method_allocator_bytes),
      bytes_of(s.memory.method_allocator));
  AbiCheck abi_check = check_program_abi(program_of(s), *method_allocator);
  if (abi_check.program[0] != '\0') {
    snprintf(s.abi, sizeof(s.abi), "%s", abi_check.program);
  }
  if (!abi_check.ok()) {
    return fail(Status::kMismatch, "%s", abi_check.message);
  }
  size_t buffers = 0;
  const Status placed = place_planned_buffers(&buffers);
  if (placed != Status::kOk) {
    return placed;
  }
  Result<Method> forward = program_of(s).load_method(kForward, memory_manager(s, buffers));
  if (!forward.ok()) {
    return fail(Status::kLoadFailed,
                "forward cannot be loaded (error 0x%x): an operator may be missing from the "
                "image (or ExecuTorch's kernel registry full: "
                "CONFIG_CORTEX_M_NN_KERNEL_REGISTRY_EXTRA), or the method allocator (%u B) may "
                "be too small (raise CONFIG_CORTEX_M_NN_METHOD_ALLOCATOR_MARGIN)",
                static_cast<unsigned>(forward.error()),
                static_cast<unsigned>(s.memory.method_allocator_bytes));
  }
  new (s.method) Method(std::move(forward.get()));
  s.has_method = true;
  Status checked = check_io_types();  // both read the method directly, before loaded_
  if (checked == Status::kOk) {
    checked = prove_forward();
  }
  if (checked != Status::kOk) {
    return checked;
  }
  loaded_ = true;
  s.error[0] = '\0';
  return Status::kOk;
}

// The planned buffers, carved out of the arena one after the other, 16-byte aligned: as the
// build sized them for the embedded model, as the program plans them for a loaded one.
Status Model::place_planned_buffers(size_t* count) {
  State& s = state();
  Result<MethodMeta> meta = program_of(s).method_meta(kForward);
  if (!meta.ok()) {
    return fail(Status::kLoadFailed, "the .pte has no forward method (error 0x%x)",
                static_cast<unsigned>(meta.error()));
  }
  const size_t buffers = meta->num_memory_planned_buffers();
  const Embedded* embedded = s.embedded;
  if (buffers > kMaxPlannedBuffers || (embedded && buffers != embedded->planned_buffers)) {
    return fail(Status::kLoadFailed, "forward plans %u buffers but the build reserved %u: "
                "rebuild with this .pte", static_cast<unsigned>(buffers),
                static_cast<unsigned>(embedded ? embedded->planned_buffers : kMaxPlannedBuffers));
  }
  size_t offset = 0;
  for (size_t i = 0; i < buffers; ++i) {
    Result<int64_t> size = meta->memory_planned_buffer_size(i);
    const size_t needed = size.ok() && size.get() >= 0 ? static_cast<size_t>(size.get()) : 0;
    const size_t reserved = embedded ? embedded->planned_sizes[i] : needed;
    if (!size.ok() || needed > reserved || offset + reserved > s.memory.arena_bytes) {
      return fail(Status::kLoadFailed, "planned buffer %u needs %ld B, which the arena (%u B) "
                  "does not hold: rebuild with this .pte", static_cast<unsigned>(i),
                  size.ok() ? static_cast<long>(size.get()) : -1L,
                  static_cast<unsigned>(s.memory.arena_bytes));
    }
    s.spans[i] = Span<uint8_t>(bytes_of(s.memory.arena) + offset, reserved);
    offset += aligned(reserved);
  }
  *count = buffers;
  return Status::kOk;
}

// Every kernel call of forward checks its arguments once, here (cortex_m_nn::prove; forward's
// argument lists lie in the method allocator), against the embedded model's prepared calls;
// other kernels (fp32 fallbacks) compute on a zeroed arena meanwhile: safe, as the only
// buffers kept between runs are states (zero when loaded).
Status Model::prove_forward() {
  State& s = state();
  memset(s.memory.arena, 0, s.memory.arena_bytes);
  size_t instruction = 0;
  uint8_t* pool = bytes_of(s.memory.method_allocator);
  CallPlan* plan = s.embedded ? &s.plan : nullptr;
  if (plan != nullptr) {
    plan->next = 0;
  }
  const Error error = prove(method_of(s), pool, pool + s.memory.method_allocator_bytes,
                            &instruction, plan);
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
  s.proven = true;
  return Status::kOk;
}

Status Model::check_io_types() {
  State& s = state();
  const MethodMeta meta = method_of(s).method_meta();
  const size_t inputs = method_of(s).inputs_size();
  const size_t outputs = method_of(s).outputs_size();
  if (inputs > s.io.inputs || outputs > s.io.outputs) {
    return fail(Status::kMismatch, "forward has %u inputs and %u outputs; the model records %u "
                "and %u: regenerate cortex_m_nn_model.h or the image from this .pte",
                static_cast<unsigned>(inputs), static_cast<unsigned>(outputs),
                static_cast<unsigned>(s.io.inputs), static_cast<unsigned>(s.io.outputs));
  }
  for (size_t i = 0; i < inputs + outputs; ++i) {
    const bool input = i < inputs;
    const size_t index = input ? i : i - inputs;
    Result<TensorInfo> info =
        input ? meta.input_tensor_meta(index) : meta.output_tensor_meta(index);
    const bool int8 = input ? input_is_int8(index) : output_is_int8(index);
    const ScalarType expected = int8 ? ScalarType::Char : ScalarType::Float;
    if (!info.ok() || info->scalar_type() != expected) {
      return fail(Status::kMismatch, "%s %u of forward is not %s as the model records: "
                  "regenerate cortex_m_nn_model.h or the image from this .pte",
                  input ? "input" : "output", static_cast<unsigned>(index),
                  int8 ? "int8" : "float");
    }
  }
  return Status::kOk;
}

}  // namespace cortex_m_nn
