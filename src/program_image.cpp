// cortex_m_nn::check_image: a program image's header read and checked (docs/program-image.md;
// the writer is python/cortex_m_nn/embed/program_image.py). Every field is read byte by byte,
// little-endian, from inside the image's bounds.
#include "cortex_m_nn/program_image.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

namespace cortex_m_nn {
namespace {

constexpr char kMagic[8] = {'C', 'M', 'N', 'N', 'P', 'R', 'O', 'G'};
constexpr uint16_t kFormatVersion = 1;
constexpr size_t kAlignment = 16;
// Field offsets (docs/program-image.md).
enum Offset : size_t {
  kVersion = 8, kHeaderSize = 10, kHeaderCrc = 12, kProgramOffset = 16, kProgramBytes = 20,
  kProgramCrc = 24, kOpsVersion = 28, kIsa = 32, kRounding = 33, kInputs = 34, kOutputs = 35,
  kArena = 36, kMethod = 40, kTemp = 44, kPlanned = 48, kCaseCount = 50, kCaseBytes = 52,
  kInputInt8 = 64, kOutputInt8 = 72, kInputScales = 80, kOutputScales = 112,
  kInputZeroPoints = 144, kOutputZeroPoints = 176,
};

struct CrcTable {
  uint32_t entries[256];
  constexpr CrcTable() : entries() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) {
        c = (c & 1U) != 0 ? 0xEDB88320U ^ (c >> 1) : c >> 1;
      }
      entries[i] = c;
    }
  }
};
constexpr CrcTable kCrc;

uint16_t u16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
uint32_t u32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | (static_cast<uint32_t>(p[1]) << 8) |
      (static_cast<uint32_t>(p[2]) << 16) | (static_cast<uint32_t>(p[3]) << 24);
}

ImageStatus say(ImageStatus status, char* message, size_t bytes, const char* format, ...) {
  if (message != nullptr && bytes > 0) {
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(message, bytes, format, arguments);
    va_end(arguments);
  }
  return status;
}

// The header CRC: the header and the kernel list after it (the `offset` bytes before the
// program), with the CRC's own four bytes read as zero.
uint32_t header_crc(const uint8_t* header, size_t offset) {
  const uint8_t zero[4] = {0, 0, 0, 0};
  uint32_t crc = crc32(header, kHeaderCrc);
  crc = crc32(zero, sizeof(zero), crc);
  return crc32(header + kHeaderCrc + 4, offset - kHeaderCrc - 4, crc);
}

void read_fields(const uint8_t* h, ProgramImage* image) {
  image->program_bytes = u32(h + kProgramBytes);
  image->ops_version = u32(h + kOpsVersion);
  image->isa = h[kIsa];
  image->rounding = h[kRounding];
  image->inputs = h[kInputs];
  image->outputs = h[kOutputs];
  image->arena_bytes = u32(h + kArena);
  image->method_allocator_bytes = u32(h + kMethod);
  image->temp_allocator_bytes = u32(h + kTemp);
  image->planned_buffers = u16(h + kPlanned);
  image->case_count = u16(h + kCaseCount);
  for (size_t i = 0; i < kImageMaxIo; ++i) {
    image->input_int8[i] = h[kInputInt8 + i];
    image->output_int8[i] = h[kOutputInt8 + i];
    const uint32_t in = u32(h + kInputScales + 4 * i);
    const uint32_t out = u32(h + kOutputScales + 4 * i);
    memcpy(&image->input_scales[i], &in, sizeof(float));
    memcpy(&image->output_scales[i], &out, sizeof(float));
    image->input_zero_points[i] = static_cast<int32_t>(u32(h + kInputZeroPoints + 4 * i));
    image->output_zero_points[i] = static_cast<int32_t>(u32(h + kOutputZeroPoints + 4 * i));
  }
}

// Whether `bytes` at `names` are exactly `count` NUL-terminated, non-empty names.
bool valid_names(const char* names, size_t bytes, size_t count) {
  size_t found = 0;
  size_t length = 0;
  for (size_t i = 0; i < bytes; ++i) {
    if (names[i] == '\0') {
      if (length == 0) {
        return false;
      }
      ++found;
      length = 0;
    } else {
      ++length;
    }
  }
  return length == 0 && found == count;
}

bool linked(const char* name, const ImageLimits& limits) {
  for (size_t i = 0; i < limits.case_count; ++i) {
    if (strcmp(name, limits.cases[i]) == 0) {
      return true;
    }
  }
  return false;
}

// The ABI, the kernel cases and the memory, against what the firmware offers.
ImageStatus check_fit(const ProgramImage& image, const ImageLimits& limits, char* message,
                      size_t bytes) {
  static const char* const kIsas[] = {"scalar", "dsp", "mve"};
  static const char* const kRoundings[] = {"double", "single"};
  if (image.isa != limits.isa || image.rounding != limits.rounding ||
      image.ops_version != limits.ops_version) {
    return say(ImageStatus::kAbiMismatch, message, bytes,
               "compiled for isa=%s rounding=%s ops_version=%u, these kernels are isa=%s "
               "rounding=%s ops_version=%u: recompile the model for this firmware's target",
               image.isa < 3 ? kIsas[image.isa] : "?",
               image.rounding < 2 ? kRoundings[image.rounding] : "?",
               static_cast<unsigned>(image.ops_version), kIsas[limits.isa % 3],
               kRoundings[limits.rounding % 2], static_cast<unsigned>(limits.ops_version));
  }
  const char* name = image.cases;
  for (size_t i = 0; i < image.case_count; ++i, name += strlen(name) + 1) {
    if (!linked(name, limits)) {
      return say(ImageStatus::kMissingKernel, message, bytes,
                 "calls kernel %s, which this firmware does not link: build the firmware for "
                 "this program too", name);
    }
  }
  const struct {
    const char* what;
    size_t needed;
    size_t reserved;
  } memories[] = {{"arena", image.arena_bytes, limits.arena_bytes},
                  {"method allocator", image.method_allocator_bytes,
                   limits.method_allocator_bytes},
                  {"temporary allocator", image.temp_allocator_bytes,
                   limits.temp_allocator_bytes}};
  for (const auto& memory : memories) {
    if (memory.needed > memory.reserved) {
      return say(ImageStatus::kTooLarge, message, bytes,
                 "needs a %u B %s, the firmware reserved %u B: give the model more memory",
                 static_cast<unsigned>(memory.needed), memory.what,
                 static_cast<unsigned>(memory.reserved));
    }
  }
  return ImageStatus::kOk;
}

}  // namespace

const char* image_status_name(ImageStatus status) {
  static const char* const kNames[] = {
      "ok", "truncated", "not an image", "other format", "header damaged", "program damaged",
      "compiled for other kernels", "missing kernel", "too large"};
  const size_t index = static_cast<size_t>(status);
  return index < sizeof(kNames) / sizeof(kNames[0]) ? kNames[index] : "unknown";
}

uint32_t crc32(const void* data, size_t size, uint32_t crc) {
  const auto* bytes = static_cast<const uint8_t*>(data);
  crc = ~crc;
  for (size_t i = 0; i < size; ++i) {
    crc = kCrc.entries[(crc ^ bytes[i]) & 0xFFU] ^ (crc >> 8);
  }
  return ~crc;
}

size_t image_length(const void* header) {
  const auto* h = static_cast<const uint8_t*>(header);
  if (h == nullptr || memcmp(h, kMagic, sizeof(kMagic)) != 0) {
    return 0;
  }
  const uint64_t length = static_cast<uint64_t>(u32(h + kProgramOffset)) + u32(h + kProgramBytes);
  return length > SIZE_MAX ? SIZE_MAX : static_cast<size_t>(length);
}

ImageStatus check_image(const void* data, size_t size, const ImageLimits& limits,
                        ProgramImage* image, char* message, size_t bytes) {
  const auto* h = static_cast<const uint8_t*>(data);
  if (h == nullptr || size < kImageHeaderBytes) {
    return say(ImageStatus::kTruncated, message, bytes,
               "%u B: shorter than a program image's %u-byte header", static_cast<unsigned>(size),
               static_cast<unsigned>(kImageHeaderBytes));
  }
  if (memcmp(h, kMagic, sizeof(kMagic)) != 0) {
    return say(ImageStatus::kNotAnImage, message, bytes,
               "not a program image (no CMNNPROG): write one with cortex-m-compile embed --image");
  }
  if (u16(h + kVersion) != kFormatVersion || u16(h + kHeaderSize) != kImageHeaderBytes) {
    return say(ImageStatus::kOtherFormat, message, bytes,
               "image format %u, this firmware reads format %u: write the image with the "
               "cortex-m-compile of this firmware", u16(h + kVersion), kFormatVersion);
  }
  const size_t offset = u32(h + kProgramOffset);
  const size_t program = u32(h + kProgramBytes);
  if (offset > size || program > size - offset) {  // (a damaged offset reads as truncated)
    return say(ImageStatus::kTruncated, message, bytes,
               "the image holds %u B, its program ends at %u B: the copy is incomplete",
               static_cast<unsigned>(size), static_cast<unsigned>(offset + program));
  }
  if (offset < kImageHeaderBytes || header_crc(h, offset) != u32(h + kHeaderCrc)) {
    return say(ImageStatus::kHeaderDamaged, message, bytes,
               "the image's header is damaged (CRC-32): write the image again");
  }
  const size_t names = u32(h + kCaseBytes);
  ProgramImage read{};
  read_fields(h, &read);
  if (offset % kAlignment != 0 || names > offset - kImageHeaderBytes ||
      read.inputs > kImageMaxIo || read.outputs > kImageMaxIo ||
      !valid_names(reinterpret_cast<const char*>(h) + kImageHeaderBytes, names,
                   read.case_count)) {
    return say(ImageStatus::kHeaderDamaged, message, bytes,
               "the image's header contradicts itself: write the image again");
  }
  if (crc32(h + offset, program) != u32(h + kProgramCrc)) {
    return say(ImageStatus::kProgramDamaged, message, bytes,
               "the program is damaged (CRC-32): write the image again");
  }
  read.program = h + offset;
  read.cases = reinterpret_cast<const char*>(h) + kImageHeaderBytes;
  const ImageStatus fit = check_fit(read, limits, message, bytes);
  if (fit != ImageStatus::kOk) {
    return fit;
  }
  if (image != nullptr) {
    *image = read;
  }
  if (message != nullptr && bytes > 0) {
    message[0] = '\0';
  }
  return ImageStatus::kOk;
}

}  // namespace cortex_m_nn
