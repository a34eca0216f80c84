// Opens libcurl, libarchive, libbz2 and libsystemd (sd-bus) on first use and forwards each call. No logic: a function
// whose library cannot be loaded answers as the library would on failure (NULL, an error
// code), and glasses_*_load_error() says why.
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>
#include <curl/curl.h>
#include <archive.h>
#include <archive_entry.h>
#include "../CCurl/shim.h"
#include "../CArchive/shim.h"
#include "../CSDBus/shim.h"
#include "../CBZip2/shim.h"

struct library {
    const char *names[3];
    pthread_once_t once;
    void *handle;
    char error[512];
};

static void open_library(struct library *lib) {
    for (int i = 0; i < 3 && lib->names[i]; i++) {
        lib->handle = dlopen(lib->names[i], RTLD_NOW | RTLD_LOCAL);
        if (lib->handle) return;
    }
    const char *why = dlerror();
    snprintf(lib->error, sizeof lib->error, "%s could not be loaded (%s); install it (Debian: libcurl4 / libarchive13 / libbz2-1.0 / libsystemd0)",
             lib->names[0], why ? why : "unknown error");
}

static struct library curl_lib = { { "libcurl.so.4", "libcurl.so", NULL }, PTHREAD_ONCE_INIT, NULL, { 0 } };
static struct library archive_lib = { { "libarchive.so.13", "libarchive.so", NULL }, PTHREAD_ONCE_INIT, NULL, { 0 } };
static struct library systemd_lib = { { "libsystemd.so.0", NULL, NULL }, PTHREAD_ONCE_INIT, NULL, { 0 } };
static struct library bz2_lib = { { "libbz2.so.1.0", "libbz2.so.1", "libbz2.so" }, PTHREAD_ONCE_INIT, NULL, { 0 } };

static void open_curl(void) { open_library(&curl_lib); }
static void open_archive(void) { open_library(&archive_lib); }
static void open_systemd(void) { open_library(&systemd_lib); }
static void open_bz2(void) { open_library(&bz2_lib); }

static void *curl_symbol(const char *name) {
    pthread_once(&curl_lib.once, open_curl);
    return curl_lib.handle ? dlsym(curl_lib.handle, name) : NULL;
}

static void *archive_symbol(const char *name) {
    pthread_once(&archive_lib.once, open_archive);
    return archive_lib.handle ? dlsym(archive_lib.handle, name) : NULL;
}

static void *systemd_symbol(const char *name) {
    pthread_once(&systemd_lib.once, open_systemd);
    return systemd_lib.handle ? dlsym(systemd_lib.handle, name) : NULL;
}

static void *bz2_symbol(const char *name) {
    pthread_once(&bz2_lib.once, open_bz2);
    return bz2_lib.handle ? dlsym(bz2_lib.handle, name) : NULL;
}

const char *glasses_curl_load_error(void) { return curl_lib.handle || !curl_lib.error[0] ? NULL : curl_lib.error; }
const char *glasses_archive_load_error(void) { return archive_lib.handle || !archive_lib.error[0] ? NULL : archive_lib.error; }
const char *glasses_sd_bus_load_error(void) { return systemd_lib.handle || !systemd_lib.error[0] ? NULL : systemd_lib.error; }
const char *glasses_bz2_load_error(void) { return bz2_lib.handle || !bz2_lib.error[0] ? NULL : bz2_lib.error; }

// One resolved pointer per function, looked up once and kept in an atomic slot: threads
// calling at once each see nothing yet (and look it up too: the same value) or the pointer.
static void *resolved(_Atomic(void *) *slot, void *(*symbol)(const char *), const char *name) {
    void *fn = atomic_load_explicit(slot, memory_order_acquire);
    if (!fn) {
        fn = symbol(name);
        if (fn) atomic_store_explicit(slot, fn, memory_order_release);
    }
    return fn;
}

#define FORWARD(lib, ret, name, failure, params, args) \
    ret glasses_##name params { \
        typedef ret (*fn_t) params; \
        static _Atomic(void *) slot; \
        fn_t fn = (fn_t)resolved(&slot, lib##_symbol, #name); \
        if (!fn) return failure; \
        return fn args; \
    }
#define FORWARD_VOID(lib, name, params, args) \
    void glasses_##name params { \
        typedef void (*fn_t) params; \
        static _Atomic(void *) slot; \
        fn_t fn = (fn_t)resolved(&slot, lib##_symbol, #name); \
        if (fn) fn args; \
    }

FORWARD(curl, CURLcode, curl_global_init, CURLE_FAILED_INIT, (long flags), (flags))
FORWARD(curl, CURL *, curl_easy_init, NULL, (void), ())
FORWARD_VOID(curl, curl_easy_cleanup, (CURL *h), (h))
FORWARD_VOID(curl, curl_easy_reset, (CURL *h), (h))
FORWARD(curl, const char *, curl_easy_strerror, "libcurl is not loaded", (CURLcode code), (code))
FORWARD(curl, struct curl_slist *, curl_slist_append, NULL, (struct curl_slist *list, const char *s), (list, s))
FORWARD_VOID(curl, curl_slist_free_all, (struct curl_slist *list), (list))
FORWARD(curl, char *, curl_version, NULL, (void), ())
FORWARD(curl, CURLM *, curl_multi_init, NULL, (void), ())
FORWARD(curl, CURLMcode, curl_multi_cleanup, CURLM_INTERNAL_ERROR, (CURLM *m), (m))
FORWARD(curl, CURLMcode, curl_multi_add_handle, CURLM_INTERNAL_ERROR, (CURLM *m, CURL *h), (m, h))
FORWARD(curl, CURLMcode, curl_multi_remove_handle, CURLM_INTERNAL_ERROR, (CURLM *m, CURL *h), (m, h))
FORWARD(curl, CURLMcode, curl_multi_perform, CURLM_INTERNAL_ERROR, (CURLM *m, int *running), (m, running))
FORWARD(curl, CURLMcode, curl_multi_poll, CURLM_INTERNAL_ERROR,
        (CURLM *m, struct curl_waitfd extra[], unsigned int n, int timeout_ms, int *numfds), (m, extra, n, timeout_ms, numfds))
FORWARD(curl, CURLMsg *, curl_multi_info_read, NULL, (CURLM *m, int *queued), (m, queued))
FORWARD(curl, CURLMcode, curl_multi_wakeup, CURLM_INTERNAL_ERROR, (CURLM *m), (m))
FORWARD(curl, CURLcode, curl_easy_pause, CURLE_FAILED_INIT, (CURL *h, int bitmask), (h, bitmask))
FORWARD(curl, const char *, curl_multi_strerror, "libcurl is not loaded", (CURLMcode code), (code))
FORWARD(curl, CURLSH *, curl_share_init, NULL, (void), ())
FORWARD(curl, CURLSHcode, curl_share_cleanup, CURLSHE_NOT_BUILT_IN, (CURLSH *s), (s))

// The variadic setters and getters, called through a pointer with one typed argument.
typedef CURLcode (*easy_variadic_t)(CURL *, int, ...);
typedef CURLMcode (*multi_variadic_t)(CURLM *, int, ...);

static easy_variadic_t easy_setopt(void) {
    static _Atomic(void *) slot;
    easy_variadic_t fn = (easy_variadic_t)resolved(&slot, curl_symbol, "curl_easy_setopt");
    return fn;
}
static easy_variadic_t easy_getinfo(void) {
    static _Atomic(void *) slot;
    easy_variadic_t fn = (easy_variadic_t)resolved(&slot, curl_symbol, "curl_easy_getinfo");
    return fn;
}

#define SETOPT(suffix, type) \
    CURLcode glasses_easy_setopt_##suffix(CURL *h, CURLoption o, type v) { \
        easy_variadic_t fn = easy_setopt(); \
        return fn ? fn(h, (int)o, v) : CURLE_FAILED_INIT; \
    }
#define GETINFO(suffix, type) \
    CURLcode glasses_easy_getinfo_##suffix(CURL *h, CURLINFO i, type v) { \
        easy_variadic_t fn = easy_getinfo(); \
        return fn ? fn(h, (int)i, v) : CURLE_FAILED_INIT; \
    }

SETOPT(long, long)
SETOPT(off, curl_off_t)
SETOPT(ptr, void *)
SETOPT(str, const char *)
SETOPT(slist, struct curl_slist *)
SETOPT(write, curl_write_callback)
SETOPT(xferinfo, curl_xferinfo_callback)
GETINFO(long, long *)
GETINFO(off, curl_off_t *)
GETINFO(ptr, void **)
GETINFO(str, char **)

CURLMcode glasses_multi_setopt_long(CURLM *m, CURLMoption o, long v) {
    static _Atomic(void *) slot;
    multi_variadic_t fn = (multi_variadic_t)resolved(&slot, curl_symbol, "curl_multi_setopt");
    return fn ? fn(m, (int)o, v) : CURLM_INTERNAL_ERROR;
}

CURLSHcode glasses_share_setopt_long(CURLSH *s, CURLSHoption o, long v) {
    typedef CURLSHcode (*share_variadic_t)(CURLSH *, int, ...);
    static _Atomic(void *) slot;
    share_variadic_t fn = (share_variadic_t)resolved(&slot, curl_symbol, "curl_share_setopt");
    return fn ? fn(s, (int)o, v) : CURLSHE_NOT_BUILT_IN;
}

FORWARD(archive, struct archive *, archive_read_new, NULL, (void), ())
FORWARD(archive, int, archive_read_free, ARCHIVE_FATAL, (struct archive *a), (a))
FORWARD(archive, int, archive_read_support_filter_bzip2, ARCHIVE_FATAL, (struct archive *a), (a))
FORWARD(archive, int, archive_read_support_filter_gzip, ARCHIVE_FATAL, (struct archive *a), (a))
FORWARD(archive, int, archive_read_support_filter_xz, ARCHIVE_FATAL, (struct archive *a), (a))
FORWARD(archive, int, archive_read_support_filter_zstd, ARCHIVE_FATAL, (struct archive *a), (a))
FORWARD(archive, int, archive_read_support_format_tar, ARCHIVE_FATAL, (struct archive *a), (a))
FORWARD(archive, int, archive_read_support_format_zip, ARCHIVE_FATAL, (struct archive *a), (a))
FORWARD(archive, int, archive_read_open_filename, ARCHIVE_FATAL, (struct archive *a, const char *path, size_t block), (a, path, block))
FORWARD(archive, int, archive_read_open, ARCHIVE_FATAL,
        (struct archive *a, void *client, archive_open_callback *open, archive_read_callback *read, archive_close_callback *close),
        (a, client, open, read, close))
FORWARD(archive, int, archive_read_next_header, ARCHIVE_FATAL, (struct archive *a, struct archive_entry **entry), (a, entry))
FORWARD(archive, la_ssize_t, archive_read_data, ARCHIVE_FATAL, (struct archive *a, void *buffer, size_t size), (a, buffer, size))
FORWARD(archive, const char *, archive_error_string, "libarchive is not loaded", (struct archive *a), (a))
FORWARD(archive, const char *, archive_version_details, NULL, (void), ())
FORWARD(archive, mode_t, archive_entry_filetype, 0, (struct archive_entry *e), (e))
FORWARD(archive, const char *, archive_entry_hardlink, NULL, (struct archive_entry *e), (e))
FORWARD(archive, const char *, archive_entry_pathname, NULL, (struct archive_entry *e), (e))
FORWARD(archive, const char *, archive_entry_pathname_utf8, NULL, (struct archive_entry *e), (e))
FORWARD(archive, la_int64_t, archive_entry_size, 0, (struct archive_entry *e), (e))
FORWARD(archive, int, archive_entry_size_is_set, 0, (struct archive_entry *e), (e))
FORWARD(archive, const char *, archive_entry_symlink, NULL, (struct archive_entry *e), (e))

// sd-bus: failures answer as sd-bus does, a negative errno (-ENOSYS: not loaded).
FORWARD(systemd, int, sd_bus_open_system, -ENOSYS, (sd_bus **bus), (bus))
FORWARD(systemd, sd_bus *, sd_bus_flush_close_unref, NULL, (sd_bus *bus), (bus))
FORWARD(systemd, int, sd_bus_message_new_method_call, -ENOSYS,
        (sd_bus *bus, sd_bus_message **m, const char *destination, const char *path, const char *interface, const char *member),
        (bus, m, destination, path, interface, member))
FORWARD(systemd, int, sd_bus_message_set_auto_start, -ENOSYS, (sd_bus_message *m, int b), (m, b))
FORWARD(systemd, int, sd_bus_message_append_basic, -ENOSYS, (sd_bus_message *m, char type, const void *p), (m, type, p))
FORWARD(systemd, int, sd_bus_call, -ENOSYS,
        (sd_bus *bus, sd_bus_message *m, uint64_t usec, sd_bus_error *ret_error, sd_bus_message **reply),
        (bus, m, usec, ret_error, reply))
FORWARD(systemd, int, sd_bus_message_enter_container, -ENOSYS, (sd_bus_message *m, char type, const char *contents), (m, type, contents))
FORWARD(systemd, int, sd_bus_message_read_basic, -ENOSYS, (sd_bus_message *m, char type, void *p), (m, type, p))
FORWARD(systemd, sd_bus_message *, sd_bus_message_unref, NULL, (sd_bus_message *m), (m))
FORWARD_VOID(systemd, sd_bus_error_free, (sd_bus_error *e), (e))

FORWARD(bz2, int, BZ2_bzDecompressInit, BZ_CONFIG_ERROR, (bz_stream *strm, int verbosity, int small), (strm, verbosity, small))
FORWARD(bz2, int, BZ2_bzDecompress, BZ_CONFIG_ERROR, (bz_stream *strm), (strm))
FORWARD(bz2, int, BZ2_bzDecompressEnd, BZ_CONFIG_ERROR, (bz_stream *strm), (strm))
