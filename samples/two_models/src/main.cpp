/*
 * two_models: a keyword spotter built into the image wakes a second model, a program loaded at
 * run time from the flash partition model_partition, and that program is updated without
 * rebuilding or reflashing the image.
 *
 *  1. The DS-CNN keyword spotter (embedded, int8 inputs and outputs) runs on its test vector.
 *  2. A keyword (not silence or unknown) wakes the command model: a cortex_m_nn::Model with
 *     memory sized by cortex_m_nn_programs.h, loaded from model_partition through the
 *     flash-map API (cortex_m_nn::FlashPartition) into one of two buffers.
 *  3. The update path: a new program image (cortex-m-compile embed --image), here the bytes
 *     built into this sample standing for a download, is written into the partition with
 *     cortex_m_nn::PartitionWriter and loaded; the command model runs it bit exact.
 *  4. A damaged update is refused in one line, and the command model keeps running the
 *     program it had; the good image is written back.
 */
#include <string.h>

#include <new>

#include <zephyr/kernel.h>
#include <zephyr/storage/flash_map.h>
#include <zephyr/sys/printk.h>

#include <cortex_m_nn/flash_partition.h>
#include <cortex_m_nn/model.h>

#include "command.h"
#include "cortex_m_nn_programs.h"
#include "cortex_m_nn_test_vector.h"

namespace {

const char *const labels[] = {
	"down", "go", "left", "no", "off", "on", "right", "stop", "up", "yes", "silence", "unknown",
};
constexpr size_t kKeywords = 10; /* the labels before silence and unknown */

/* The update: the command program's image, as a download would deliver it. */
const uint8_t update[] = {
#include "hello_image.inc"
};

/* The command model's memory, for any program this image loads (cortex_m_nn_programs.h). */
constexpr size_t kImageBytes = (CORTEX_M_NN_PROGRAMS_IMAGE_BYTES + 15) / 16 * 16;
alignas(16) uint8_t arena[CORTEX_M_NN_PROGRAMS_ARENA_BYTES];
alignas(16) uint8_t method[CORTEX_M_NN_PROGRAMS_METHOD_ALLOCATOR_BYTES];
alignas(16) uint8_t temp[CORTEX_M_NN_PROGRAMS_TEMP_ALLOCATOR_BYTES];
/* Two image buffers: an update is read into the one the running program is not in. */
alignas(16) uint8_t images[2][kImageBytes];
int serving = -1;
alignas(cortex_m_nn::Model) uint8_t command_storage[sizeof(cortex_m_nn::Model)];

const uint8_t kPartition = FIXED_PARTITION_ID(model_partition);

/* The keyword the spotter hears on its test vector; -1 if it did not run as compiled. */
int spot_keyword(void)
{
	cortex_m_nn::Model &spotter = cortex_m_nn::Model::embedded();

	if (spotter.load() != cortex_m_nn::Status::kOk ||
	    spotter.set_input(0, cortex_m_nn_test_input[0], cortex_m_nn_test_input_size[0]) !=
		    cortex_m_nn::Status::kOk ||
	    spotter.run() != cortex_m_nn::Status::kOk) {
		printk("keyword spotter: %s\n", spotter.error());
		return -1;
	}
	cortex_m_nn::QuantizedTensor scores = spotter.quantized_output(0);
	size_t best = 0;
	for (size_t i = 0; i < scores.size; ++i) {
		if (scores.data[i] != cortex_m_nn_test_output[0][i]) {
			printk("keyword spotter: score %u differs from the reference\n",
			       static_cast<unsigned>(i));
			return -1;
		}
		best = scores.data[i] > scores.data[best] ? i : best;
	}
	return static_cast<int>(best);
}

/* Loads the program in model_partition into the buffer not in service. */
cortex_m_nn::Status load_partition(cortex_m_nn::Model &command)
{
	cortex_m_nn::FlashPartition partition(kPartition);
	const int next = serving == 0 ? 1 : 0;
	cortex_m_nn::Status status = command.load(partition, images[next], kImageBytes);

	if (status == cortex_m_nn::Status::kOk) {
		serving = next;
	}
	return status;
}

/* Writes `size` bytes of `image` into model_partition in 512-byte pieces, as they arrive. */
int write_partition(const uint8_t *image, size_t size)
{
	cortex_m_nn::PartitionWriter writer(kPartition);
	int status = writer.begin(size);

	for (size_t at = 0; status == 0 && at < size; at += 512) {
		status = writer.write(image + at, size - at < 512 ? size - at : 512);
	}
	return status == 0 ? writer.finish() : status;
}

/* Runs the command model and says whether it computed its references exactly. */
bool command_ran(cortex_m_nn::Model &command, const char *when)
{
	long differences = run_command(command);

	if (differences < 0) {
		printk("command: %s\n", command.error());
		return false;
	}
	printk("command %s: %ld values differ from the references\n", when, differences);
	return differences == 0;
}

} /* namespace */

int main(void)
{
	/* In place and never destroyed (model.h: no destructor to register at exit). */
	cortex_m_nn::Model &command = *new (command_storage)
		cortex_m_nn::Model({arena, sizeof(arena), method, sizeof(method), temp, sizeof(temp)});

	const int keyword = spot_keyword();
	if (keyword < 0) {
		printk("FAIL\n");
		return 0;
	}
	printk("keyword: %s (%d)\n", labels[keyword], keyword);
	if (static_cast<size_t>(keyword) >= kKeywords) {
		printk("no keyword: the command model stays unloaded\nPASS\n");
		return 0;
	}
	printk("%s wakes the command model\n", labels[keyword]);

	/* What the partition holds now: nothing on a fresh flash, or an earlier update. */
	if (load_partition(command) != cortex_m_nn::Status::kOk) {
		printk("model_partition: %s\n", command.error());
	}

	/* The update path: write the new image, then load it. */
	int written = write_partition(update, sizeof(update));
	if (written != 0 || load_partition(command) != cortex_m_nn::Status::kOk) {
		printk("update: written %d; %s\nFAIL\n", written, command.error());
		return 0;
	}
	printk("update: %u B written to model_partition and loaded, %s\n",
	       static_cast<unsigned>(sizeof(update)), command.model_abi());
	if (!command_ran(command, "after the update")) {
		printk("FAIL\n");
		return 0;
	}

	/* A damaged update: refused, and the program loaded before keeps running. */
	static uint8_t damaged[sizeof(update)];
	memcpy(damaged, update, sizeof(update));
	damaged[sizeof(damaged) - 100] ^= 0x10;
	written = write_partition(damaged, sizeof(damaged));
	cortex_m_nn::Status refused = load_partition(command);
	printk("damaged update: %s\n",
	       refused == cortex_m_nn::Status::kOk ? "loaded" : command.error());
	if (written != 0 || refused == cortex_m_nn::Status::kOk ||
	    !command_ran(command, "after the refusal")) {
		printk("FAIL\n");
		return 0;
	}
	if (write_partition(update, sizeof(update)) != 0) {
		printk("model_partition: the good image could not be written back\nFAIL\n");
		return 0;
	}
	printk("PASS\n");
	return 0;
}
