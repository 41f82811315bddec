#ifndef CSPAWN_H
#define CSPAWN_H

#include <sys/types.h>

/// Starts `path` with `argv` (NULL-terminated) and the caller's environment, its
/// standard input, output and error the given descriptors (-1: the caller's own), every
/// other descriptor closed, every signal's disposition default and none blocked, and, when
/// `new_process_group`, as the leader of a new process group. Returns 0 and sets `pid`, or
/// an errno value.
int cspawn_start(pid_t *pid, const char *path, char *const argv[],
                 int stdin_fd, int stdout_fd, int stderr_fd, int new_process_group);

/// Blocks until `pid` has exited, without reaping it (so its id stays this process's child
/// until the caller reaps it). Returns 0, or an errno value (ECHILD: already reaped).
int cspawn_wait_exited(pid_t pid);

#endif
