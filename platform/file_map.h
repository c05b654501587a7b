/* file_map.h - read-only whole-file memory mapping. */
#ifndef KARA_FILE_MAP_H
#define KARA_FILE_MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct kara_file_map {
    const uint8_t *data;
    size_t size;
} kara_file_map;

/* Map path read-only. Returns 0, or an errno value (message via strerror). */
int kara_file_map_open(const char *path, kara_file_map *m);
void kara_file_map_close(kara_file_map *m);

#endif
