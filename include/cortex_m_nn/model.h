// cortex-m-nn's C++ API for applications: models run by ExecuTorch with the cortex_m_nn
// kernels in memory reserved at build time — the model built into the image, or programs
// loaded at run time from any memory (a flash partition, a file read into RAM).
//
//   cortex_m_nn::Model& model = cortex_m_nn::Model::embedded();
//   if (model.load() != cortex_m_nn::Status::kOk) { printk("%s\n", model.error()); ... }
//   model.set_input(0, samples, count);
//   model.run();
//   cortex_m_nn::Tensor scores = model.output(0);
//
// A program image (`cortex-m-compile embed --image`, docs/program-image.md) runs in memory
// the application gives; several models, each with its own memory, run in one image:
//
//   alignas(16) static uint8_t arena[64 * 1024], method[16 * 1024];
//   alignas(cortex_m_nn::Model) static uint8_t storage[sizeof(cortex_m_nn::Model)];
//   cortex_m_nn::Model& second = *new (storage) cortex_m_nn::Model(
//       {arena, sizeof(arena), method, sizeof(method), nullptr, 0});
//   if (second.load(partition, partition_size) != cortex_m_nn::Status::kOk) { ... }
//
// (A model that lives as long as the firmware is best constructed in place like this and never
// destroyed: a `static cortex_m_nn::Model` registers its destructor through __cxa_atexit and
// __dso_handle, which a Zephyr image links only with CONFIG_STATIC_INIT_GNU.)
//
// load(image) checks the whole image first (format, CRC-32s, kernel ABI, that this firmware
// links every kernel case it calls, that it fits the memory) and refuses it in one line
// without touching the program loaded before, which keeps running.
//
// A model compiled with `cortex-m-compile --io int8` takes and gives int8 tensors instead (no
// quantize/dequantize kernels in the program): quantize each feature with
// input_quantization(i), q = clamp(round(x / scale) + zero_point, -128, 127), give the int8
// values to set_input(i, const int8_t*, n) and read quantized_output(i). A 4-D tensor is
// stored channels-last (NHWC), as the report and cortex_m_nn_model.h say.
//
// Nothing is allocated at run time: the planned arena (activations, inputs, outputs and every
// CMSIS-NN scratch buffer) and ExecuTorch's method allocator are the embedded model's static
// buffers, sized by the build from the model (cortex_m_nn_model.h), or the memory given. load()
// refuses a model compiled for other kernels (ISA, rounding, operator version;
// cortex_m_nn/abi.h) with a message naming the fix.
#ifndef CORTEX_M_NN_MODEL_API_H
#define CORTEX_M_NN_MODEL_API_H

#include <stddef.h>
#include <stdint.h>

namespace cortex_m_nn {

enum class Status : uint8_t {  // to_string() names them in this order
  kOk = 0,
  kNotLoaded,   // load() has not succeeded yet
  kLoadFailed,  // the program cannot be read, forward cannot be loaded into its memory, or a
                // kernel refused its arguments when load() proved it
  kMismatch,    // the program was compiled for other kernels (ISA, rounding, operators), calls
                // a kernel case this image does not link, or does not fit the model's memory
  kBadInput,    // no such input/output, wrong size or type
  kRunFailed,   // a kernel failed (the log says which)
  kBadImage,    // a program image is truncated, damaged or of another format
};

// "ok", "not loaded", ...
const char* to_string(Status status);

// A float input or output of forward: contiguous, in the model's own layout (e.g. NCHW).
struct Tensor {
  const float* data;
  size_t size;  // elements
};

// How an int8 input or output holds real values: real = scale * (q - zero_point).
struct Quantization {
  float scale;  // 0 for a float input or output
  int32_t zero_point;
};

// An int8 output of forward (--io int8): contiguous, 4-D tensors channels-last (NHWC).
struct QuantizedTensor {
  const int8_t* data;
  size_t size;  // elements
  Quantization quantization;
};

// The memory a model runs in, given by the application (each buffer 16-byte aligned): the
// planned arena, ExecuTorch's method allocator and its temporary allocator (may be empty).
// A program image records what it needs of each (docs/program-image.md).
struct ModelMemory {
  void* arena;
  size_t arena_bytes;
  void* method_allocator;
  size_t method_allocator_bytes;
  void* temp_allocator;
  size_t temp_allocator_bytes;
};

// A program image read rather than addressed: a flash partition behind a driver
// (cortex_m_nn/flash_partition.h on Zephyr), a file, a download. Model::load(source, buffer,
// capacity) copies it into the buffer first.
class ImageSource {
 public:
  // Bytes the source holds (a partition's size: the image may be shorter); 0 if it cannot be
  // read at all.
  virtual size_t size() const = 0;
  // Copy `bytes` from `offset` into `destination`; false if the read failed.
  virtual bool read(size_t offset, void* destination, size_t bytes) = 0;
  // What the source is, for messages ("flash partition 3").
  virtual const char* name() const = 0;

 protected:
  ~ImageSource() = default;
};

// Bytes a Model keeps of its own (ExecuTorch's program and method objects, its messages).
inline constexpr size_t kModelStateBytes = 1536;

class Model {
 public:
  // The model of CONFIG_CORTEX_M_NN_MODEL_PTE / _SOURCE, embedded in section
  // .cortex_m_nn_model, in the memory the build reserved for it (only in an image that embeds
  // a model: src/model_embedded.cpp).
  static Model& embedded();

  // A model that runs programs loaded at run time (load(image, size)) in `memory`.
  explicit Model(const ModelMemory& memory);
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // The embedded model: parse the program, check it was compiled for the kernels in this
  // image, load forward into the planned arena and prove it: every kernel call checks its
  // arguments once, here, and run() then computes without checking them again. Idempotent once
  // it succeeded. A run-time model has no program of its own: kNotLoaded.
  Status load();
  // A program image of `size` bytes at `image` (which must stay readable while the model runs
  // it): checked whole first, and refused in one line (kBadImage, kMismatch) leaving the
  // program loaded before in service; then loaded and proven like the embedded one, in the
  // model's memory. The embedded program's calls run from the table prepared ahead of time;
  // a loaded one's derive their parameters in each call.
  Status load(const void* image, size_t size);
  // The program image `source` holds, copied into `buffer` (`capacity` bytes, 16-byte
  // aligned; it must stay untouched while the model runs the program) and then loaded as
  // load(buffer, size) loads it. Reads the header first and refuses, before reading the rest,
  // an image larger than the buffer or the source. The buffer must not hold the program in
  // service: alternate two buffers to keep a model running while its update is read.
  Status load(ImageSource& source, void* buffer, size_t capacity);
  bool loaded() const { return loaded_; }

  // One line describing the last failure ("" after success).
  const char* error() const;

  size_t num_inputs() const;
  size_t num_outputs() const;
  // Elements of input/output `index` (0 if there is none).
  size_t input_size(size_t index) const;
  size_t output_size(size_t index) const;

  // Whether input/output `index` is int8 (compiled with --io int8) rather than float.
  bool input_is_int8(size_t index) const;
  bool output_is_int8(size_t index) const;
  // The quantization of an int8 input/output ({0, 0} for a float one or no such index).
  Quantization input_quantization(size_t index) const;
  Quantization output_quantization(size_t index) const;

  // Copy `size` values into input `index` (size must equal input_size(index); floats for a
  // float input, int8 for an int8 one). Set every input before each run(): the memory plan may
  // reuse an input's bytes for later tensors.
  Status set_input(size_t index, const float* data, size_t size);
  Status set_input(size_t index, const int8_t* data, size_t size);
  // Run forward once on the inputs set.
  Status run();
  // Called around each kernel call of run_profiled(): `call` counts the program's kernel calls
  // from 0, in the order the compile report lists the lowered operators.
  using CallHook = void (*)(size_t call, void* context);
  // run(), one kernel call at a time, with `before` and `after` (either may be null) called
  // around each: a per-layer profile with the core's cycle counter or an emulator's marker.
  // Same outputs as run().
  Status run_profiled(CallHook before, CallHook after, void* context);
  // Output `index` of the last run() ({nullptr, 0} if there is none or it is int8); valid until
  // the next run.
  Tensor output(size_t index) const;
  // Int8 output `index` of the last run() with its quantization ({nullptr, 0, {0, 0}} if there
  // is none or it is float); valid until the next run.
  QuantizedTensor quantized_output(size_t index) const;

  // What this program was compiled for and what the kernels were built for, as
  // "isa=mve rounding=double ops_version=1".
  const char* model_abi() const;
  static const char* kernels_abi();

  // Bytes reserved for the model: the planned arena and ExecuTorch's method allocator.
  size_t arena_bytes() const;
  size_t method_allocator_bytes() const;
  // Bytes of the method allocator forward took when it was loaded (0 before load()): what
  // CONFIG_CORTEX_M_NN_METHOD_ALLOCATOR_MARGIN can be trimmed to.
  size_t method_allocator_used() const;

  // The firmware API's own (src/model_state.h): what a model keeps, and what the embedded
  // model adds (its memory, its prepared calls in flash, its inputs' and outputs' types).
  struct State;
  struct Embedded;

 private:
  explicit Model(const Embedded& embedded);
  State& state() const;
  Status fail(Status status, const char* format, ...);
  // Parse and load the program of `size` bytes at `program` into the model's memory.
  Status load_program(const void* program, size_t size);
  // Drops the program loaded (its method, its calls' proven range).
  void unload();
  // Gives forward's planned buffers their places in the arena.
  Status place_planned_buffers(size_t* count);
  // Whether forward's input and output types are the ones the model records.
  Status check_io_types();
  // Runs forward once with every kernel call checking its arguments and computing nothing,
  // then marks its calls proven (kernels/include/cortex_m_nn/call_mode.h).
  Status prove_forward();
  // set_input for either element type.
  Status set_input_values(size_t index, bool int8, const void* data, size_t size);

  alignas(16) unsigned char state_[kModelStateBytes];
  bool loaded_ = false;
};

}  // namespace cortex_m_nn

#endif  // CORTEX_M_NN_MODEL_API_H
