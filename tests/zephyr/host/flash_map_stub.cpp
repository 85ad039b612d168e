// The flash-map stand-in (tests/zephyr/zephyr_package/include/zephyr/storage/flash_map.h): one partition in RAM with
// the flash simulator's rules, so a write the real flash would refuse is refused here too.
#include <errno.h>
#include <string.h>

#include <zephyr/storage/flash_map.h>

namespace {

alignas(16) unsigned char flash[STUB_FLASH_PARTITION_BYTES];
bool erased_once = false;
const flash_area partition = {0, 0, 0, 0, STUB_FLASH_PARTITION_BYTES, nullptr};
stub_flash_counts counts = {};

int refuse(int error) {
  ++counts.refused;
  return error;
}

bool inside(const flash_area* fa, off_t off, size_t len) {
  return fa == &partition && off >= 0 && static_cast<size_t>(off) <= fa->fa_size &&
      len <= fa->fa_size - static_cast<size_t>(off);
}

}  // namespace

extern "C" {

int flash_area_open(uint8_t id, const flash_area** fa) {
  ++counts.opens;
  if (!erased_once) {  // the simulator starts erased
    memset(flash, 0xff, sizeof(flash));
    erased_once = true;
  }
  if (id != 0) {
    *fa = nullptr;
    return refuse(-ENOENT);
  }
  *fa = &partition;
  return 0;
}

void flash_area_close(const flash_area*) {}

int flash_area_read(const flash_area* fa, off_t off, void* dst, size_t len) {
  ++counts.reads;
  if (!inside(fa, off, len)) {
    return refuse(-EINVAL);
  }
  memcpy(dst, flash + off, len);
  return 0;
}

int flash_area_write(const flash_area* fa, off_t off, const void* src, size_t len) {
  ++counts.writes;
  if (!inside(fa, off, len) || off % STUB_FLASH_WRITE_BLOCK != 0 ||
      len % STUB_FLASH_WRITE_BLOCK != 0) {
    return refuse(-EINVAL);
  }
  for (size_t i = 0; i < len; ++i) {
    if (flash[off + i] != 0xff) {
      return refuse(-EIO);  // written twice without an erase
    }
  }
  memcpy(flash + off, src, len);
  return 0;
}

int flash_area_erase(const flash_area* fa, off_t off, size_t len) {
  ++counts.erases;
  if (!inside(fa, off, len) || off % STUB_FLASH_ERASE_BLOCK != 0 ||
      len % STUB_FLASH_ERASE_BLOCK != 0) {
    return refuse(-EINVAL);
  }
  memset(flash + off, 0xff, len);
  return 0;
}

uint32_t flash_area_align(const flash_area*) { return STUB_FLASH_WRITE_BLOCK; }

uint8_t flash_area_erased_val(const flash_area*) { return 0xff; }

stub_flash_counts stub_flash_get_counts(void) { return counts; }

}  // extern "C"
