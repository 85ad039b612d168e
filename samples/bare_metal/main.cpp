/*
 * bare_metal: the embedded model, run once on its test vector without an RTOS. Prints the
 * planned memory, each output as integers of millionths, and PASS when every output equals
 * bit for bit what the compiler's references gave for the same input; exits with 0 then.
 */
#include <stdio.h>

#include <cortex_m_nn/model.h>

#include "cortex_m_nn_test_vector.h"

static int fail(const char *step, cortex_m_nn::Model &model)
{
	printf("%s: %s\nFAIL\n", step, model.error());
	return 1;
}

int main(void)
{
	cortex_m_nn::Model &model = cortex_m_nn::Model::embedded();

	printf("bare_metal: arena %u B, method allocator %u B\n",
	       static_cast<unsigned>(model.arena_bytes()),
	       static_cast<unsigned>(model.method_allocator_bytes()));
	if (model.load() != cortex_m_nn::Status::kOk) {
		return fail("load", model);
	}
	for (size_t i = 0; i < CORTEX_M_NN_TEST_INPUTS; ++i) {
		if (model.set_input(i, cortex_m_nn_test_input[i], cortex_m_nn_test_input_size[i]) !=
		    cortex_m_nn::Status::kOk) {
			return fail("set_input", model);
		}
	}
	if (model.run() != cortex_m_nn::Status::kOk) {
		return fail("run", model);
	}

	unsigned differing = 0;
	for (size_t i = 0; i < CORTEX_M_NN_TEST_OUTPUTS; ++i) {
		const cortex_m_nn::Tensor output = model.output(i);
		if (output.size != cortex_m_nn_test_output_size[i]) {
			printf("output %u: %u values, expected %u\nFAIL\n", static_cast<unsigned>(i),
			       static_cast<unsigned>(output.size),
			       static_cast<unsigned>(cortex_m_nn_test_output_size[i]));
			return 1;
		}
		printf("output %u (millionths):", static_cast<unsigned>(i));
		for (size_t j = 0; j < output.size; ++j) {
			const float value = output.data[j];
			/* newlib-nano's printf has no %f */
			printf(" %ld", static_cast<long>(value * 1e6f + (value < 0 ? -0.5f : 0.5f)));
			differing += value != cortex_m_nn_test_output[i][j];
		}
		printf("\n");
	}
	if (differing != 0) {
		printf("%u values differ from the compiler's references\nFAIL\n", differing);
		return 1;
	}
	printf("outputs equal the compiler's references\nPASS\n");
	return 0;
}
