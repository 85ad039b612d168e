// Bare-metal runner: the embedded model run through cortex-m-nn's firmware API
// (include/cortex_m_nn/model.h, src/model.cpp: the loader, ABI check and memory the Zephyr
// module builds) on the embedded test vector, every output byte compared with the expected
// outputs (the Python reference's); float or int8 inputs and outputs, as the model was compiled
// (--io) and the test vector holds them. Output over semihosting; exit status 0 = bit-exact,
// 1 = mismatch, 2 = setup error (load, ABI, memory plan, inputs, a failing kernel).
//
// The model and its sizes come from `cortex-m-compile embed` (cortex_m_nn_model.c/.h, as in
// the Zephyr build; the runner's CMake asks for a method allocator of exactly the report's
// runtime-overhead count), the inputs and expected outputs from cortex_m_nn.check.vector
// (cortex_m_nn_test_vector.h, the header `cortex-m-compile --test-vector` writes).
#include <cinttypes>
#include <cstdio>

#include "cortex_m_nn/model.h"
#include "cortex_m_nn_model.h"
#include "cortex_m_nn_test_vector.h"

extern "C" {
#include "bench.h"
}

namespace {

using cortex_m_nn::Model;
using cortex_m_nn::Status;

constexpr int kPass = 0;
constexpr int kMismatch = 1;
constexpr int kSetupError = 2;

uint32_t fnv1a(const uint8_t* data, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; ++i) h = (h ^ data[i]) * 16777619u;
  return h;
}

int setup_error(const char* what, Status status, const Model& model) {
  std::printf("runner: %s: %s: %s\n", what, cortex_m_nn::to_string(status), model.error());
  return kSetupError;
}

// Output `index` of the last run as bytes, float or int8 (--io int8); nullptr if neither.
const uint8_t* output_bytes(const Model& model, size_t index, size_t* n) {
  if (model.output_is_int8(index)) {
    cortex_m_nn::QuantizedTensor output = model.quantized_output(index);
    *n = output.size;
    return reinterpret_cast<const uint8_t*>(output.data);
  }
  cortex_m_nn::Tensor output = model.output(index);
  *n = output.size * sizeof(float);
  return reinterpret_cast<const uint8_t*>(output.data);
}

// The expected outputs of the second run: a model with states (SVDF) continues from the
// first run's, so the test vector holds that inference's outputs too.
#if defined(CORTEX_M_NN_TEST_NEXT_OUTPUTS)
const cortex_m_nn_test_output_t* const* const kSecondOutputs = cortex_m_nn_test_next_output;
#else
const cortex_m_nn_test_output_t* const* const kSecondOutputs = cortex_m_nn_test_output;
#endif

// Bytes of output `index` that differ from `expected[index]` (all of them if the sizes differ).
size_t differing_bytes(
    const Model& model, size_t index,
    const cortex_m_nn_test_output_t* const* expected_outputs = cortex_m_nn_test_output) {
  size_t n = 0;
  const uint8_t* bytes = output_bytes(model, index, &n);
  const auto* expected = reinterpret_cast<const uint8_t*>(expected_outputs[index]);
  const size_t expected_n =
      cortex_m_nn_test_output_size[index] * sizeof(cortex_m_nn_test_output_t);
  if (n != expected_n) {
    return n > expected_n ? n : expected_n;
  }
  size_t differing = 0;
  for (size_t b = 0; b < n; ++b) differing += bytes[b] != expected[b];
  return differing;
}

// Output `index` against the expected one, byte for byte; prints it. True when equal.
bool check_output(const Model& model, size_t index) {
  size_t n = 0;
  const uint8_t* bytes = output_bytes(model, index, &n);
  const size_t differing = differing_bytes(model, index);
  std::printf("output %u: %u bytes, fnv1a %08" PRIx32 ", %u bytes differ from the reference\n",
              static_cast<unsigned>(index), static_cast<unsigned>(n), fnv1a(bytes, n),
              static_cast<unsigned>(differing));
  std::printf("output %u hex:", static_cast<unsigned>(index));
  for (size_t b = 0; b < n; ++b) std::printf("%02x", bytes[b]);
  std::printf("\n");
  return differing == 0;
}

// run_profiled's hooks: each kernel call is one region of the insncount plugin.
void call_start(size_t, void*) { bench_start(); }
void call_stop(size_t, void* calls) {
  bench_stop();
  ++*static_cast<size_t*>(calls);
}

}  // namespace

int main() {
  Model& model = Model::embedded();
  Status status = model.load();
  std::printf("runner: program %s; kernels %s\n", model.model_abi(), Model::kernels_abi());
  if (status != Status::kOk) return setup_error("load", status, model);
  std::printf("runner: planned arena %u B in %u buffer(s); method allocator %u of %u B used "
              "(estimate %u B)\n",
              static_cast<unsigned>(model.arena_bytes()),
              static_cast<unsigned>(CORTEX_M_NN_PLANNED_BUFFERS),
              static_cast<unsigned>(model.method_allocator_used()),
              static_cast<unsigned>(model.method_allocator_bytes()),
              static_cast<unsigned>(CORTEX_M_NN_RUNTIME_OVERHEAD_BYTES));

  // (no float formatting: the runner's image carries no float printf)
  std::printf("runner: %s inputs and outputs (input 0 zero point %d)\n",
              model.input_is_int8(0) ? "int8" : "float",
              static_cast<int>(model.input_quantization(0).zero_point));
  if (model.num_inputs() != CORTEX_M_NN_TEST_INPUTS ||
      model.num_outputs() != CORTEX_M_NN_TEST_OUTPUTS) {
    std::printf("runner: forward takes %u inputs and gives %u outputs; embedded data has %u/%u\n",
                static_cast<unsigned>(model.num_inputs()),
                static_cast<unsigned>(model.num_outputs()),
                static_cast<unsigned>(CORTEX_M_NN_TEST_INPUTS),
                static_cast<unsigned>(CORTEX_M_NN_TEST_OUTPUTS));
    return kSetupError;
  }
  for (size_t i = 0; i < CORTEX_M_NN_TEST_INPUTS; ++i) {
    status = model.set_input(i, cortex_m_nn_test_input[i], cortex_m_nn_test_input_size[i]);
    if (status != Status::kOk) return setup_error("set_input", status, model);
  }

  bench_start();
  status = model.run();
  bench_stop();
  if (status != Status::kOk) return setup_error("forward", status, model);

  int result = kPass;
  for (size_t i = 0; i < CORTEX_M_NN_TEST_OUTPUTS; ++i) {
    size_t n = 0;
    if (output_bytes(model, i, &n) == nullptr) {
      std::printf("runner: output %u is neither a float nor an int8 tensor\n",
                  static_cast<unsigned>(i));
      return kSetupError;
    }
    if (!check_output(model, i)) result = kMismatch;
  }

  // forward again, one kernel call at a time, each call a marked region after the whole run's
  // (benchmarks/bench_target.py's per-call profile); the outputs must not change (with states:
  // must be the second inference's)
  for (size_t i = 0; i < CORTEX_M_NN_TEST_INPUTS; ++i) {
    status = model.set_input(i, cortex_m_nn_test_input[i], cortex_m_nn_test_input_size[i]);
    if (status != Status::kOk) return setup_error("set_input", status, model);
  }
  size_t calls = 0;
  status = model.run_profiled(call_start, call_stop, &calls);
  if (status != Status::kOk) return setup_error("forward call by call", status, model);
  for (size_t i = 0; i < CORTEX_M_NN_TEST_OUTPUTS; ++i) {
    if (differing_bytes(model, i, kSecondOutputs) != 0) {
      std::printf("runner: output %u of the call-by-call run differs\n", static_cast<unsigned>(i));
      result = kMismatch;
    }
  }
  std::printf("runner: %u kernel calls run one at a time\n", static_cast<unsigned>(calls));
  std::printf("runner: %s\n", result == kPass ? "PASS (bit-exact)" : "FAIL (outputs differ)");
  return result;
}
