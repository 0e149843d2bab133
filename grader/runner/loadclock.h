/* loadclock.h - time as a quiet machine would have spent it, for the grader's deadlines.
 *
 * A limit written in a rubric (a case's timeout, a world size's run-timeout, a build's,
 * a submission's in make grade-class) means seconds on a machine that runs the grading
 * alone. Beside other work the same grading takes longer, and a wall-clock deadline would
 * turn that into a verdict. So deadlines are kept on this clock: it advances like the wall
 * clock divided by the slowdown that other work causes right now,
 *
 *     slowdown = max(1, R / max(cores, r))
 *
 * where R is the number of runnable tasks of the whole machine (/proc/stat procs_running,
 * less the caller itself) and r the number of them that are the caller's own descendants
 * (what it runs: its ranks on as many cores as they want, which the limits already allow
 * for). Sampled at most every LC_SAMPLE_S and smoothed over a few seconds, so one busy
 * instant neither stretches nor shrinks a deadline. A run that is stuck stays stuck on this
 * clock: it only runs slower, never stops, and a loaded machine with nothing else wrong
 * changes no verdict. lc_free_cores() is what the class grader sizes its parallel jobs by.
 *
 * Header-only, used by the engine (grader/engine/) and the class grader (grader/class/):
 * neither links the other. Linux /proc; elsewhere the clock is the wall clock. */
#ifndef PL_LOADCLOCK_H
#define PL_LOADCLOCK_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#define LC_SAMPLE_S 0.25   /* one look at /proc at most this often                          */
#define LC_SMOOTH_S 3.0    /* the slowdown is an average over about this long              */
#define LC_MAX_SLOWDOWN 50 /* beyond this the machine is not grading anything: cap it      */

typedef struct {
    double wall, quiet;      /* the last reading of each                                   */
    double last_sample;
    double slowdown;         /* smoothed                                                    */
    double others;           /* smoothed runnable tasks that are not ours                   */
    int cores;
    int started;
} load_clock;

static inline double lc_wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Runnable tasks of the machine, from /proc/stat; -1 if unreadable. */
static inline int lc_procs_running(void)
{
    FILE *f = fopen("/proc/stat", "r");
    if (!f) return -1;
    char line[256];
    int n = -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "procs_running ", 14)) {
            n = atoi(line + 14);
            break;
        }
    fclose(f);
    return n;
}

/* The runnable descendants of this process: one pass over /proc builds pid -> parent and
 * state, then each runnable task's ancestry is followed up to us or to init. */
static inline int lc_own_running(void)
{
    enum { MAXP = 32768 };
    static int parent[MAXP];
    static char state[MAXP];
    static int pids[MAXP];
    int n = 0;
    DIR *d = opendir("/proc");
    if (!d) return 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < MAXP) {
        char *end;
        long pid = strtol(e->d_name, &end, 10);
        if (*end || pid <= 0) continue;
        char path[64], buf[512];
        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        size_t got = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[got] = '\0';
        char *rp = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
        char st;
        int ppid;
        if (!rp || sscanf(rp + 1, " %c %d", &st, &ppid) != 2) continue;
        pids[n] = (int)pid;
        parent[n] = ppid;
        state[n] = st;
        n++;
    }
    closedir(d);
    int me = (int)getpid(), own = 0;
    for (int i = 0; i < n; i++) {
        if (state[i] != 'R' || pids[i] == me) continue;
        int p = parent[i];
        for (int hops = 0; p > 1 && hops < 64; hops++) {
            if (p == me) {
                own++;
                break;
            }
            int j = 0;
            while (j < n && pids[j] != p) j++;
            if (j == n) break;
            p = parent[j];
        }
    }
    return own;
}

static inline void lc_sample(load_clock *c, double now)
{
    if (c->started && now - c->last_sample < LC_SAMPLE_S) return;
    int all = lc_procs_running();
    double s = 1, others = 0;
    if (all >= 0) {
        int own = lc_own_running();
        all -= 1; /* the caller, reading /proc */
        if (all < own) all = own;
        double floor_ = c->cores > own ? c->cores : own;
        s = all / floor_;
        if (s < 1) s = 1;
        if (s > LC_MAX_SLOWDOWN) s = LC_MAX_SLOWDOWN;
        others = all - own;
    }
    if (!c->started) {
        c->slowdown = s;
        c->others = others;
    } else {
        double a = (now - c->last_sample) / LC_SMOOTH_S;
        if (a > 1) a = 1;
        c->slowdown += a * (s - c->slowdown);
        c->others += a * (others - c->others);
    }
    c->last_sample = now;
}

static inline void lc_start(load_clock *c)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    c->cores = n > 0 ? (int)n : 1;
    c->wall = lc_wall();
    c->quiet = 0;
    c->started = 0;
    lc_sample(c, c->wall);
    c->started = 1;
}

/* Seconds on the quiet clock since lc_start (monotonic). The callers read it at least every
 * 0.1 s while they wait (the engine's and the class grader's poll loops), so a gap of more
 * than LC_GAP_S between two readings is time the caller itself stood still - a virtual
 * machine whose host paused it, or a machine too loaded to run it - in which nothing it
 * watches ran either: it counts as LC_GAP_S. */
#define LC_GAP_S 1.0
static inline double lc_now(load_clock *c)
{
    if (!c->started) lc_start(c);
    double now = lc_wall();
    lc_sample(c, now);
    if (now > c->wall) c->quiet += (now - c->wall > LC_GAP_S ? LC_GAP_S : now - c->wall) / c->slowdown;
    c->wall = now;
    return c->quiet;
}

static inline double lc_slowdown(load_clock *c)
{
    lc_now(c);
    return c->slowdown;
}

/* Cores that other work leaves free right now (at least 1). */
static inline int lc_free_cores(load_clock *c)
{
    lc_now(c);
    double free_ = c->cores - c->others;
    return free_ < 1 ? 1 : (int)(free_ + 0.5);
}

#endif
