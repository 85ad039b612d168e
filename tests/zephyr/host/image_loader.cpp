// The firmware API's run-time models on the host (tests/zephyr/test_host_apps.py): loads each
// program image named on the command line, in turn, into one model, and prints one line per
// image — its status and message; an image that loads runs once on zero inputs. Built with
// AddressSanitizer and UndefinedBehaviorSanitizer over src/: damaged images must be refused
// without a crash, and a refused one must leave the program loaded before running.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "cortex_m_nn/model.h"

namespace {

alignas(16) unsigned char arena[16 << 20];
alignas(16) unsigned char method[4 << 20];
alignas(16) unsigned char temp[1 << 20];

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
  memcpy(copy, bytes.data(), bytes.size());
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

}  // namespace

int main(int argc, char** argv) {
  std::vector<unsigned char*> images;  // kept: a model reads its image while it runs it
  {
    cortex_m_nn::Model model({arena, sizeof(arena), method, sizeof(method), temp, sizeof(temp)});
    for (int i = 1; i < argc; ++i) {
      size_t size = 0;
      unsigned char* image = read_file(argv[i], &size);
      if (image == nullptr) {
        printf("%s: cannot read\n", argv[i]);
        return 2;
      }
      images.push_back(image);
      const cortex_m_nn::Status status = model.load(image, size);
      printf("%d|%s|%s", i, cortex_m_nn::to_string(status), model.error());
      printf("|loaded=%d", model.loaded() ? 1 : 0);
      if (model.loaded()) printf("|run=%s", cortex_m_nn::to_string(run_once(model)));
      printf("\n");
    }
  }
  for (unsigned char* image : images) free(image);
  return 0;
}
