/* landlock.h - Landlock, the kernel's unprivileged sandbox (Linux 5.13 and later), as the
 * grader uses it where bubblewrap cannot start: a ruleset of what may be read, executed and
 * written, applied to a process and to everything it starts from then on. Used by the engine
 * (grader/engine/landlock.c: the runs) and by pl-landlock (grader/tools/landlock-run.c: the
 * class grader's builds). The kernel's interface is spelled out here: the system's header
 * may be older than the kernel it runs on. */
#ifndef PL_LANDLOCK_H
#define PL_LANDLOCK_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#ifndef SYS_landlock_create_ruleset
#define SYS_landlock_create_ruleset 444
#define SYS_landlock_add_rule 445
#define SYS_landlock_restrict_self 446
#endif
#define LL_CREATE_RULESET_VERSION (1U << 0)
#define LL_RULE_PATH_BENEATH 1
#define LL_FS_EXECUTE (1ULL << 0)
#define LL_FS_WRITE_FILE (1ULL << 1)
#define LL_FS_READ_FILE (1ULL << 2)
#define LL_FS_READ_DIR (1ULL << 3)
#define LL_FS_TRUNCATE (1ULL << 14)
#define LL_FS_FILE_RIGHTS (LL_FS_EXECUTE | LL_FS_WRITE_FILE | LL_FS_READ_FILE | LL_FS_TRUNCATE)
#define LL_RX (LL_FS_EXECUTE | LL_FS_READ_FILE | LL_FS_READ_DIR)
#define LL_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define LL_SCOPE_SIGNAL (1ULL << 1)

/* The system's directories every program needs (read and execute): what the engine's
 * sandboxes give a run (grader/engine/contain.c) and pl-landlock's --system. */
#define LL_SYSTEM_DIRS {"/usr", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/opt", "/sys", NULL}

struct ll_ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
};

struct ll_path_beneath_attr {
    uint64_t allowed_access;
    int32_t parent_fd;
} __attribute__((packed));

/* The kernel's Landlock ABI version, 0 when it has none (PL_SANDBOX_NO_LANDLOCK models that). */
static inline int ll_abi(void)
{
    const char *off = getenv("PL_SANDBOX_NO_LANDLOCK");
    if (off && off[0] && strcmp(off, "0")) return 0;
    long v = syscall(SYS_landlock_create_ruleset, NULL, 0, LL_CREATE_RULESET_VERSION);
    return v > 0 ? (int)v : 0;
}

/* Every file-system right this ABI knows (1: 13 rights, 2: + refer, 3: + truncate; the device
 * ioctls of ABI 5 stay unhandled: a GPU needs them on its device files). */
static inline uint64_t ll_handled(int abi)
{
    int bits = abi >= 3 ? 15 : abi == 2 ? 14 : 13;
    return (1ULL << bits) - 1;
}

/* A ruleset that handles every file right and, with ABI 6, scopes signals and abstract Unix
 * sockets to the domain; -1 on failure. */
static inline int ll_create(int abi)
{
    struct ll_ruleset_attr attr = {.handled_access_fs = ll_handled(abi),
                                   .scoped = LL_SCOPE_ABSTRACT_UNIX_SOCKET | LL_SCOPE_SIGNAL};
    size_t size = abi >= 6 ? sizeof attr : abi >= 4 ? 2 * sizeof(uint64_t) : sizeof(uint64_t);
    return (int)syscall(SYS_landlock_create_ruleset, &attr, size, 0);
}

/* Allows `rights` beneath `path` (for a file, its file rights). Nothing there: nothing to do. */
static inline bool ll_allow(int rs, int abi, const char *path, uint64_t rights)
{
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0) return errno == ENOENT || errno == ENOTDIR || errno == EACCES;
    struct stat st;
    rights &= ll_handled(abi);
    if (fstat(fd, &st) == 0 && !S_ISDIR(st.st_mode)) rights &= LL_FS_FILE_RIGHTS;
    struct ll_path_beneath_attr rule = {.allowed_access = rights, .parent_fd = fd};
    long rc = syscall(SYS_landlock_add_rule, rs, LL_RULE_PATH_BENEATH, &rule, 0);
    close(fd);
    return rc == 0;
}

static inline bool ll_under(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/') n--;
    if (n == 1 && dir[0] == '/') return true;
    return !strncmp(path, dir, n) && (path[n] == '/' || path[n] == '\0');
}

/* Allows `rights` beneath `dir` except beneath each of `hide` (canonical absolute paths):
 * where a hidden path lies below, every other entry of each directory on the way is allowed
 * one by one (Landlock only adds rights, it cannot take some back below a rule); a hidden
 * directory's name can then be listed, never what it holds. */
static inline bool ll_allow_except(int rs, int abi, const char *dir, char *const *hide, int n_hide, uint64_t rights)
{
    bool above = false;
    for (int i = 0; i < n_hide; i++) {
        if (ll_under(dir, hide[i])) return true;  // hidden itself
        above |= ll_under(hide[i], dir);
    }
    if (!above) return ll_allow(rs, abi, dir, rights);
    // the directories on the way may be listed (so also below them: names, never contents)
    if ((rights & LL_FS_READ_DIR) && !ll_allow(rs, abi, dir, LL_FS_READ_DIR)) return false;
    DIR *d = opendir(dir);
    if (!d) return errno == EACCES || errno == ENOENT;
    bool ok = true;
    struct dirent *e;
    while (ok && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        char *path = malloc(len);
        if (!path) {
            ok = false;
            break;
        }
        snprintf(path, len, "%s%s%s", dir, strcmp(dir, "/") ? "/" : "", e->d_name);
        struct stat st;
        if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
            ok = ll_allow_except(rs, abi, path, hide, n_hide, rights);
        } else {  // a file, or a link: allowed unless it leads into a hidden directory
            char *to = realpath(path, NULL);
            bool hidden = false;
            for (int i = 0; to && i < n_hide; i++) hidden |= ll_under(to, hide[i]);
            if (!hidden) ok = ll_allow(rs, abi, path, rights);
            free(to);
        }
        free(path);
    }
    closedir(d);
    return ok;
}

/* Puts this process, and all it starts from now on, under the ruleset (closed after). */
static inline bool ll_enforce(int rs)
{
    bool ok = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 && syscall(SYS_landlock_restrict_self, rs, 0) == 0;
    int saved = errno;
    close(rs);
    errno = saved;
    return ok;
}

#endif
