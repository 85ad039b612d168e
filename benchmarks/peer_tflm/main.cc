// The TensorFlow Lite Micro + CMSIS-NN peer of the bare-metal runner: one embedded .tflite model
// (tflm_model.cc/.h, written at configure time by `peer_tflm.py embed`), its builtin operators
// registered in a MicroMutableOpResolver (exactly the model's), a static arena of
// TFLM_ARENA_BYTES. Fills every int8 input with a fixed pattern, runs Invoke() once between
// bench_start() and bench_stop() (the first Invoke after AllocateTensors, no warm-up: as the
// runner measures its one execute), prints the arena used and each output (hex, FNV-1a) over
// semihosting. Exit status 0 = ran, 1 = Invoke failed, 2 = setup error. Built with
// TFLM_ARENA_PROBE, it first prints the smallest arena AllocateTensors accepts, which can exceed
// arena_used_bytes() (AD on M55: 9,712 B against 9,268 B).
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <new>

#include "tensorflow/lite/micro/micro_interpreter.h"
#include "tensorflow/lite/micro/micro_mutable_op_resolver.h"
#include "tensorflow/lite/schema/schema_generated.h"
#include "tflm_model.h"

extern "C" {
#include "bench.h"
}

namespace {

constexpr int kRan = 0;
constexpr int kInvokeFailed = 1;
constexpr int kSetupError = 2;

alignas(16) uint8_t arena[TFLM_ARENA_BYTES];

uint32_t fnv1a(const uint8_t* data, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; ++i) h = (h ^ data[i]) * 16777619u;
  return h;
}

// A deterministic pattern over the int8 range (a 32-bit LCG's high byte).
void fill(TfLiteTensor* tensor) {
  uint32_t state = 12345u;
  for (size_t i = 0; i < tensor->bytes; ++i) {
    state = state * 1664525u + 1013904223u;
    tensor->data.uint8[i] = static_cast<uint8_t>(state >> 24);
  }
}

void print_output(size_t index, const TfLiteTensor* tensor) {
  const size_t n = tensor->bytes;
  std::printf("output %u: %u bytes, fnv1a %08" PRIx32 "\n", static_cast<unsigned>(index),
              static_cast<unsigned>(n), fnv1a(tensor->data.uint8, n));
  std::printf("output %u hex:", static_cast<unsigned>(index));
  for (size_t b = 0; b < n; ++b) std::printf("%02x", tensor->data.uint8[b]);
  std::printf("\n");
}

#ifdef TFLM_ARENA_PROBE
// The smallest multiple of 16 B of arena with which AllocateTensors succeeds: bisection between
// arena_used_bytes() with the whole arena and the whole arena. Not below: in a much smaller
// arena TFLM's AllocateTensors wrote through a null pointer (AD on M55: the vector table at
// address 0 overwritten, then a lockup). The trials are never destroyed (nothing of theirs
// outlives `storage` and the arena, and a destructor after a failed AllocateTensors is not
// something TFLM tests).
size_t smallest_arena(const tflite::Model* model, const tflite::MicroOpResolver& resolver) {
  alignas(tflite::MicroInterpreter) static uint8_t storage[sizeof(tflite::MicroInterpreter)];
  auto* whole = new (storage) tflite::MicroInterpreter(model, resolver, arena, sizeof arena);
  if (whole->AllocateTensors() != kTfLiteOk) return sizeof arena;
  size_t low = (whole->arena_used_bytes() + 15) / 16, high = sizeof arena / 16;
  while (low < high) {
    const size_t middle = (low + high) / 2;
    auto* trial = new (storage) tflite::MicroInterpreter(model, resolver, arena, middle * 16);
    if (trial->AllocateTensors() == kTfLiteOk) {
      high = middle;
    } else {
      low = middle + 1;
    }
  }
  return high * 16;
}
#endif

}  // namespace

int main() {
  const tflite::Model* model = tflite::GetModel(tflm_model);
  if (model->version() != TFLITE_SCHEMA_VERSION) {
    std::printf("peer: model schema %u, TFLM reads %u\n", static_cast<unsigned>(model->version()),
                static_cast<unsigned>(TFLITE_SCHEMA_VERSION));
    return kSetupError;
  }
  tflite::MicroMutableOpResolver<kTflmModelOperators> resolver;
  if (tflm_add_operators(resolver) != kTfLiteOk) {
    std::printf("peer: registering the model's operators failed\n");
    return kSetupError;
  }
#ifdef TFLM_ARENA_PROBE
  const size_t smallest = smallest_arena(model, resolver);
  std::printf("peer: smallest arena %u B\n", static_cast<unsigned>(smallest));
#endif
  tflite::MicroInterpreter interpreter(model, resolver, arena, sizeof arena);
  if (interpreter.AllocateTensors() != kTfLiteOk) {
    std::printf("peer: AllocateTensors failed (arena %u B)\n", static_cast<unsigned>(sizeof arena));
    return kSetupError;
  }
  for (size_t i = 0; i < interpreter.inputs_size(); ++i) {
    TfLiteTensor* input = interpreter.input(i);
    if (input->type != kTfLiteInt8) {
      std::printf("peer: input %u is not int8\n", static_cast<unsigned>(i));
      return kSetupError;
    }
    fill(input);
  }

  bench_start();
  const TfLiteStatus status = interpreter.Invoke();
  bench_stop();

  std::printf("peer: arena %u of %u B used\n",
              static_cast<unsigned>(interpreter.arena_used_bytes()),
              static_cast<unsigned>(sizeof arena));
  if (status != kTfLiteOk) {
    std::printf("peer: Invoke failed\n");
    return kInvokeFailed;
  }
  for (size_t i = 0; i < interpreter.outputs_size(); ++i) print_output(i, interpreter.output(i));
  return kRan;
}
