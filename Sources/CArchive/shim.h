#ifndef GLASSES_CARCHIVE_SHIM_H
#define GLASSES_CARCHIVE_SHIM_H
// libarchive's types from its headers; its functions through CLibraryLoader, which opens
// libarchive.so.13 on first use (only an archive install needs it).
#include <archive.h>
#include <archive_entry.h>

/// Why libarchive could not be loaded (NULL when it was, or was not tried yet).
const char *glasses_archive_load_error(void);

struct archive *glasses_archive_read_new(void);
int glasses_archive_read_free(struct archive *a);
int glasses_archive_read_support_filter_bzip2(struct archive *a);
int glasses_archive_read_support_filter_gzip(struct archive *a);
int glasses_archive_read_support_filter_xz(struct archive *a);
int glasses_archive_read_support_filter_zstd(struct archive *a);
int glasses_archive_read_support_format_tar(struct archive *a);
int glasses_archive_read_support_format_zip(struct archive *a);
int glasses_archive_read_open_filename(struct archive *a, const char *path, size_t block);
int glasses_archive_read_open(struct archive *a, void *client, archive_open_callback *open,
                              archive_read_callback *read, archive_close_callback *close);
int glasses_archive_read_next_header(struct archive *a, struct archive_entry **entry);
la_ssize_t glasses_archive_read_data(struct archive *a, void *buffer, size_t size);
const char *glasses_archive_error_string(struct archive *a);
const char *glasses_archive_version_details(void);
mode_t glasses_archive_entry_filetype(struct archive_entry *e);
const char *glasses_archive_entry_hardlink(struct archive_entry *e);
const char *glasses_archive_entry_pathname(struct archive_entry *e);
const char *glasses_archive_entry_pathname_utf8(struct archive_entry *e);
la_int64_t glasses_archive_entry_size(struct archive_entry *e);
int glasses_archive_entry_size_is_set(struct archive_entry *e);
const char *glasses_archive_entry_symlink(struct archive_entry *e);

#endif
