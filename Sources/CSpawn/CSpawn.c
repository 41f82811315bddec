// posix_spawn with the file actions Foundation's Process lacks a safe way to express on
// Linux: its own close-every-descriptor step reads /proc/self/fd with a buffer over-read
// that crashes the caller now and then (swift-corelibs-foundation#5472).
#define _GNU_SOURCE
#include "CSpawn.h"

#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

extern char **environ;

// glibc's closefrom action came with 2.34 (nested: an undefined function-like macro in one
// #if line is an error even where && would skip it).
#if defined(__GLIBC__)
#if __GLIBC_PREREQ(2, 34)
#define CSPAWN_HAS_CLOSEFROM 1
#endif
#endif

#if !defined(__APPLE__) && !defined(CSPAWN_HAS_CLOSEFROM)
#include <dirent.h>
#include <stdlib.h>

static int add_close_actions(posix_spawn_file_actions_t *actions) {
    DIR *fds = opendir("/proc/self/fd");
    if (fds == NULL) return errno;
    int listing = dirfd(fds);
    int rc = 0;
    struct dirent *entry;
    while (rc == 0 && (entry = readdir(fds)) != NULL) {
        char *end;
        long fd = strtol(entry->d_name, &end, 10);
        if (*end != '\0' || end == entry->d_name || fd < 3 || fd == listing) continue;
        rc = posix_spawn_file_actions_addclose(actions, (int)fd);
    }
    closedir(fds);
    return rc;
}
#endif

int cspawn_start(pid_t *pid, const char *path, char *const argv[],
                 int stdin_fd, int stdout_fd, int stderr_fd, int new_process_group) {
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attributes;
    int rc = posix_spawn_file_actions_init(&actions);
    if (rc != 0) return rc;
    rc = posix_spawnattr_init(&attributes);
    if (rc != 0) {
        posix_spawn_file_actions_destroy(&actions);
        return rc;
    }
    const int given[3] = {stdin_fd, stdout_fd, stderr_fd};
    for (int target = 0; target < 3 && rc == 0; target++) {
        if (given[target] >= 0 && given[target] != target) {
            rc = posix_spawn_file_actions_adddup2(&actions, given[target], target);
        }
    }
    short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
#if defined(__APPLE__)
    // Darwin has no closefrom action: every descriptor not named is closed instead.
    flags |= POSIX_SPAWN_CLOEXEC_DEFAULT;
    for (int target = 0; target < 3 && rc == 0; target++) {
        if (given[target] < 0 || given[target] == target) {
            rc = posix_spawn_file_actions_addinherit_np(&actions, target);
        }
    }
#elif defined(CSPAWN_HAS_CLOSEFROM)
    // Descriptors the gateway holds (sockets, the store, other plugins' pipes) are not the
    // plugin's: a pipe end left open in a child keeps its reader from ever seeing EOF.
    if (rc == 0) rc = posix_spawn_file_actions_addclosefrom_np(&actions, 3);
#else
    // Older C libraries have no closefrom action: each descriptor open now is closed
    // (one opened meanwhile by another thread may reach the child).
    if (rc == 0) rc = add_close_actions(&actions);
#endif
    // Ignored signals survive exec: the gateway ignores SIGPIPE (and its signal handling
    // ignores SIGTERM and SIGINT), which a plugin must not inherit.
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    if (rc == 0) rc = posix_spawnattr_setsigmask(&attributes, &none);
    if (rc == 0) rc = posix_spawnattr_setsigdefault(&attributes, &all);
    if (rc == 0 && new_process_group) {
        flags |= POSIX_SPAWN_SETPGROUP;
        rc = posix_spawnattr_setpgroup(&attributes, 0);
    }
    if (rc == 0) rc = posix_spawnattr_setflags(&attributes, flags);
    if (rc == 0) rc = posix_spawn(pid, path, &actions, &attributes, argv, environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
    return rc;
}

int cspawn_wait_exited(pid_t pid) {
    siginfo_t info;
    while (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT) != 0) {
        if (errno != EINTR) return errno;
    }
    return 0;
}
