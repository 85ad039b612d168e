// cortex-m-nn's C++ API for applications: the model built into the image, run by ExecuTorch
// with the cortex_m_nn kernels in memory reserved at build time.
//
//   cortex_m_nn::Model& model = cortex_m_nn::Model::embedded();
//   if (model.load() != cortex_m_nn::Status::kOk) { printk("%s\n", model.error()); ... }
//   model.set_input(0, samples, count);
//   model.run();
//   cortex_m_nn::Tensor scores = model.output(0);
//
// A model compiled with `cortex-m-compile --io int8` takes and gives int8 tensors instead (no
// quantize/dequantize kernels in the program): quantize each feature with
// input_quantization(i), q = clamp(round(x / scale) + zero_point, -128, 127), give the int8
// values to set_input(i, const int8_t*, n) and read quantized_output(i). A 4-D tensor is
// stored channels-last (NHWC), as the report and cortex_m_nn_model.h say.
//
// Nothing is allocated at run time: the planned arena (activations, inputs, outputs and every
// CMSIS-NN scratch buffer) and ExecuTorch's method allocator are static buffers sized by the
// build from the model (cortex_m_nn_model.h). load() refuses a model compiled for other
// kernels (ISA, rounding, operator version; cortex_m_nn/abi.h) with a message naming the fix.
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
  kMismatch,    // the program was compiled for other kernels (ISA, rounding, operators)
  kBadInput,    // no such input/output, wrong size or type
  kRunFailed,   // a kernel failed (the log says which)
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

class Model {
 public:
  // The model of CONFIG_CORTEX_M_NN_MODEL_PTE / _SOURCE, embedded in section
  // .cortex_m_nn_model.
  static Model& embedded();

  // Parse the program, check it was compiled for the kernels in this image, load forward into
  // the planned arena and prove it: every kernel call checks its arguments once, here, and
  // run() then computes without checking them again. Idempotent once it succeeded.
  Status load();
  bool loaded() const { return loaded_; }

  // One line describing the last failure ("" after success).
  const char* error() const;

  size_t num_inputs() const;
  size_t num_outputs() const;
  // Elements of input/output `index` (0 if there is none).
  size_t input_size(size_t index) const;
  size_t output_size(size_t index) const;

  // Whether input/output `index` is int8 (compiled with --io int8) rather than float.
  static bool input_is_int8(size_t index);
  static bool output_is_int8(size_t index);
  // The quantization of an int8 input/output ({0, 0} for a float one or no such index).
  static Quantization input_quantization(size_t index);
  static Quantization output_quantization(size_t index);

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
  static size_t arena_bytes();
  static size_t method_allocator_bytes();
  // Bytes of the method allocator forward took when it was loaded (0 before load()): what
  // CONFIG_CORTEX_M_NN_METHOD_ALLOCATOR_MARGIN can be trimmed to.
  size_t method_allocator_used() const;

 private:
  Model() = default;
  Status fail(Status status, const char* format, ...);
  // Gives forward's planned buffers their places in the arena, as the build sized them.
  Status place_planned_buffers(size_t* count);
  // Whether forward's input and output types are the ones cortex_m_nn_model.h records.
  Status check_io_types();
  // Runs forward once with every kernel call checking its arguments and computing nothing,
  // then marks its calls proven (kernels/include/cortex_m_nn/call_mode.h).
  Status prove_forward();
  // set_input for either element type.
  Status set_input_values(size_t index, bool int8, const void* data, size_t size);

  bool loaded_ = false;
};

}  // namespace cortex_m_nn

#endif  // CORTEX_M_NN_MODEL_API_H
