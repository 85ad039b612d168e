/* Kernel calls prepared ahead of time: for each call of a program's forward, what its kernel
 * hands CMSIS-NN besides the tensors' data (params, quantization, dims), as constants in flash.
 *
 * `cortex-m-compile embed` writes one table per program into cortex_m_nn_model.c
 * (python/cortex_m_nn/embed/prepared.py computes the entries from the .pte), one entry per
 * cortex_m_nn kernel call in instruction order. The firmware API registers it when it loads the
 * program: the proof pass (cortex_m_nn/call_mode.h) has each kernel compare the entry with what
 * it derives from its arguments, byte for byte, and refuse the program if they differ; from then
 * on a proven call of an operator listed here only reads its entry and its tensors' data, as
 * TFLite Micro's Eval reads what its Prepare stored. Plain C: the generated source is C.
 *
 * A new operator with a prepared form gets a kind (operators.yaml's `prepared`, and the
 * enum below), an entry struct of CMSIS-NN's own types (prepared_entries.h), and a
 * `<name>_prepared` function in its kernel file (the generated boxed entry calls it for proven
 * calls). This header needs no CMSIS-NN: the firmware API includes it. */
#ifndef CORTEX_M_NN_PREPARED_H
#define CORTEX_M_NN_PREPARED_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What an entry holds; 0: a call whose operator has no prepared form (it runs as before). */
enum cortex_m_nn_prepared_kind {
  CORTEX_M_NN_PREPARED_NONE = 0,
  CORTEX_M_NN_PREPARED_CONV2D = 1,
  CORTEX_M_NN_PREPARED_DEPTHWISE_CONV2D = 2,
  CORTEX_M_NN_PREPARED_LINEAR = 3,
  CORTEX_M_NN_PREPARED_AVG_POOL2D = 4,
  CORTEX_M_NN_PREPARED_ADD = 5,
  CORTEX_M_NN_PREPARED_SOFTMAX = 6,
};

/* One kernel call of the table: its kind and its entry (NULL for CORTEX_M_NN_PREPARED_NONE). */
typedef struct {
  uint32_t kind;
  const void* entry;
} cortex_m_nn_prepared_call;

#ifdef __cplusplus
}
#endif

#endif /* CORTEX_M_NN_PREPARED_H */
