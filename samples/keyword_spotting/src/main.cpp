/*
 * keyword_spotting: the DS-CNN keyword-spotting model (MLPerf Tiny "kws") on an embedded test
 * vector (49 MFCC frames x 10 coefficients). Prints the label it finds, the inference time
 * in cycles of the board's cycle counter (k_cycle_get_32), and PASS when the scores equal
 * the compiler's bit-exact references for the same input.
 */
#include <zephyr/kernel.h>
#include <zephyr/sys/printk.h>

#include <cortex_m_nn/model.h>

#include "cortex_m_nn_test_vector.h"

namespace {

/* cortex_m_nn.models.ds_cnn.CLASSES: MLPerf Tiny's label order. */
const char *const labels[] = {
	"down", "go", "left", "no", "off", "on", "right", "stop", "up", "yes", "silence", "unknown",
};
constexpr size_t kLabels = sizeof(labels) / sizeof(labels[0]);
constexpr size_t kRuns = 3;

size_t argmax(const float *values, size_t count)
{
	size_t best = 0;
	for (size_t i = 1; i < count; ++i) {
		if (values[i] > values[best]) {
			best = i;
		}
	}
	return best;
}

} /* namespace */

int main(void)
{
	cortex_m_nn::Model &model = cortex_m_nn::Model::embedded();

	if (model.load() != cortex_m_nn::Status::kOk) {
		printk("load: %s\nFAIL\n", model.error());
		return 0;
	}
	printk("keyword_spotting: DS-CNN, %s; arena %u B\n", model.model_abi(),
	       static_cast<unsigned>(cortex_m_nn::Model::arena_bytes()));

	uint32_t fastest = UINT32_MAX;
	for (size_t run = 0; run < kRuns; ++run) {
		/* Before every run: the planner may reuse an input's memory for later tensors. */
		if (model.set_input(0, cortex_m_nn_test_input[0], cortex_m_nn_test_input_size[0]) !=
		    cortex_m_nn::Status::kOk) {
			printk("input: %s\nFAIL\n", model.error());
			return 0;
		}
		uint32_t start = k_cycle_get_32();
		cortex_m_nn::Status status = model.run();
		uint32_t cycles = k_cycle_get_32() - start;

		if (status != cortex_m_nn::Status::kOk) {
			printk("run: %s\nFAIL\n", model.error());
			return 0;
		}
		fastest = cycles < fastest ? cycles : fastest;
	}

	cortex_m_nn::Tensor scores = model.output(0);
	if (scores.size != kLabels || scores.size != cortex_m_nn_test_output_size[0]) {
		printk("expected %u scores, got %u\nFAIL\n", static_cast<unsigned>(kLabels),
		       static_cast<unsigned>(scores.size));
		return 0;
	}
	size_t label = argmax(scores.data, scores.size);
	size_t expected = argmax(cortex_m_nn_test_output[0], kLabels);
	size_t differences = 0;
	for (size_t i = 0; i < scores.size; ++i) {
		differences += scores.data[i] != cortex_m_nn_test_output[0][i];
	}

	printk("label: %s (%u)\n", labels[label], static_cast<unsigned>(label));
	printk("inference: %u cycles (fastest of %u runs)\n", static_cast<unsigned>(fastest),
	       static_cast<unsigned>(kRuns));
	if (label != expected || differences != 0) {
		printk("expected label %s; %u scores differ from the compiler's references\nFAIL\n",
		       labels[expected], static_cast<unsigned>(differences));
		return 0;
	}
	printk("PASS\n");
	return 0;
}
