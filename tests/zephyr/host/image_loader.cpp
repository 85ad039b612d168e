// The firmware API's run-time models on the host (tests/zephyr/test_host_apps.py): loads each
// program image named on the command line, in turn, into one model, and prints one line per
// image — its status and message; an image that loads runs once on zero inputs. Built with
// AddressSanitizer and UndefinedBehaviorSanitizer over src/: damaged images must be refused
// without a crash, and a refused one must leave the program loaded before running.
//
// With --partition first, each image is written into a flash partition instead (the
// flash-map stand-in, zephyr_package/include/zephyr/storage/flash_map.h) by PartitionWriter in uneven
// pieces, as a download arrives, and loaded from there with FlashPartition into one of two
// buffers: the one not holding the program in service (src/flash_partition.cpp, sanitized).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "cortex_m_nn/flash_partition.h"
#include "cortex_m_nn/model.h"

namespace {

alignas(16) unsigned char arena[16 << 20];
alignas(16) unsigned char method[4 << 20];
alignas(16) unsigned char temp[1 << 20];
alignas(16) unsigned char copies[2][STUB_FLASH_PARTITION_BYTES];  // the two read buffers
char note[96] = "";  // what a partition load adds to its line

// The file's bytes, in memory of exactly that size (the sanitizer sees any read past it).
unsigned char* read_file(const char* path, size_t* size) {
  FILE* file = fopen(path, "rb");
  if (file == nullptr) return nullptr;
  std::vector<unsigned char> bytes;
  unsigned char buffer[65536];
  size_t n = 0;
  while ((n = fread(buffer, 1, sizeof(buffer), file)) > 0) {
    bytes.insert(bytes.end(), buffer, buffer + n);
  }
  fclose(file);
  auto* copy = static_cast<unsigned char*>(aligned_alloc(16, (bytes.size() + 15) / 16 * 16 + 16));
  if (!bytes.empty()) memcpy(copy, bytes.data(), bytes.size());
  *size = bytes.size();
  return copy;
}

// One run on zero inputs: the program's kernels compute once.
cortex_m_nn::Status run_once(cortex_m_nn::Model& model) {
  for (size_t i = 0; i < model.num_inputs(); ++i) {
    std::vector<float> zeros(model.input_size(i), 0.0f);
    std::vector<int8_t> zero_q(model.input_size(i), 0);
    const cortex_m_nn::Status status = model.input_is_int8(i)
        ? model.set_input(i, zero_q.data(), zero_q.size())
        : model.set_input(i, zeros.data(), zeros.size());
    if (status != cortex_m_nn::Status::kOk) return status;
  }
  return model.run();
}

// Writes `image` into the partition as a download would, in 1000-byte pieces.
int write_partition(const unsigned char* image, size_t size) {
  cortex_m_nn::PartitionWriter writer(FIXED_PARTITION_ID(model_partition));
  int status = writer.begin(size);
  for (size_t at = 0; status == 0 && at < size; at += 1000) {
    status = writer.write(image + at, size - at < 1000 ? size - at : 1000);
  }
  return status == 0 ? writer.finish() : status;
}

// Loads `image` (of `size` bytes at `image`, or from the partition it is written into).
cortex_m_nn::Status load(cortex_m_nn::Model& model, bool partition, const unsigned char* image,
                         size_t size, int* serving) {
  if (!partition) return model.load(image, size);
  const int written = write_partition(image, size);
  cortex_m_nn::FlashPartition source(FIXED_PARTITION_ID(model_partition));
  const char* same = "-";
  if (*serving >= 0) {  // the buffer in service is refused, and changes nothing
    same = cortex_m_nn::to_string(model.load(source, copies[*serving], sizeof(copies[0])));
  }
  snprintf(note, sizeof(note), "|write=%d|same_buffer=%s", written, same);
  const int next = *serving == 0 ? 1 : 0;
  const cortex_m_nn::Status status = model.load(source, copies[next], sizeof(copies[0]));
  if (status == cortex_m_nn::Status::kOk) *serving = next;
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  const bool partition = argc > 1 && strcmp(argv[1], "--partition") == 0;
  std::vector<unsigned char*> images;  // kept: a model reads its image while it runs it
  int serving = -1;  // the copy buffer holding the program in service
  {
    cortex_m_nn::Model model({arena, sizeof(arena), method, sizeof(method), temp, sizeof(temp)});
    for (int i = partition ? 2 : 1; i < argc; ++i) {
      size_t size = 0;
      unsigned char* image = read_file(argv[i], &size);
      if (image == nullptr) {
        printf("%s: cannot read\n", argv[i]);
        return 2;
      }
      images.push_back(image);
      const cortex_m_nn::Status status = load(model, partition, image, size, &serving);
      printf("%d|%s|%s", partition ? i - 1 : i, cortex_m_nn::to_string(status), model.error());
      printf("|loaded=%d", model.loaded() ? 1 : 0);
      if (model.loaded()) printf("|run=%s", cortex_m_nn::to_string(run_once(model)));
      printf("%s\n", note);
    }
  }
  for (unsigned char* image : images) free(image);
  const stub_flash_counts counts = stub_flash_get_counts();
  if (partition && counts.refused != 0) {
    printf("the flash refused %u calls\n", counts.refused);
    return 3;
  }
  return 0;
}
