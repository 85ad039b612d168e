// The peer's bare-metal runner (benchmark only): loads the embedded .pte that ExecuTorch's own
// Cortex-M pipeline compiled, with ExecuTorch's runtime and the kernels registered by its
// codegen (backends/cortex_m + the portable kernels the program calls), sets the embedded
// inputs (copied into the program's planned input tensors), runs forward once between
// bench_start() and bench_stop() (exactly one Method::execute(), counted by the insncount QEMU
// plugin) and prints every output's bytes. Exit status 0 = ran, 2 = setup or run error.
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <executorch/extension/data_loader/buffer_data_loader.h>
#include <executorch/runtime/core/exec_aten/util/dim_order_util.h>
#include <executorch/runtime/core/hierarchical_allocator.h>
#include <executorch/runtime/core/memory_allocator.h>
#include <executorch/runtime/executor/memory_manager.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/program.h>
#include <executorch/runtime/platform/runtime.h>

extern "C" {
#include "bench.h"
extern const uint8_t peer_pte[], peer_pte_end[];
extern const uint8_t peer_inputs[], peer_inputs_end[];
}

namespace {

using executorch::aten::DimOrderType;
using executorch::aten::SizesType;
using executorch::aten::StridesType;
using executorch::aten::Tensor;
using executorch::aten::TensorImpl;
using executorch::runtime::dim_order_to_stride;
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

constexpr int kSetupError = 2;
constexpr size_t kAlignment = 16;
// The program's planned buffers (non_const_buffer_sizes, read from the .pte at configure time;
// buffer 0 is the memory planner's empty one), all in one static arena.
constexpr size_t kPlannedSizes[] = {PEER_PLANNED_BUFFERS};
constexpr size_t kPlannedBuffers = sizeof(kPlannedSizes) / sizeof(kPlannedSizes[0]);
constexpr size_t aligned(size_t n) { return (n + kAlignment - 1) / kAlignment * kAlignment; }
constexpr size_t arena_bytes() {
  size_t total = 0;
  for (size_t size : kPlannedSizes) total += aligned(size);
  return total > 0 ? total : 1;
}

alignas(kAlignment) uint8_t arena[arena_bytes()];
alignas(kAlignment) uint8_t method_pool[PEER_METHOD_ALLOCATOR_BYTES];
#if PEER_TEMP_ALLOCATOR_BYTES > 0
alignas(kAlignment) uint8_t temp_pool[PEER_TEMP_ALLOCATOR_BYTES];
#endif
Span<uint8_t> planned_spans[kPlannedBuffers];

int fail(const char* what, Error error) {
  std::printf("peer: %s failed (error 0x%x)\n", what, static_cast<unsigned>(error));
  return kSetupError;
}

// Sets forward's inputs from the embedded bytes, in order, each laid out in the dim order the
// program declares for it (set_input copies them into the planned input tensors).
int set_inputs(Method& method) {
  constexpr size_t kMaxDims = 8;
  const MethodMeta meta = method.method_meta();
  const uint8_t* data = peer_inputs;
  for (size_t i = 0; i < method.inputs_size(); ++i) {
    Result<TensorInfo> info = meta.input_tensor_meta(i);
    if (!info.ok()) return fail("input_tensor_meta", info.error());
    const size_t dims = info->sizes().size();
    if (dims > kMaxDims) return fail("input rank", Error::NotSupported);
    SizesType sizes[kMaxDims];
    DimOrderType dim_order[kMaxDims];
    StridesType strides[kMaxDims];
    for (size_t d = 0; d < dims; ++d) {
      sizes[d] = info->sizes()[d];
      dim_order[d] = info->dim_order()[d];
    }
    Error error = dim_order_to_stride(sizes, dim_order, dims, strides);
    if (error != Error::Ok) return fail("dim_order_to_stride", error);
    if (data + info->nbytes() > peer_inputs_end) {
      return fail("inputs too short", Error::InvalidArgument);
    }
    TensorImpl impl(info->scalar_type(), static_cast<ssize_t>(dims), sizes,
                    const_cast<uint8_t*>(data), dim_order, strides);
    error = method.set_input(EValue(Tensor(&impl)), i);
    if (error != Error::Ok) return fail("set_input", error);
    data += info->nbytes();
  }
  if (data != peer_inputs_end) return fail("inputs too long", Error::InvalidArgument);
  return 0;
}

void print_outputs(const Method& method) {
  for (size_t i = 0; i < method.outputs_size(); ++i) {
    const EValue& value = method.get_output(i);
    if (!value.isTensor()) {
      std::printf("output %u is not a tensor\n", static_cast<unsigned>(i));
      continue;
    }
    const Tensor& tensor = value.toTensor();
    const auto* bytes = static_cast<const uint8_t*>(tensor.const_data_ptr());
    std::printf("output %u: %u bytes, dtype %d\n", static_cast<unsigned>(i),
                static_cast<unsigned>(tensor.nbytes()), static_cast<int>(tensor.scalar_type()));
    std::printf("output %u hex:", static_cast<unsigned>(i));
    for (size_t b = 0; b < tensor.nbytes(); ++b) std::printf("%02x", bytes[b]);
    std::printf("\n");
  }
}

}  // namespace

int main() {
  executorch::runtime::runtime_init();
  BufferDataLoader loader(peer_pte, static_cast<size_t>(peer_pte_end - peer_pte));
  Result<Program> program = Program::load(&loader);
  if (!program.ok()) return fail("Program::load", program.error());
  Result<const char*> name = program->get_method_name(0);
  if (!name.ok()) return fail("get_method_name", name.error());
  Result<MethodMeta> meta = program->method_meta(*name);
  if (!meta.ok()) return fail("method_meta", meta.error());
  if (meta->num_memory_planned_buffers() != kPlannedBuffers) {
    return fail("planned buffer count (rebuild with this .pte)", Error::InvalidProgram);
  }
  size_t offset = 0;
  for (size_t i = 0; i < kPlannedBuffers; ++i) {
    Result<int64_t> size = meta->memory_planned_buffer_size(i);
    if (!size.ok() || static_cast<size_t>(*size) != kPlannedSizes[i]) {
      return fail("planned buffer size (rebuild with this .pte)", Error::InvalidProgram);
    }
    planned_spans[i] = Span<uint8_t>(arena + offset, kPlannedSizes[i]);
    offset += aligned(kPlannedSizes[i]);
  }
  MemoryAllocator method_allocator(sizeof(method_pool), method_pool);
  HierarchicalAllocator planned(Span<Span<uint8_t>>(planned_spans, kPlannedBuffers));
#if PEER_TEMP_ALLOCATOR_BYTES > 0
  MemoryAllocator temp_allocator(sizeof(temp_pool), temp_pool);
  MemoryManager memory(&method_allocator, &planned, &temp_allocator);
#else
  // without a temporary allocator, the runtime's kernel lookup scratch (a TensorMeta and a dim
  // order per argument of each operator) stays in the method allocator, as in our runner
  MemoryManager memory(&method_allocator, &planned);
#endif
  Result<Method> method = program->load_method(*name, &memory);
  if (!method.ok()) return fail("load_method", method.error());
  std::printf("peer: method %s; planned arena %u B in %u buffer(s); method allocator %u of %u "
              "B used\n", *name, static_cast<unsigned>(offset),
              static_cast<unsigned>(kPlannedBuffers),
              static_cast<unsigned>(method_allocator.used_size()),
              static_cast<unsigned>(sizeof(method_pool)));
  if (set_inputs(*method) != 0) return kSetupError;

  bench_start();
  Error error = method->execute();
  bench_stop();
  if (error != Error::Ok) return fail("execute", error);
  print_outputs(*method);
  return 0;
}
