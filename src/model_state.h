// What a cortex_m_nn::Model keeps (inside its state_ bytes) and what the embedded model adds:
// shared by src/model.cpp (every model) and src/model_embedded.cpp (the model built into the
// image). Internal to the firmware API.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <executorch/extension/data_loader/buffer_data_loader.h>
#include <executorch/runtime/core/hierarchical_allocator.h>
#include <executorch/runtime/core/memory_allocator.h>
#include <executorch/runtime/executor/memory_manager.h>
#include <executorch/runtime/executor/method.h>
#include <executorch/runtime/executor/program.h>

#include "cortex_m_nn/call_mode.h"
#include "cortex_m_nn/model.h"
#include "cortex_m_nn/prepared.h"

namespace cortex_m_nn {

inline constexpr size_t kMaxIo = 8;              // inputs (and outputs) a model records
inline constexpr size_t kMaxPlannedBuffers = 4;  // planned buffers of one forward

// Each input's and output's type and quantization.
struct IoTypes {
  size_t inputs = 0;
  size_t outputs = 0;
  uint8_t input_int8[kMaxIo] = {};
  uint8_t output_int8[kMaxIo] = {};
  float input_scales[kMaxIo] = {};
  float output_scales[kMaxIo] = {};
  int32_t input_zero_points[kMaxIo] = {};
  int32_t output_zero_points[kMaxIo] = {};
};

// The embedded model: its program, its memory as the build sized it, its prepared calls and
// its inputs' and outputs' types (cortex_m_nn_model.h).
struct Model::Embedded {
  ModelMemory memory;
  const uint8_t* program;
  size_t program_bytes;
  const size_t* planned_sizes;  // what the build reserved for each planned buffer
  size_t planned_buffers;
  const cortex_m_nn_prepared_call* prepared;
  size_t prepared_calls;
  const void** prepared_arguments;  // prepared_calls + 1 of them
  IoTypes io;
};

// ExecuTorch's objects of one model, constructed in place by load (they have no default
// constructor), and the model's messages.
struct Model::State {
  ModelMemory memory{};
  const Model::Embedded* embedded = nullptr;
  IoTypes io;
  CallPlan plan;
  bool has_program = false;
  bool has_method = false;
  bool proven = false;  // a call-mode range registered for the method's allocator
  const uint8_t* image = nullptr;  // the program image in service (load(image, size))
  size_t image_bytes = 0;
  alignas(executorch::extension::BufferDataLoader)
      uint8_t loader[sizeof(executorch::extension::BufferDataLoader)];
  alignas(executorch::runtime::Program) uint8_t program[sizeof(executorch::runtime::Program)];
  alignas(executorch::runtime::Method) uint8_t method[sizeof(executorch::runtime::Method)];
  alignas(executorch::runtime::MemoryAllocator)
      uint8_t method_allocator[sizeof(executorch::runtime::MemoryAllocator)];
  alignas(executorch::runtime::MemoryAllocator)
      uint8_t temp_allocator[sizeof(executorch::runtime::MemoryAllocator)];
  alignas(executorch::runtime::HierarchicalAllocator)
      uint8_t planned[sizeof(executorch::runtime::HierarchicalAllocator)];
  alignas(executorch::runtime::MemoryManager)
      uint8_t manager[sizeof(executorch::runtime::MemoryManager)];
  executorch::runtime::Span<uint8_t> spans[kMaxPlannedBuffers];
  char error[288] = "";
  char abi[96] = "unknown";
};

namespace detail {

inline executorch::runtime::Program& program_of(Model::State& s) {
  return *reinterpret_cast<executorch::runtime::Program*>(s.program);
}
inline executorch::runtime::Method& method_of(Model::State& s) {
  return *reinterpret_cast<executorch::runtime::Method*>(s.method);
}
inline executorch::runtime::MemoryAllocator& method_allocator_of(Model::State& s) {
  return *reinterpret_cast<executorch::runtime::MemoryAllocator*>(s.method_allocator);
}
inline uint8_t* bytes_of(void* memory) { return static_cast<uint8_t*>(memory); }

// Elements of a tensor of `info`'s sizes.
inline size_t numel(const executorch::runtime::TensorInfo& info) {
  size_t count = 1;
  for (int32_t size : info.sizes()) {
    count *= static_cast<size_t>(size);
  }
  return count;
}

}  // namespace detail
}  // namespace cortex_m_nn
