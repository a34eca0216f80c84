// Test-only: starts the test suite's network guard in the test runner, before main and so
// before any thread or test exists (setenv is then safe, and libcurl reads the variables
// from the first transfer on).
//
// The guard is Tests/Tools/netguard.py, a proxy on 127.0.0.1 that answers every request
// 403 and logs it. `https_proxy`, `http_proxy` and `all_proxy` point at it and `no_proxy`
// keeps loopback direct, in this process (in-process transfers through libcurl) and, through
// Subprocess, in every program a test starts. The uppercase variants are removed, so a
// developer's own proxy never carries a test's traffic out. If the proxy cannot start, the
// variables point at a port bound here and never listened on (every connection is refused:
// the guard fails closed) and glasses_netguard_problem() says why, which fails every test.
//
// At exit the runner closes the proxy's stdin; the proxy lists every attempt no test
// reported and exits 1 if there was one, and the runner then exits 1 as well.
#define _GNU_SOURCE
#include "CTestNetGuard.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static pid_t proxy_pid = 0;
static int proxy_stdin = -1;
static char directory[4096];
static char problem[1024];

const char *glasses_netguard_directory(void) { return directory[0] ? directory : NULL; }
const char *glasses_netguard_problem(void) { return problem[0] ? problem : NULL; }

static void use_proxy(int port) {
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", port);
    setenv("https_proxy", url, 1);
    setenv("http_proxy", url, 1);
    setenv("all_proxy", url, 1);
    setenv("no_proxy", "localhost,127.0.0.1,::1", 1);
    unsetenv("HTTPS_PROXY");
    unsetenv("HTTP_PROXY");
    unsetenv("ALL_PROXY");
    unsetenv("NO_PROXY");
}

/// A loopback port bound and never listened on (kept for the process's life): a connection
/// to it is refused at once.
static int closed_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in address;
    memset(&address, 0, sizeof address);
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (fd < 0 || bind(fd, (struct sockaddr *)&address, sizeof address) != 0 ||
        getsockname(fd, (struct sockaddr *)&address, &length) != 0) {
        return 9;   // discard: nothing listens there on a test machine
    }
    return ntohs(address.sin_port);
}

static void fail_closed(const char *why) {
    snprintf(problem, sizeof problem, "%s", why);
    use_proxy(closed_port());
}

static void finish(void) {
    if (proxy_pid <= 0) return;
    fflush(stdout);
    fflush(stderr);
    close(proxy_stdin);
    int status = 0;
    while (waitpid(proxy_pid, &status, 0) == -1) {
        if (errno != EINTR) return;   // not our child (a forked copy of the runner exiting)
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
    if (!(WIFEXITED(status) && WEXITSTATUS(status) == 1)) {
        fprintf(stderr, "network guard: FAILED: its proxy ended abnormally (wait status %d)\n", status);
    }
    _exit(1);
}

/// The proxy script: $GLASSES_NETGUARD_SCRIPT, else Tests/Tools/netguard.py beside this file.
static int script_path(char *out, size_t size) {
    snprintf(out, size, "Tests/Tools/netguard.py");
    const char *override = getenv("GLASSES_NETGUARD_SCRIPT");
    if (override && *override) return snprintf(out, size, "%s", override) < (int)size;
    const char *here = __FILE__;   // …/Tests/NetGuard/netguard.c (SwiftPM compiles absolute paths)
    const char *cut = strstr(here, "/NetGuard/netguard.c");
    if (!cut || here[0] != '/') return 0;
    return snprintf(out, size, "%.*s/Tools/netguard.py", (int)(cut - here), here) < (int)size;
}

__attribute__((constructor)) static void start_network_guard(void) {
    char script[4096];
    if (!script_path(script, sizeof script) || access(script, R_OK) != 0) {
        char why[sizeof problem];
        snprintf(why, sizeof why, "its proxy script %s is not readable (GLASSES_NETGUARD_SCRIPT names another)", script);
        fail_closed(why);
        return;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(directory, sizeof directory, "%s/glasses-netguard-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(directory)) {
        directory[0] = 0;
        fail_closed("cannot make its log folder (mkdtemp)");
        return;
    }
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0) {
        fail_closed("pipe2 failed");
        return;
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    posix_spawnattr_t attributes;
    posix_spawnattr_init(&attributes);
    // A group of its own: Ctrl-C stops the runner, and the proxy still reports at EOF.
    posix_spawnattr_setpgroup(&attributes, 0);
    posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
    char *argv[] = {"/usr/bin/env", "python3", script, directory, NULL};
    int rc = posix_spawn(&proxy_pid, argv[0], &actions, &attributes, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
    close(in[0]);
    close(out[1]);
    if (rc != 0) {
        proxy_pid = 0;
        close(in[1]);
        close(out[0]);
        fail_closed("cannot run python3");
        return;
    }
    proxy_stdin = in[1];
    // Its first line is "PORT <n>" (EOF first: it failed to start).
    char line[64];
    size_t used = 0;
    while (used < sizeof line - 1) {
        struct pollfd ready = {.fd = out[0], .events = POLLIN};
        int n = poll(&ready, 1, 30000);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        ssize_t got = read(out[0], line + used, 1);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0 || line[used] == '\n') break;
        used += 1;
    }
    line[used] = 0;
    close(out[0]);
    int port = 0;
    if (sscanf(line, "PORT %d", &port) != 1 || port <= 0 || port > 65535) {
        fail_closed("netguard.py did not print its port");
        close(proxy_stdin);
        kill(proxy_pid, SIGKILL);
        waitpid(proxy_pid, NULL, 0);
        proxy_pid = 0;
        return;
    }
    use_proxy(port);
    atexit(finish);
}
