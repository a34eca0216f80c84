#ifndef GLASSES_CSYSTEM_H
#define GLASSES_CSYSTEM_H
// Linux calls that glibc declares only under _GNU_SOURCE, which Swift's Glibc module is
// built without: typed wrappers compiled in C (shim.c, with _GNU_SOURCE), no logic.
// Elsewhere they fail with ENOSYS and FileIO uses fsync instead.

/// syncfs(2): flushes every file of the filesystem holding `fd`.
int glasses_syncfs(int fd);

/// sync_file_range(2) with SYNC_FILE_RANGE_WRITE: starts writeback of a range, no wait.
int glasses_sync_file_range_write(int fd, long long offset, long long count);

/// Names the calling thread (pthread_setname_np; Linux keeps 15 bytes).
void glasses_set_thread_name(const char *name);

#endif
