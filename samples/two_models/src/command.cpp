/*
 * The command model's check, in a file of its own: its test vector (hello_test_vector.h,
 * written by the build with CONFIG_CORTEX_M_NN_PROGRAMS_TEST_VECTORS) declares the same names
 * as the keyword spotter's (cortex_m_nn_test_vector.h).
 */
#include "command.h"

#include "hello_test_vector.h"

long run_command(cortex_m_nn::Model &model)
{
	for (size_t i = 0; i < CORTEX_M_NN_TEST_INPUTS; ++i) {
		if (model.set_input(i, cortex_m_nn_test_input[i], cortex_m_nn_test_input_size[i]) !=
		    cortex_m_nn::Status::kOk) {
			return -1;
		}
	}
	if (model.run() != cortex_m_nn::Status::kOk) {
		return -1;
	}
	long differences = 0;
	for (size_t i = 0; i < CORTEX_M_NN_TEST_OUTPUTS; ++i) {
		cortex_m_nn::Tensor output = model.output(i);
		if (output.size != cortex_m_nn_test_output_size[i]) {
			return -1;
		}
		for (size_t j = 0; j < output.size; ++j) {
			differences += output.data[j] != cortex_m_nn_test_output[i][j];
		}
	}
	return differences;
}
