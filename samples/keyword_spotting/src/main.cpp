/*
 * keyword_spotting: the DS-CNN keyword-spotting model (MLPerf Tiny "kws") on an embedded test
 * vector (49 MFCC frames x 10 coefficients). Prints the label it finds, the inference time
 * in cycles of the board's cycle counter (k_cycle_get_32), and PASS when the scores equal
 * the compiler's bit-exact references for the same input.
 *
 * The model is compiled with int8 inputs and outputs (CONFIG_CORTEX_M_NN_MODEL_IO_INT8,
 * cortex-m-compile --io int8), as a keyword spotter's front end would give it int8 features:
 * no float quantize/dequantize runs in the program. A front end computing float MFCCs
 * quantizes each with the input's scale and zero point (quantize() below): here the test
 * vector's features, given back as the floats they stand for, go through it.
 */
#include <zephyr/kernel.h>
#include <zephyr/sys/printk.h>

#include <cortex_m_nn/model.h>

#include "cortex_m_nn_test_vector.h"

namespace {

/* cortex_m_nn.frontend.models.ds_cnn.CLASSES: MLPerf Tiny's label order. */
const char *const labels[] = {
	"down", "go", "left", "no", "off", "on", "right", "stop", "up", "yes", "silence", "unknown",
};
constexpr size_t kLabels = sizeof(labels) / sizeof(labels[0]);
constexpr size_t kRuns = 3;

constexpr size_t kFeatures = 49 * 10;
int8_t features[kFeatures];

/* A float feature as the model's int8 input takes it: round(x / scale) + zero point. */
int8_t quantize(float x, cortex_m_nn::Quantization q)
{
	float scaled = x / q.scale;
	int32_t rounded = static_cast<int32_t>(scaled < 0 ? scaled - 0.5f : scaled + 0.5f);
	int32_t value = rounded + q.zero_point;
	return static_cast<int8_t>(value < -128 ? -128 : (value > 127 ? 127 : value));
}

size_t argmax(const int8_t *values, size_t count)
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
	       static_cast<unsigned>(model.arena_bytes()));
	if (!model.input_is_int8(0) || !model.output_is_int8(0)) {
		printk("the model has float inputs: set CONFIG_CORTEX_M_NN_MODEL_IO_INT8=y\nFAIL\n");
		return 0;
	}
	const cortex_m_nn::Quantization in = model.input_quantization(0);
	if (model.input_size(0) != kFeatures || cortex_m_nn_test_input_size[0] != kFeatures) {
		printk("expected %u features\nFAIL\n", static_cast<unsigned>(kFeatures));
		return 0;
	}
	printk("input: %u int8 features, zero point %d\n", static_cast<unsigned>(kFeatures),
	       static_cast<int>(in.zero_point));
	/* The front end's float features (the values the test vector's int8 ones stand for),
	 * quantized as the model takes them: the same int8 values again. */
	for (size_t i = 0; i < kFeatures; ++i) {
		const int32_t q = cortex_m_nn_test_input[0][i];
		const float x = in.scale * static_cast<float>(q - in.zero_point);
		features[i] = quantize(x, in);
		if (features[i] != cortex_m_nn_test_input[0][i]) {
			printk("feature %u quantizes to %d, not %d\nFAIL\n", static_cast<unsigned>(i),
			       features[i], cortex_m_nn_test_input[0][i]);
			return 0;
		}
	}

	uint32_t fastest = UINT32_MAX;
	for (size_t run = 0; run < kRuns; ++run) {
		/* Before every run: the planner may reuse an input's memory for later tensors. */
		if (model.set_input(0, features, kFeatures) !=
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

	cortex_m_nn::QuantizedTensor scores = model.quantized_output(0);
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

	/* score = scale * (q - zero_point); printed in per mille (no float printk needed) */
	const cortex_m_nn::Quantization out = scores.quantization;
	const float score = out.scale * static_cast<float>(scores.data[label] - out.zero_point);
	printk("label: %s (%u), score %u/1000\n", labels[label], static_cast<unsigned>(label),
	       static_cast<unsigned>(score * 1000.0f + 0.5f));
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
