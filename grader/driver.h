/* driver.h - what every lab driver shares: arguments, the case loop protocol with the
 * grading engine, result records, size sweeps and the nccl-tests-style table.
 *
 * A driver runs named cases. For each one it calls drv_case_begin(); if that returns true
 * it runs the case, checks it itself (it never trusts what student code prints) and
 * reports with a drv_result. Rank 0 appends one JSON line per event to --json FILE:
 *   {"event":"begin","case":NAME}  {"event":"result","case":NAME,"group":G,"verdict":V,...}
 *   {"event":"end"}
 * The engine (grader/engine.c) reads that file; docs/grader.md describes the protocol.
 */
#ifndef PL_DRIVER_H
#define PL_DRIVER_H

#include <stdbool.h>
#include <stddef.h>

#include "pl.h"

typedef struct {
    const char *json_path;   /* --json FILE: results for the engine (rank 0 writes)       */
    const char *filter;      /* --filter GLOB: run only matching case names               */
    const char *start_after; /* --start-after NAME: skip cases up to and including NAME   */
    size_t min_bytes;        /* -b: smallest message (bytes)                               */
    size_t max_bytes;        /* -e: largest message (bytes)                                */
    double factor;           /* -f: multiply the size by this each step (> 1)             */
    int warmup, iters;       /* -w, -n: timing; iters 0 = pick from the size               */
    bool quiet;              /* -q: no table on stdout                                     */
    bool list;               /* --list: print the case names and exit                      */
} drv_opts;

/* Lab-specific flags: the driver names them, drv_init parses them. */
typedef struct {
    const char *name;  /* "--root" */
    const char *help;
    int *int_value;    /* exactly one of the two targets is set */
    const char **str_value;
} drv_flag;

/* pl_init, then parse the common flags and `extra` (NULL-terminated by name == NULL).
 * Unknown flags and bad values are a one-line error and exit code 2. */
void drv_init(int *argc, char ***argv, const char *lab, const char *usage, drv_opts *o,
              const drv_flag *extra);

/* Sizes: "0", "1" element, then min_bytes .. max_bytes by `factor`. Returns how many were
 * written to out (in elements of 4 bytes, ascending, no duplicates). */
size_t drv_sizes(const drv_opts *o, size_t *out, size_t cap);
/* "64M", "1K", "4096", "1G" -> bytes; false on a malformed string or an overflow. */
bool drv_parse_bytes(const char *s, size_t *out);

/* true: run this case now (the engine sees its begin line). false: filtered out. */
bool drv_case_begin(const char *name);

/* A result under construction (rank 0 keeps the fields; other ranks may call too). */
typedef struct drv_result drv_result;
drv_result *drv_result_new(const char *name, const char *group);
void drv_result_num(drv_result *r, const char *key, double value);
void drv_result_str(drv_result *r, const char *key, const char *value);
/* verdict: "pass", "wrong", "forbidden" or "error"; message is one line (may be NULL).
 * Emits the record, frees r, and counts failures for the exit code. */
void drv_result_emit(drv_result *r, const char *verdict, const char *message);

/* Print a line on stdout from rank 0 (the human-readable table). */
void drv_print(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Write the end record, finalize, and return the exit code (0: every case passed). */
int drv_finish(void);

/* Cases run so far and how many failed. */
int drv_cases_run(void);
int drv_cases_failed(void);



/* Reductions of host values over all ranks of the world, for checks and reports (they are
 * not instrumented, so they never show up in a student's counted traffic). */
double drv_sum(double v);
double drv_max(double v);
double drv_min(double v);
#endif
