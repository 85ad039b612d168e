// cortex_m_nn::FlashPartition and PartitionWriter (include/cortex_m_nn/flash_partition.h): a
// Zephyr flash partition read and written through the flash-map API (flash_area_open, _read,
// _erase, _write, _align, _erased_val, _close). Built with CONFIG_CORTEX_M_NN_MODEL_PARTITION.
#include "cortex_m_nn/flash_partition.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

namespace cortex_m_nn {

FlashPartition::FlashPartition(uint8_t id) : status_(flash_area_open(id, &area_)) {
  if (status_ == 0) {
    snprintf(name_, sizeof(name_), "flash partition %u", static_cast<unsigned>(id));
  } else {
    area_ = nullptr;
    snprintf(name_, sizeof(name_), "flash partition %u (flash_area_open: %d)",
             static_cast<unsigned>(id), status_);
  }
}

FlashPartition::~FlashPartition() {
  if (area_ != nullptr) {
    flash_area_close(area_);
  }
}

size_t FlashPartition::size() const { return area_ == nullptr ? 0 : area_->fa_size; }

bool FlashPartition::read(size_t offset, void* destination, size_t bytes) {
  if (area_ == nullptr || offset > area_->fa_size || bytes > area_->fa_size - offset) {
    return false;
  }
  return flash_area_read(area_, static_cast<off_t>(offset), destination, bytes) == 0;
}

PartitionWriter::PartitionWriter(uint8_t id) : status_(flash_area_open(id, &area_)) {
  if (status_ != 0) {
    area_ = nullptr;
  }
}

PartitionWriter::~PartitionWriter() {
  if (area_ != nullptr) {
    flash_area_close(area_);
  }
}

int PartitionWriter::begin(size_t bytes) {
  if (area_ == nullptr) {
    return status_ != 0 ? status_ : -ENODEV;
  }
  block_ = flash_area_align(area_);
  block_ = block_ == 0 ? 1 : block_;
  if (block_ > kMaxWriteBlock) {
    return -ENOTSUP;
  }
  if (bytes > area_->fa_size) {
    return -EFBIG;
  }
  offset_ = 0;
  pending_ = 0;
  expected_ = bytes;
  // The whole partition: its bounds are erase-block aligned, as the devicetree requires.
  return flash_area_erase(area_, 0, area_->fa_size);
}

int PartitionWriter::flush_block() {
  const int status = flash_area_write(area_, static_cast<off_t>(offset_), block_buffer_, block_);
  offset_ += block_;
  pending_ = 0;
  return status;
}

int PartitionWriter::write(const void* data, size_t bytes) {
  if (area_ == nullptr || block_ > kMaxWriteBlock) {
    return -ENODEV;
  }
  if (offset_ + pending_ + bytes > expected_) {
    return -EFBIG;  // more than begin() was told of (and erased)
  }
  const auto* from = static_cast<const uint8_t*>(data);
  while (bytes > 0) {
    if (pending_ == 0 && bytes >= block_) {  // whole blocks straight from the caller's bytes
      const size_t whole = bytes - bytes % block_;
      const int status = flash_area_write(area_, static_cast<off_t>(offset_), from, whole);
      if (status != 0) {
        return status;
      }
      offset_ += whole;
      from += whole;
      bytes -= whole;
      continue;
    }
    const size_t take = block_ - pending_ < bytes ? block_ - pending_ : bytes;
    memcpy(block_buffer_ + pending_, from, take);
    pending_ += take;
    from += take;
    bytes -= take;
    if (pending_ == block_) {
      const int status = flush_block();
      if (status != 0) {
        return status;
      }
    }
  }
  return 0;
}

int PartitionWriter::finish() {
  if (area_ == nullptr) {
    return -ENODEV;
  }
  if (pending_ == 0) {
    return 0;
  }
  memset(block_buffer_ + pending_, flash_area_erased_val(area_), block_ - pending_);
  return flush_block();
}

}  // namespace cortex_m_nn
