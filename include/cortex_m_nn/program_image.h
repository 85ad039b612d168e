// A program image (docs/program-image.md): a .pte with what firmware must check before it
// loads the program from any memory — a flash partition, a file read into RAM, an array.
//
//   cortex_m_nn::ProgramImage image;
//   char why[160];
//   if (cortex_m_nn::check_image(bytes, size, limits, &image, why, sizeof(why)) !=
//       cortex_m_nn::ImageStatus::kOk) { printk("%s\n", why); ... }  // the old model runs on
//
// check_image reads the 256-byte header, checks both CRC-32s (header, program), the format,
// the operator ABI, that every kernel case the program calls is linked in this image and that
// the memory it needs fits what the firmware reserved; it never reads outside [data, data +
// size) and touches nothing else, so a model in service keeps running while an update is
// checked. Plain C++, no ExecuTorch or CMSIS-NN: the host fuzzes it (tests/python).
#ifndef CORTEX_M_NN_PROGRAM_IMAGE_H
#define CORTEX_M_NN_PROGRAM_IMAGE_H

#include <stddef.h>
#include <stdint.h>

namespace cortex_m_nn {

inline constexpr size_t kImageHeaderBytes = 256;
inline constexpr size_t kImageMaxIo = 8;  // inputs (and outputs) a header records

enum class ImageStatus : uint8_t {  // image_status_name() names them in this order
  kOk = 0,
  kTruncated,        // fewer bytes than the header or the program it describes
  kNotAnImage,       // no CMNNPROG magic
  kOtherFormat,      // another format version or header size
  kHeaderDamaged,    // the header's CRC-32 differs, or its fields contradict each other
  kProgramDamaged,   // the program's CRC-32 differs
  kAbiMismatch,      // compiled for another ISA, rounding or operator version
  kMissingKernel,    // calls a kernel case this firmware does not link
  kTooLarge,         // needs more arena or allocator memory than the firmware reserved
};

// "ok", "truncated", ...
const char* image_status_name(ImageStatus status);

// What the firmware offers a program: its kernel ABI (cortex_m_nn/abi.h codes) and memory.
struct ImageLimits {
  uint32_t ops_version;
  uint8_t isa;       // 0 scalar, 1 dsp, 2 mve
  uint8_t rounding;  // 0 double, 1 single
  size_t arena_bytes;
  size_t method_allocator_bytes;
  size_t temp_allocator_bytes;
  const char* const* cases;  // the kernel cases ("conv2d.int8") and primitive operators linked
  size_t case_count;
};

// An image's header, read by check_image.
struct ProgramImage {
  const uint8_t* program;  // the .pte, 16-byte aligned in the image
  size_t program_bytes;
  uint32_t ops_version;
  uint8_t isa;
  uint8_t rounding;
  uint8_t inputs;
  uint8_t outputs;
  uint32_t arena_bytes;
  uint32_t method_allocator_bytes;
  uint32_t temp_allocator_bytes;
  uint16_t planned_buffers;
  uint16_t case_count;
  const char* cases;  // case_count NUL-terminated names, one after the other
  uint8_t input_int8[kImageMaxIo];
  uint8_t output_int8[kImageMaxIo];
  float input_scales[kImageMaxIo];
  float output_scales[kImageMaxIo];
  int32_t input_zero_points[kImageMaxIo];
  int32_t output_zero_points[kImageMaxIo];
};

// Reads and checks the image of `size` bytes at `data` against `limits`. kOk: *image holds
// its header; anything else: `message` (of `message_bytes`, may be null) says why in one line.
ImageStatus check_image(const void* data, size_t size, const ImageLimits& limits,
                        ProgramImage* image, char* message, size_t message_bytes);

// The bytes an image claims to span (its program offset plus program bytes), read from its
// first kImageHeaderBytes bytes at `header` without checking them (check_image does): what a
// reader copies before checking. 0 when there is no CMNNPROG magic; SIZE_MAX if the sum
// overflows.
size_t image_length(const void* header);

// IEEE 802.3 CRC-32 of `size` bytes (zlib's crc32), continuing from `crc`.
uint32_t crc32(const void* data, size_t size, uint32_t crc = 0);

}  // namespace cortex_m_nn

#endif  // CORTEX_M_NN_PROGRAM_IMAGE_H
