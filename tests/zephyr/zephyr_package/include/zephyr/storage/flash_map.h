// Host stand-in for Zephyr's <zephyr/storage/flash_map.h> (include/zephyr/storage/flash_map.h):
// the same declarations, over a flash that lives in RAM and behaves as Zephyr's flash simulator
// (drivers/flash/flash_simulator.c) does by default: erased bytes read 0xff, writes must be
// whole, aligned write blocks onto erased bytes, erases whole erase blocks.
//
// One partition, id 0, labelled model_partition (FIXED_PARTITION_ID(model_partition)), of
// STUB_FLASH_PARTITION_BYTES; flash_map_stub.cpp implements it.
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifndef STUB_FLASH_PARTITION_BYTES
#define STUB_FLASH_PARTITION_BYTES (1024 * 1024)
#endif
#define STUB_FLASH_WRITE_BLOCK 8
#define STUB_FLASH_ERASE_BLOCK 4096

#define STUB_FIXED_PARTITION_ID_model_partition 0
#define FIXED_PARTITION_ID(label) STUB_FIXED_PARTITION_ID_##label
#define FIXED_PARTITION_SIZE(label) STUB_FLASH_PARTITION_BYTES
#define FIXED_PARTITION_EXISTS(label) 1

struct device;

#ifdef __cplusplus
extern "C" {
#endif

struct flash_area {
  uint8_t fa_id;
  uint8_t fa_device_id;
  uint16_t pad16;
  off_t fa_off;
  size_t fa_size;
  const struct device* fa_dev;
};

int flash_area_open(uint8_t id, const struct flash_area** fa);
void flash_area_close(const struct flash_area* fa);
int flash_area_read(const struct flash_area* fa, off_t off, void* dst, size_t len);
int flash_area_write(const struct flash_area* fa, off_t off, const void* src, size_t len);
int flash_area_erase(const struct flash_area* fa, off_t off, size_t len);
uint32_t flash_area_align(const struct flash_area* fa);
uint8_t flash_area_erased_val(const struct flash_area* fa);

// The stand-in's own: calls of each kind, and the calls it refused (for the tests).
struct stub_flash_counts {
  unsigned opens, reads, writes, erases, refused;
};
struct stub_flash_counts stub_flash_get_counts(void);

#ifdef __cplusplus
}
#endif
