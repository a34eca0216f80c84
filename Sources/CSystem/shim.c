#include "CSystem.h"
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#ifdef __linux__
int glasses_syncfs(int fd) { return syncfs(fd); }
int glasses_sync_file_range_write(int fd, long long offset, long long count) {
    return sync_file_range(fd, (off_t)offset, (off_t)count, SYNC_FILE_RANGE_WRITE);
}
void glasses_set_thread_name(const char *name) { (void)pthread_setname_np(pthread_self(), name); }
#else
void glasses_set_thread_name(const char *name) { (void)name; }
int glasses_syncfs(int fd) { (void)fd; errno = ENOSYS; return -1; }
int glasses_sync_file_range_write(int fd, long long offset, long long count) {
    (void)fd; (void)offset; (void)count; errno = ENOSYS; return -1;
}
#endif
