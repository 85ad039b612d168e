/* The command model's check: run it on its test vector (hello_test_vector.h). */
#pragma once

#include <stddef.h>

#include <cortex_m_nn/model.h>

/* Runs `model` once on the command program's test vector: the number of output values that
 * differ from the compiler's references, or -1 if the run failed (model.error() says why). */
long run_command(cortex_m_nn::Model &model);
