// The host's view of cortex_m_nn::check_image (tests/python/test_program_image.py): reads the
// firmware's limits from the command line and each image file named after them, and prints
// one line per image: its status name, then the header fields or the message.
//
//   check_image OPS_VERSION ISA ROUNDING ARENA METHOD TEMP CASE,CASE,... IMAGE...
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "cortex_m_nn/program_image.h"

namespace {

std::vector<unsigned char> read_file(const char* path) {
  std::vector<unsigned char> bytes;
  FILE* file = fopen(path, "rb");
  if (file == nullptr) {
    return bytes;
  }
  unsigned char buffer[4096];
  size_t count = 0;
  while ((count = fread(buffer, 1, sizeof(buffer), file)) > 0) {
    bytes.insert(bytes.end(), buffer, buffer + count);
  }
  fclose(file);
  return bytes;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 8) {
    fprintf(stderr, "usage: %s OPS ISA ROUNDING ARENA METHOD TEMP CASES IMAGE...\n", argv[0]);
    return 2;
  }
  std::vector<std::string> names;
  for (const char* p = argv[7]; *p != '\0';) {
    const char* end = strchr(p, ',');
    names.emplace_back(p, end == nullptr ? strlen(p) : static_cast<size_t>(end - p));
    p = end == nullptr ? p + strlen(p) : end + 1;
  }
  std::vector<const char*> cases;
  for (const std::string& name : names) {
    cases.push_back(name.c_str());
  }
  const cortex_m_nn::ImageLimits limits{
      static_cast<uint32_t>(strtoul(argv[1], nullptr, 10)),
      static_cast<uint8_t>(atoi(argv[2])),
      static_cast<uint8_t>(atoi(argv[3])),
      strtoul(argv[4], nullptr, 10),
      strtoul(argv[5], nullptr, 10),
      strtoul(argv[6], nullptr, 10),
      cases.data(),
      cases.size()};
  for (int i = 8; i < argc; ++i) {
    const std::vector<unsigned char> bytes = read_file(argv[i]);
    // a copy of exactly the file's bytes on the heap: the sanitizer sees any read past them
    unsigned char* image = static_cast<unsigned char*>(malloc(bytes.empty() ? 1 : bytes.size()));
    if (!bytes.empty()) {
      memcpy(image, bytes.data(), bytes.size());
    }
    cortex_m_nn::ProgramImage read{};
    char message[256];
    const cortex_m_nn::ImageStatus status =
        cortex_m_nn::check_image(image, bytes.size(), limits, &read, message, sizeof(message));
    if (status == cortex_m_nn::ImageStatus::kOk) {
      printf("ok|%zu|%zu|%u|%u|%u|%u|%u|%u|%u|%u|%u|%u", static_cast<size_t>(read.program - image),
             read.program_bytes, read.ops_version, read.isa, read.rounding, read.inputs,
             read.outputs, read.arena_bytes, read.method_allocator_bytes,
             read.temp_allocator_bytes, read.planned_buffers, read.case_count);
      for (size_t k = 0; k < cortex_m_nn::kImageMaxIo; ++k) {
        printf("|%u:%.9g:%d", read.input_int8[k], read.input_scales[k],
               static_cast<int>(read.input_zero_points[k]));
      }
      printf("\n");
    } else {
      printf("%s|%s\n", cortex_m_nn::image_status_name(status), message);
    }
    free(image);
  }
  return 0;
}
