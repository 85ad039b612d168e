// Bare-metal runner: loads the embedded .pte with ExecuTorch's runtime, checks that it was
// compiled for these kernels (ISA, rounding, operator version), runs `forward` once on the
// embedded inputs and compares every output byte with the embedded expected outputs (the
// Python reference's). Output over semihosting; exit status 0 = bit-exact, 1 = mismatch,
// 2 = setup error (load, metadata, memory plan).
//
// Memory comes from the .pte, never guessed: one static buffer per planned buffer of
// `forward` (sizes generated from the program by gen_model.py and checked against MethodMeta
// at run time), and a method allocator of twice the compile report's runtime estimate
// (gen_model.py); the bytes it actually used are printed.
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <executorch/extension/data_loader/buffer_data_loader.h>
#include <executorch/runtime/core/hierarchical_allocator.h>
#include <executorch/runtime/core/memory_allocator.h>
#include <executorch/runtime/executor/memory_manager.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/program.h>
#include <executorch/runtime/platform/platform.h>
#include <executorch/runtime/platform/runtime.h>

extern "C" {
#include "bench.h"
#include "model_pte.h"
#include "runner_model.h"
const char* cortex_m_nn_kernels_abi(void);
}

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
using executorch::runtime::etensor::Tensor;
using executorch::runtime::etensor::TensorImpl;

namespace {

constexpr int kPass = 0;
constexpr int kMismatch = 1;
constexpr int kSetupError = 2;

// The planned buffers of `forward`, one static array each, sizes from the .pte.
alignas(16) uint8_t method_pool[RUNNER_METHOD_ALLOCATOR_BYTES];
alignas(16) uint8_t metadata_pool[1024];
#include "runner_planned.inc"  // generated: one static pool per planned buffer, planned_spans[]

uint32_t fnv1a(const uint8_t* data, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; ++i) h = (h ^ data[i]) * 16777619u;
  return h;
}

// A metadata method's value as text (strings as they are, integers in decimal).
bool metadata(Program& program, const char* name, char* out, size_t capacity) {
  MemoryAllocator allocator(sizeof(metadata_pool), metadata_pool);
  MemoryManager manager(&allocator);
  Result<Method> method = program.load_method(name, &manager);
  if (!method.ok() || method->execute() != Error::Ok || method->outputs_size() != 1) {
    std::printf("runner: the program has no usable %s method: not compiled by cortex-m-compile\n",
                name);
    return false;
  }
  const EValue& value = method->get_output(0);
  if (value.isString()) {
    auto text = value.toString();
    std::snprintf(out, capacity, "%.*s", static_cast<int>(text.size()), text.data());
  } else if (value.isInt()) {
    std::snprintf(out, capacity, "%" PRId64, value.toInt());
  } else {
    return false;
  }
  return true;
}

bool check_abi(Program& program) {
  char isa[16], rounding[16], version[16], compiled[80];
  if (!metadata(program, "cortex_m_nn_isa", isa, sizeof isa) ||
      !metadata(program, "cortex_m_nn_rounding", rounding, sizeof rounding) ||
      !metadata(program, "cortex_m_nn_ops_version", version, sizeof version)) {
    return false;
  }
  std::snprintf(compiled, sizeof compiled, "isa=%s rounding=%s ops_version=%s", isa, rounding,
                version);
  const char* kernels = cortex_m_nn_kernels_abi();
  std::printf("runner: program %s; kernels %s\n", compiled, kernels);
  if (std::strcmp(compiled, kernels) != 0) {
    std::printf("runner: the .pte was compiled for other kernels: recompile it for this core\n");
    return false;
  }
  return true;
}

}  // namespace

extern "C" void et_pal_emit_log_message(et_timestamp_t, et_pal_log_level_t level, const char* file,
                                        const char*, size_t line, const char* message, size_t) {
  std::printf("ET %c %s:%u %s\n", static_cast<char>(level), file, static_cast<unsigned>(line),
              message);
}

extern "C" void et_pal_abort(void) {
  std::printf("runner: ExecuTorch aborted\n");
  std::exit(kSetupError);
}

int main() {
  executorch::runtime::runtime_init();
  BufferDataLoader loader(cortex_m_nn_model, cortex_m_nn_model_size);
  Result<Program> program = Program::load(&loader);
  if (!program.ok()) {
    std::printf("runner: Program::load failed (error 0x%x)\n", static_cast<unsigned>(program.error()));
    return kSetupError;
  }
  if (!check_abi(*program)) return kSetupError;

  Result<MethodMeta> meta = program->method_meta("forward");
  if (!meta.ok()) {
    std::printf("runner: the program has no forward method\n");
    return kSetupError;
  }
  if (meta->num_memory_planned_buffers() != RUNNER_NUM_PLANNED_BUFFERS) {
    std::printf("runner: the program plans %u buffers, the runner was built for %u\n",
                static_cast<unsigned>(meta->num_memory_planned_buffers()),
                static_cast<unsigned>(RUNNER_NUM_PLANNED_BUFFERS));
    return kSetupError;
  }
  size_t planned_total = 0;
  for (size_t i = 0; i < RUNNER_NUM_PLANNED_BUFFERS; ++i) {
    Result<int64_t> size = meta->memory_planned_buffer_size(i);
    if (!size.ok() || static_cast<size_t>(*size) != runner_planned_buffer_sizes[i]) {
      std::printf("runner: planned buffer %u differs from the one the runner was built for\n",
                  static_cast<unsigned>(i));
      return kSetupError;
    }
    planned_total += runner_planned_buffer_sizes[i];
  }

  MemoryAllocator method_allocator(sizeof(method_pool), method_pool);
  HierarchicalAllocator planned(
      Span<Span<uint8_t>>(planned_spans, RUNNER_NUM_PLANNED_BUFFERS));
  MemoryManager memory(&method_allocator, &planned);
  Result<Method> method = program->load_method("forward", &memory);
  if (!method.ok()) {
    std::printf("runner: load_method(forward) failed (error 0x%x)\n",
                static_cast<unsigned>(method.error()));
    return kSetupError;
  }
  std::printf("runner: planned arena %u B in %u buffer(s); method allocator %u of %u B used "
              "(estimate %u B)\n",
              static_cast<unsigned>(planned_total), static_cast<unsigned>(RUNNER_NUM_PLANNED_BUFFERS),
              static_cast<unsigned>(method_allocator.used_size()),
              static_cast<unsigned>(sizeof(method_pool)),
              static_cast<unsigned>(RUNNER_METHOD_ALLOCATOR_ESTIMATE));

  if (method->inputs_size() != RUNNER_NUM_INPUTS || method->outputs_size() != RUNNER_NUM_OUTPUTS) {
    std::printf("runner: forward takes %u inputs and gives %u outputs; embedded data has %u/%u\n",
                static_cast<unsigned>(method->inputs_size()),
                static_cast<unsigned>(method->outputs_size()), RUNNER_NUM_INPUTS,
                RUNNER_NUM_OUTPUTS);
    return kSetupError;
  }
  // Each input as a tensor of the shape and type forward expects; set_input copies it into
  // the planned input buffer.
  for (size_t i = 0; i < RUNNER_NUM_INPUTS; ++i) {
    Result<TensorInfo> info = meta->input_tensor_meta(i);
    if (!info.ok() || info->nbytes() != runner_input_bytes[i]) {
      std::printf("runner: input %u is not a tensor of %u bytes\n", static_cast<unsigned>(i),
                  static_cast<unsigned>(runner_input_bytes[i]));
      return kSetupError;
    }
    TensorImpl impl(info->scalar_type(), static_cast<ssize_t>(info->sizes().size()),
                    const_cast<TensorImpl::SizesType*>(info->sizes().data()),
                    const_cast<unsigned char*>(runner_inputs[i]),
                    const_cast<TensorImpl::DimOrderType*>(info->dim_order().data()));
    Error set = method->set_input(EValue(Tensor(&impl)), i);
    if (set != Error::Ok) {
      std::printf("runner: set_input(%u) failed (error 0x%x)\n", static_cast<unsigned>(i),
                  static_cast<unsigned>(set));
      return kSetupError;
    }
  }

  bench_start();
  Error status = method->execute();
  bench_stop();
  if (status != Error::Ok) {
    std::printf("runner: forward failed (error 0x%x)\n", static_cast<unsigned>(status));
    return kSetupError;
  }

  int result = kPass;
  for (size_t i = 0; i < RUNNER_NUM_OUTPUTS; ++i) {
    const EValue& output = method->get_output(i);
    if (!output.isTensor()) {
      std::printf("runner: output %u is not a tensor\n", static_cast<unsigned>(i));
      return kSetupError;
    }
    const auto& tensor = output.toTensor();
    const uint8_t* bytes = tensor.const_data_ptr<uint8_t>();
    const size_t n = tensor.nbytes();
    size_t differing = 0;
    if (n != runner_expected_bytes[i]) {
      differing = n > runner_expected_bytes[i] ? n : runner_expected_bytes[i];
    } else {
      for (size_t b = 0; b < n; ++b) differing += bytes[b] != runner_expected[i][b];
    }
    std::printf("output %u: %u bytes, fnv1a %08" PRIx32 ", %u bytes differ from the reference\n",
                static_cast<unsigned>(i), static_cast<unsigned>(n), fnv1a(bytes, n),
                static_cast<unsigned>(differing));
    std::printf("output %u hex:", static_cast<unsigned>(i));
    for (size_t b = 0; b < n; ++b) std::printf("%02x", bytes[b]);
    std::printf("\n");
    if (differing) result = kMismatch;
  }
  std::printf("runner: %s\n", result == kPass ? "PASS (bit-exact)" : "FAIL (outputs differ)");
  return result;
}
