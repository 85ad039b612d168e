// Program images in Zephyr flash partitions, through Zephyr's flash-map API
// (CONFIG_CORTEX_M_NN_MODEL_PARTITION=y builds src/flash_partition.cpp).
//
// Loading: the image is read into a buffer of the application's and loaded from there (any
// flash: internal, or external behind a driver). Two buffers let a model keep running its
// program while the update is read into the other one:
//
//   alignas(16) static uint8_t images[2][64 * 1024];
//   cortex_m_nn::FlashPartition partition(FIXED_PARTITION_ID(model_partition));
//   if (model.load(partition, images[next], sizeof(images[next])) != cortex_m_nn::Status::kOk) {
//     printk("%s\n", model.error());  // the program loaded before, if any, still runs
//   }
//
// A memory-mapped partition (internal flash the core executes from) can also be run in place,
// with no copy: model.load(address, FIXED_PARTITION_SIZE(model_partition)); it must then not
// be written while the model runs it.
//
// Updating: write the new image (cortex-m-compile embed --image) into the partition as it
// arrives, from any transport, with PartitionWriter, then load it again. The image is checked
// whole when it is loaded: an interrupted or damaged write is refused in one line and the
// model keeps the program it ran (docs/zephyr.md, "Models as data").
#ifndef CORTEX_M_NN_FLASH_PARTITION_H
#define CORTEX_M_NN_FLASH_PARTITION_H

#include <stddef.h>
#include <stdint.h>

#include <zephyr/storage/flash_map.h>

#include "cortex_m_nn/model.h"

namespace cortex_m_nn {

// A flash partition as a program image source (flash_area_open, flash_area_read).
class FlashPartition final : public ImageSource {
 public:
  explicit FlashPartition(uint8_t id);
  ~FlashPartition();
  FlashPartition(const FlashPartition&) = delete;
  FlashPartition& operator=(const FlashPartition&) = delete;

  // flash_area_open's result: 0, or a negative errno (no such partition, no driver).
  int status() const { return status_; }
  size_t size() const override;
  bool read(size_t offset, void* destination, size_t bytes) override;
  const char* name() const override { return name_; }

 private:
  const struct flash_area* area_ = nullptr;
  int status_;
  char name_[64];
};

// Writes a program image into a flash partition piece by piece, as a download delivers it:
// begin() erases the partition, write() takes the pieces (any sizes; whole write blocks go to
// flash), finish() writes the last block padded with the erased value. Each returns 0 or a
// negative errno (flash_area_erase, flash_area_write).
class PartitionWriter {
 public:
  explicit PartitionWriter(uint8_t id);
  ~PartitionWriter();
  PartitionWriter(const PartitionWriter&) = delete;
  PartitionWriter& operator=(const PartitionWriter&) = delete;

  // Erases the partition for an image of `bytes`; -EFBIG if it does not fit, -ENOTSUP if the
  // flash's write block is larger than kMaxWriteBlock.
  int begin(size_t bytes);
  int write(const void* data, size_t bytes);
  int finish();

  static constexpr size_t kMaxWriteBlock = 128;

 private:
  int flush_block();

  const struct flash_area* area_ = nullptr;
  int status_;
  size_t block_ = 1;
  size_t offset_ = 0;    // bytes written to flash
  size_t expected_ = 0;  // bytes begin() was told of
  size_t pending_ = 0;   // bytes waiting in block_buffer_
  alignas(8) uint8_t block_buffer_[kMaxWriteBlock];
};

}  // namespace cortex_m_nn

#endif  // CORTEX_M_NN_FLASH_PARTITION_H
