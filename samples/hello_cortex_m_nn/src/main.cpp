/*
 * hello_cortex_m_nn: run the embedded model once on its test vector, print the outputs and
 * PASS when they equal, bit for bit, what the compiler's references gave for the same input.
 */
#include <zephyr/kernel.h>
#include <zephyr/sys/printk.h>

#include <cortex_m_nn/model.h>

#include "cortex_m_nn_test_vector.h"

namespace {

/* printk has no %f by default (and may lack 64-bit integers): sign, integer part and six
 * decimals, in 32-bit arithmetic.
 */
void print_value(float value)
{
	float magnitude = value < 0 ? -value : value;
	unsigned long whole = static_cast<unsigned long>(magnitude);
	unsigned long micros =
		static_cast<unsigned long>((magnitude - static_cast<float>(whole)) * 1e6f + 0.5f);

	if (micros >= 1000000UL) {
		whole += 1;
		micros -= 1000000UL;
	}
	printk(" %s%lu.%06lu", value < 0 ? "-" : "", whole, micros);
}

} /* namespace */

int main(void)
{
	cortex_m_nn::Model &model = cortex_m_nn::Model::embedded();

	printk("hello_cortex_m_nn: arena %u B, method allocator %u B\n",
	       static_cast<unsigned>(model.arena_bytes()),
	       static_cast<unsigned>(model.method_allocator_bytes()));
	if (model.load() != cortex_m_nn::Status::kOk) {
		printk("load: %s\nFAIL\n", model.error());
		return 0;
	}
	printk("model %s; kernels %s\n", model.model_abi(), cortex_m_nn::Model::kernels_abi());

	for (size_t i = 0; i < CORTEX_M_NN_TEST_INPUTS; ++i) {
		if (model.set_input(i, cortex_m_nn_test_input[i], cortex_m_nn_test_input_size[i]) !=
		    cortex_m_nn::Status::kOk) {
			printk("input %u: %s\nFAIL\n", static_cast<unsigned>(i), model.error());
			return 0;
		}
	}
	if (model.run() != cortex_m_nn::Status::kOk) {
		printk("run: %s\nFAIL\n", model.error());
		return 0;
	}

	size_t differences = 0;
	for (size_t i = 0; i < CORTEX_M_NN_TEST_OUTPUTS; ++i) {
		cortex_m_nn::Tensor output = model.output(i);
		if (output.size != cortex_m_nn_test_output_size[i]) {
			printk("output %u has %u values, expected %u\nFAIL\n", static_cast<unsigned>(i),
			       static_cast<unsigned>(output.size),
			       static_cast<unsigned>(cortex_m_nn_test_output_size[i]));
			return 0;
		}
		printk("output %u:", static_cast<unsigned>(i));
		for (size_t j = 0; j < output.size; ++j) {
			print_value(output.data[j]);
			differences += output.data[j] != cortex_m_nn_test_output[i][j];
		}
		printk("\n");
	}
	if (differences != 0) {
		printk("%u values differ from the compiler's references\nFAIL\n",
		       static_cast<unsigned>(differences));
		return 0;
	}
	printk("outputs equal the compiler's references\nPASS\n");
	return 0;
}
