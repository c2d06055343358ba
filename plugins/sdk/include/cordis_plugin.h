/*
 * cordis_plugin.h: the C ABI of cordis tool plugins, version 1.0.
 *
 * A plugin is a shared library exporting one symbol, cordis_plugin_descriptor. The full
 * specification is docs/plugin-abi.md; the Rust mirror is cordis_plugin_sdk::abi.
 *
 * Rules: strings are borrowed (ptr, len) UTF-8, valid only during the call; structured data is
 * JSON; outputs are copied out through the host's CordisWriter, so no allocation crosses the
 * boundary; every function returns a CORDIS_STATUS_* code and, unless OK, writes a message.
 * Nothing may unwind (C++ exceptions, Rust panics) out of these functions.
 */
#ifndef CORDIS_PLUGIN_H
#define CORDIS_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* "CORDPLUG" read as a little-endian 64-bit integer. */
#define CORDIS_PLUGIN_MAGIC 0x47554C5044524F43ULL
#define CORDIS_ABI_MAJOR 1
#define CORDIS_ABI_MINOR 0

#define CORDIS_STATUS_OK 0
#define CORDIS_STATUS_ERROR 1
#define CORDIS_STATUS_PANIC 2
#define CORDIS_STATUS_BAD_INPUT 3
#define CORDIS_STATUS_INCOMPATIBLE_HOST 4

/* Descriptor flag: invoke may run concurrently. Without it the host serializes calls. */
#define CORDIS_FLAG_THREAD_SAFE 1ULL

#define CORDIS_LOG_ERROR 1
#define CORDIS_LOG_WARN 2
#define CORDIS_LOG_INFO 3
#define CORDIS_LOG_DEBUG 4

/* Both tables start with this header. Readers accept an equal major version, any minor
 * version, and read only the fields inside struct_size. */
typedef struct CordisHeader {
    uint64_t magic;
    uint16_t abi_major;
    uint16_t abi_minor;
    uint32_t struct_size;
} CordisHeader;

/* A borrowed UTF-8 string, not NUL-terminated. */
typedef struct CordisStr {
    const uint8_t *ptr;
    size_t len;
} CordisStr;

/* Appends bytes to a host-owned buffer; call it during the call only, any number of times. */
typedef struct CordisWriter {
    void *ctx;
    void (*write)(void *ctx, const uint8_t *ptr, size_t len);
} CordisWriter;

/* What the host offers; valid for the life of the process; log is thread-safe. */
typedef struct CordisHost {
    CordisHeader header;
    void (*log)(const struct CordisHost *host, uint32_t level, CordisStr message);
    const void *host_data;
} CordisHost;

/* config: the entry's config as JSON ("null" when absent). On OK, *instance is set. */
typedef int32_t (*CordisCreateFn)(const CordisHost *host, CordisStr config, void **instance,
                                  CordisWriter err);
/* Writes {"tools":[{"name":…,"description":…,"parameters":{…},"timeout_ms":…?}]}. */
typedef int32_t (*CordisDescribeFn)(void *instance, CordisWriter out);
/* Writes the result as JSON on OK, else a message. */
typedef int32_t (*CordisInvokeFn)(void *instance, CordisStr tool, CordisStr args,
                                  CordisWriter out);
/* Called once per instance, after every call on it has returned. */
typedef int32_t (*CordisDestroyFn)(void *instance);

typedef struct CordisDescriptor {
    CordisHeader header; /* struct_size = sizeof(CordisDescriptor) */
    uint64_t flags;
    CordisCreateFn create;
    CordisDescribeFn describe;
    CordisInvokeFn invoke;
    CordisDestroyFn destroy;
} CordisDescriptor;

/* The one exported symbol; returns a pointer to a static descriptor. */
const CordisDescriptor *cordis_plugin_descriptor(void);

#ifdef __cplusplus
}
#endif

#endif /* CORDIS_PLUGIN_H */
