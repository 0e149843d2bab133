/* landlock.c - the sandbox where bubblewrap cannot start: Landlock (Linux 5.13 and later).
 *
 * Containers without user namespaces (Gradescope's, many CI runners) cannot run bwrap, but
 * an unprivileged process can still lock itself and everything it will ever start into a
 * Landlock domain, with no namespace and no privilege. The run's child does that right before
 * it execs the launcher, so mpirun, the referees, the players and anything any of them starts
 * or asks the launcher to start (a PMIx spawn included) live in the same domain:
 *  - read and execute: the system's directories, the driver's directory, the lab's data and
 *    the launcher's directory (what the bwrap sandbox binds read-only); /proc and /sys read;
 *    the device files read and written (no new ones);
 *  - everything: the run's channel directory, its scratch directory (TMPDIR) and /dev/shm;
 *  - nothing else: not the tree, `solutions/`, the rubrics, the hidden directory, `--out`,
 *    any home directory — not even their names;
 *  - with ABI 6: no signal to a process outside the domain (the engine, the grader's shell)
 *    and no abstract Unix socket created outside it; at any ABI, no ptrace of a process
 *    outside the domain (which also closes their /proc/<pid>/mem).
 * An engine running as root drops the run to uid 65534 first, as for bwrap. */
#include "engine.h"
#include "landlock.h"  // defines: ll_create, ll_allow, ll_enforce, LL_*

int landlock_abi(void)
{
    return ll_abi();
}

bool landlock_confine(const sandbox *sb, const char *channel_dir)
{
    int abi = sb->landlock_abi, rs = ll_create(abi);
    if (rs < 0) return false;
    uint64_t all = ll_handled(abi);
    bool ok = true;
    for (int i = 0; sandbox_system_dirs[i]; i++) ok &= ll_allow(rs, abi, sandbox_system_dirs[i], LL_RX);
    ok &= ll_allow(rs, abi, "/proc", LL_FS_READ_FILE | LL_FS_READ_DIR);
    ok &= ll_allow(rs, abi, "/dev", LL_FS_READ_FILE | LL_FS_READ_DIR | LL_FS_WRITE_FILE);
    for (int i = 0; i < sb->reveal.count; i++) ok &= ll_allow(rs, abi, sb->reveal.items[i], LL_RX);
    for (int i = 0; i < sb->data_src.count; i++) ok &= ll_allow(rs, abi, sb->data_src.items[i], LL_RX);
    ok &= ll_allow(rs, abi, "/dev/shm", all);
    if (sb->scratch) ok &= ll_allow(rs, abi, sb->scratch, all);
    if (channel_dir) ok &= ll_allow(rs, abi, channel_dir, all);
    if (!ok) {
        close(rs);
        return false;
    }
    return ll_enforce(rs);
}
