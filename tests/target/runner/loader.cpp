// Bare-metal loader: a firmware image with no embedded model that runs programs placed outside
// it (QEMU's -device loader puts program images and their test vectors in the board's large
// RAM), through the firmware API's run-time models (include/cortex_m_nn/model.h,
// docs/program-image.md). tests/target/test_loader.py gives it, per slot, an image and a
// vector, and checks what it prints:
//
//   slot 0: program A into the first model, run, outputs compared with the vector's
//   slot 1: program B into a second model (its own memory), read into RAM the way a flash
//           partition behind a driver is read (Model::load(ImageSource&, buffer)), run, compared
//   slot 2: a program calling a kernel this image lacks, into the first model: refused
//   slot 3: a damaged image, read into RAM for the first model: refused
//   then A runs again in the first model: still bit exact (the refusals left it in service)
//
// A vector: "CMNNVEC1", u32 inputs, u32 outputs, then per tensor u32 bytes and its bytes
// (padded to 4): the inputs as the program takes them, then the expected outputs.
// Exit status 0 = every step as expected, 1 = a mismatch, 2 = a setup error.
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "cortex_m_nn/model.h"

extern "C" {
#include "bench.h"
}

namespace {

using cortex_m_nn::Model;
using cortex_m_nn::ModelMemory;
using cortex_m_nn::Status;

constexpr int kPass = 0;
constexpr int kMismatch = 1;
constexpr int kSetupError = 2;
constexpr size_t kMaxTensors = 8;

alignas(16) uint8_t arena[2][LOADER_ARENA_BYTES];
alignas(16) uint8_t method[2][LOADER_METHOD_BYTES];
alignas(16) uint8_t temp[2][LOADER_TEMP_BYTES + 16];

alignas(16) uint8_t copies[2][LOADER_COPY_BYTES];  // images read out of their slots

const uint8_t* slot(int index) {
  return reinterpret_cast<const uint8_t*>(LOADER_SLOT_BASE + index * LOADER_SLOT_BYTES);
}

// A slot read the way a driver reads flash: copied out in 512-byte reads.
class SlotSource final : public cortex_m_nn::ImageSource {
 public:
  explicit SlotSource(int index) : index_(index) {}
  size_t size() const override { return LOADER_SLOT_BYTES; }
  bool read(size_t offset, void* destination, size_t bytes) override {
    if (offset > LOADER_SLOT_BYTES || bytes > LOADER_SLOT_BYTES - offset) return false;
    auto* to = static_cast<uint8_t*>(destination);
    for (size_t done = 0; done < bytes; done += 512) {
      memcpy(to + done, slot(index_) + offset + done, bytes - done < 512 ? bytes - done : 512);
      ++reads_;
    }
    return true;
  }
  const char* name() const override { return "the slot"; }
  unsigned reads() const { return reads_; }

 private:
  int index_;
  unsigned reads_ = 0;
};

// A test vector's tensors, read in place.
struct Vector {
  size_t inputs = 0;
  size_t outputs = 0;
  const uint8_t* data[2 * kMaxTensors] = {};
  size_t bytes[2 * kMaxTensors] = {};
};

uint32_t u32(const uint8_t* p) {
  uint32_t v;
  memcpy(&v, p, sizeof(v));
  return v;
}

bool read_vector(const uint8_t* p, Vector* vector) {
  if (memcmp(p, "CMNNVEC1", 8) != 0) return false;
  vector->inputs = u32(p + 8);
  vector->outputs = u32(p + 12);
  if (vector->inputs > kMaxTensors || vector->outputs > kMaxTensors) return false;
  p += 16;
  for (size_t i = 0; i < vector->inputs + vector->outputs; ++i) {
    vector->bytes[i] = u32(p);
    vector->data[i] = p + 4;
    p += 4 + (vector->bytes[i] + 3) / 4 * 4;
  }
  return true;
}

// Runs `model` on the vector of slot `index`; kPass when every output byte is as expected.
int run_vector(Model& model, int index, const char* name) {
  Vector vector;
  if (!read_vector(slot(index) + LOADER_VECTOR_OFFSET, &vector)) {
    std::printf("loader: slot %d has no test vector\n", index);
    return kSetupError;
  }
  for (size_t i = 0; i < vector.inputs; ++i) {
    const bool int8 = model.input_is_int8(i);
    const Status status =
        int8 ? model.set_input(i, reinterpret_cast<const int8_t*>(vector.data[i]),
                               vector.bytes[i])
             : model.set_input(i, reinterpret_cast<const float*>(vector.data[i]),
                               vector.bytes[i] / sizeof(float));
    if (status != Status::kOk) {
      std::printf("loader: %s set_input: %s\n", name, model.error());
      return kSetupError;
    }
  }
  bench_start();  // each run a region of the insncount plugin (benchmarks/bench_loaded.py)
  const Status ran = model.run();
  bench_stop();
  if (ran != Status::kOk) {
    std::printf("loader: %s run: %s\n", name, model.error());
    return kSetupError;
  }
  size_t differing = 0;
  for (size_t o = 0; o < vector.outputs; ++o) {
    const uint8_t* got = nullptr;
    size_t n = 0;
    if (model.output_is_int8(o)) {
      const cortex_m_nn::QuantizedTensor out = model.quantized_output(o);
      got = reinterpret_cast<const uint8_t*>(out.data);
      n = out.size;
    } else {
      const cortex_m_nn::Tensor out = model.output(o);
      got = reinterpret_cast<const uint8_t*>(out.data);
      n = out.size * sizeof(float);
    }
    const size_t expected = vector.bytes[vector.inputs + o];
    if (got == nullptr || n != expected) {
      differing += n > expected ? n : expected;
      continue;
    }
    for (size_t b = 0; b < n; ++b) differing += got[b] != vector.data[vector.inputs + o][b];
  }
  std::printf("loader: %s ran, %u bytes differ from the reference\n", name,
              static_cast<unsigned>(differing));
  return differing == 0 ? kPass : kMismatch;
}

int load(Model& model, int index, const char* name) {
  const Status status = model.load(slot(index), LOADER_SLOT_BYTES);
  std::printf("loader: %s from slot %d: %s%s%s\n", name, index, cortex_m_nn::to_string(status),
              status == Status::kOk ? "" : ": ", status == Status::kOk ? "" : model.error());
  return status == Status::kOk ? kPass : kSetupError;
}

// The same through SlotSource, into `copy` (one of copies[]).
int load_read(Model& model, int index, const char* name, uint8_t* copy) {
  SlotSource source(index);
  const Status status = model.load(source, copy, LOADER_COPY_BYTES);
  std::printf("loader: %s from slot %d: %s%s%s (read into RAM, %u reads)\n", name, index,
              cortex_m_nn::to_string(status), status == Status::kOk ? "" : ": ",
              status == Status::kOk ? "" : model.error(), source.reads());
  return status == Status::kOk ? kPass : kSetupError;
}

int worst(int a, int b) { return a > b ? a : b; }

}  // namespace

int main() {
  static Model first(ModelMemory{arena[0], sizeof(arena[0]), method[0], sizeof(method[0]),
                                 temp[0], LOADER_TEMP_BYTES});
  static Model second(ModelMemory{arena[1], sizeof(arena[1]), method[1], sizeof(method[1]),
                                  temp[1], LOADER_TEMP_BYTES});
  std::printf("loader: kernels %s\n", Model::kernels_abi());
  int result = load(first, 0, "program A");
  if (result != kPass) return result;
  result = run_vector(first, 0, "program A");
  int step = load_read(second, 1, "program B", copies[0]);
  if (step != kPass) return step;
  result = worst(result, run_vector(second, 1, "program B"));
  // refused: each leaves the first model running program A
  if (load(first, 2, "program C") == kPass ||
      load_read(first, 3, "a damaged image", copies[1]) == kPass) {
    std::printf("loader: FAIL (an image that must be refused was loaded)\n");
    return kMismatch;
  }
  result = worst(result, run_vector(first, 0, "program A again"));
  std::printf("loader: %s\n", result == kPass ? "PASS" : "FAIL");
  return result;
}
