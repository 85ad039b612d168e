/*
 * The cortex_m_nn kernels on the target, through the runtime: model.py:kernels calls every
 * cortex_m_nn operator, and its outputs must equal, bit for bit, what the compiler's
 * references (CMSIS-NN's integer arithmetic in Python) gave for the same input.
 */
#include <string.h>

#include <zephyr/ztest.h>

#include <cortex_m_nn/model.h>

#include "cortex_m_nn_model.h"
#include "cortex_m_nn_test_vector.h"

using cortex_m_nn::Model;
using cortex_m_nn::Status;

namespace {

Model &model()
{
	return Model::embedded();
}

void set_test_inputs(void)
{
	for (size_t i = 0; i < CORTEX_M_NN_TEST_INPUTS; ++i) {
		Status status = model().set_input(i, cortex_m_nn_test_input[i],
						  cortex_m_nn_test_input_size[i]);
		zassert_true(status == Status::kOk, "input %u: %s", static_cast<unsigned>(i),
			     model().error());
	}
}

void *load_model(void)
{
	Status status = model().load();
	zassert_true(status == Status::kOk, "load: %s", model().error());
	return nullptr;
}

} /* namespace */

ZTEST_SUITE(cortex_m_nn_kernels, NULL, load_model, NULL, NULL, NULL);

ZTEST(cortex_m_nn_kernels, test_program_matches_the_kernels)
{
	zassert_true(model().loaded());
	zassert_equal(strcmp(model().model_abi(), Model::kernels_abi()), 0,
		      "model %s, kernels %s", model().model_abi(), Model::kernels_abi());
	zassert_equal(model().num_inputs(), CORTEX_M_NN_TEST_INPUTS);
	zassert_equal(model().num_outputs(), CORTEX_M_NN_TEST_OUTPUTS);
}

ZTEST(cortex_m_nn_kernels, test_outputs_equal_the_references)
{
	set_test_inputs();
	zassert_true(model().run() == Status::kOk, "run: %s", model().error());
	for (size_t i = 0; i < CORTEX_M_NN_TEST_OUTPUTS; ++i) {
		cortex_m_nn::Tensor output = model().output(i);

		zassert_equal(output.size, cortex_m_nn_test_output_size[i], "output %u size",
			      static_cast<unsigned>(i));
		size_t differences = 0;
		size_t first = output.size;
		for (size_t j = 0; j < output.size; ++j) {
			if (output.data[j] != cortex_m_nn_test_output[i][j]) {
				first = differences == 0 ? j : first;
				++differences;
			}
		}
		zassert_equal(differences, 0, "output %u: %u of %u values differ, first at %u",
			      static_cast<unsigned>(i), static_cast<unsigned>(differences),
			      static_cast<unsigned>(output.size), static_cast<unsigned>(first));
	}
}

ZTEST(cortex_m_nn_kernels, test_runs_repeat_exactly)
{
	static float first[CORTEX_M_NN_ARENA_BYTES / sizeof(float) + 1];

	set_test_inputs();
	zassert_true(model().run() == Status::kOk, "run: %s", model().error());
	cortex_m_nn::Tensor output = model().output(0);
	zassert_true(output.size * sizeof(float) <= sizeof(first));
	memcpy(first, output.data, output.size * sizeof(float));
	/* Inputs are set again: the planner may reuse an input's memory for later tensors. */
	set_test_inputs();
	zassert_true(model().run() == Status::kOk, "run: %s", model().error());
	zassert_mem_equal(model().output(0).data, first, output.size * sizeof(float));
}

ZTEST(cortex_m_nn_kernels, test_bad_inputs_are_refused)
{
	zassert_true(model().set_input(0, cortex_m_nn_test_input[0],
				       cortex_m_nn_test_input_size[0] - 1) == Status::kBadInput);
	zassert_true(model().set_input(CORTEX_M_NN_TEST_INPUTS, cortex_m_nn_test_input[0],
				       cortex_m_nn_test_input_size[0]) == Status::kBadInput);
	zassert_is_null(model().output(CORTEX_M_NN_TEST_OUTPUTS).data);
	zassert_equal(model().input_size(0), cortex_m_nn_test_input_size[0]);
}

ZTEST(cortex_m_nn_kernels, test_memory_is_what_the_compile_planned)
{
	zassert_equal(model().arena_bytes(), CORTEX_M_NN_ARENA_BYTES);
	zassert_equal(model().method_allocator_bytes(), CORTEX_M_NN_METHOD_ALLOCATOR_BYTES);
}
