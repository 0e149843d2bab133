/* class.h - pl-class, a whole class graded in one command (`make grade-class`): shared
 * types and the functions each file of grader/class/ provides. One concern per file:
 *
 *   main.c       command line, the lock, the order of the steps, resuming
 *   util.c       memory, strings, files, names, CSV and JSON helpers
 *   sha256.c     SHA-256 (FIPS 180-4) for the content hashes that make reruns skip
 *   intake.c     the submissions folder: one folder per student (Gradescope export or
 *                  GitHub Classroom clones), the lab's file taken from each, every check
 *   jobs.c       grading k submissions at a time, each through `pl-grade` in the sandbox,
 *                in its own build tree, as its own user, under its own time limit
 *   book.c       gradebook.csv, summary.md and the plot, from each student's reports
 *   similar.c    pairs sharing code beyond the starter (sim_c), side by side
 *
 * pl-class never links the engine: it runs `pl-grade` and reads the files it documents
 * (results.json, cases.json, report.txt), so the engine can change inside freely. */
#ifndef PL_CLASS_H
#define PL_CLASS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>  // defines: uid_t, pid_t

#include <cjson/cJSON.h>  // defines: cJSON

/* ---------------------------------------------------------------- utilities */

typedef struct {
    char **items;
    int count, cap;
} slist;

void *xmalloc(size_t n);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void slist_push(slist *l, const char *s);
void slist_push_own(slist *l, char *s);
void slist_sort(slist *l);
void slist_free(slist *l);
/* "pl-class: error: ..." on stderr, exit 2 (usage and setup errors). */
void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
double now_s(void);

/* A growable text. */
typedef struct {
    char *s;
    size_t len, cap;
} text;
void text_add(text *t, const char *s, size_t n);
void text_printf(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void text_free(text *t);

/* Whole files. read_file: NULL on error (errno set); *len gets the size. */
char *read_file(const char *path, size_t *len);
/* Write through a temporary name and a rename; false on error. */
bool write_file_atomic(const char *path, const char *data, size_t len);
bool write_text_file(const char *path, const char *s);
/* rm -rf without following links; true when nothing is left. */
bool remove_tree(const char *path);
bool make_dirs(const char *path, mode_t mode);
/* chown -R without following links. */
void chown_tree(const char *path, uid_t uid, gid_t gid);
/* Parse a JSON file; NULL when missing or malformed. */
cJSON *read_json(const char *path);

/* Bytes as they may appear in a report: invalid UTF-8, control bytes, '%' as %XX. */
char *display_name(const char *raw);
/* Bytes as they may name a file: only [A-Za-z0-9._@+-] kept, the rest %XX, no leading dot. */
char *safe_name(const char *raw);
bool valid_utf8(const char *s);
/* s with every `from` replaced by `to` (malloc'd). */
char *replace_all(const char *s, const char *from, const char *to);
/* Text for a Markdown table cell: '|' escaped, line breaks as blanks. */
void md_cell(text *t, const char *s);
/* A CSV field, quoted when it holds a comma, a quote or a line break. */
void csv_field(text *t, const char *s, bool last);

/* ---------------------------------------------------------------- hashing */

typedef struct {
    unsigned int h[8];
    unsigned char buf[64];
    size_t buf_len;
    unsigned long long total;
} sha256;

void sha256_init(sha256 *c);
void sha256_update(sha256 *c, const void *data, size_t len);
void sha256_final(sha256 *c, unsigned char out[32]);
void sha256_hex(const unsigned char digest[32], char out[65]);
/* Adds a file's bytes (or a marker when it is missing) under a label. */
void sha256_add_file(sha256 *c, const char *label, const char *path);
void sha256_add_string(sha256 *c, const char *s);

/* ---------------------------------------------------------------- the class */

/* What happened to one submission, as the gradebook's status column says it. */
typedef enum {
    ST_PENDING,       // not graded yet (this run will)
    ST_GRADED,        // pl-grade scored it (whatever the score)
    ST_MISSING,       // no lab file found
    ST_BUILD_ERROR,   // the build failed
    ST_TIMED_OUT,     // the whole grading ran past the per-submission limit
    ST_REFUSED,       // a file the intake or the build's object checker refused
    ST_GRADER_ERROR,  // pl-grade itself failed (never cached: rerun)
} sub_status;

const char *status_name(sub_status s); /* util.c */

typedef struct {
    char *folder;     // the directory's name in the submissions folder (raw bytes)
    char *student;    // who: Gradescope's metadata (email, else sid, else name), else the folder
    char *key;        // safe_name(folder): the name of its directories under OUT
    char *path;       // the folder's path
    slist files;      // the lab files taken, as paths (one per lab file, in order)
    char *notes;      // extra files ignored, where the file was found... (one line)
    char *hash;       // content hash (submission + grader), hex
    sub_status status;
    char *why;        // for missing/refused at intake: the reason
    bool reused;      // an earlier run's result with the same hash
} submission;

typedef struct {
    char *name;
    double points;
    bool hidden;
} class_item;

typedef struct {
    /* the command line */
    const char *lab, *submissions, *out, *hidden, *np, *rubric, *engine, *mpirun, *flavor, *sandbox, *make;
    const char *one, *results;   // Gradescope: one submission folder, its results.json
    int jobs;
    double limit_s;              // per submission
    double similarity;           // percent; 0 = no similarity report
    bool test_scale;
    /* derived */
    char *root;                  // the kit (the working directory)
    slist lab_files;             // the file names taken from each submission
    class_item *items;           // the rubric's items, public then hidden, in order
    int n_items;
    double max_score;
    char *grader_hash;
    bool as_root;                // each job runs as a user of its own
    bool build_sandbox;          // the build runs in bwrap too
    bool build_landlock;         // no bwrap here: the build runs under pl-landlock (Landlock)
    submission *subs;
    int n_subs;
} class_run;

/* Can bubblewrap start a sandbox here, as the jobs' user? */
bool bwrap_works(const class_run *cr);

/* util.c: where a submission's reports go, OUT/students/<key> (malloc'd) */
char *student_dir(const class_run *cr, const submission *s);

/* intake.c */
void intake(class_run *cr);
void intake_one(class_run *cr, const char *dir);  // Gradescope: one submission folder

/* jobs.c */
void grade_all(class_run *cr);
/* Record a submission that is not graded (missing, refused) as done. */
void record_ungraded(const class_run *cr, submission *s);

/* book.c */
/* gradebook.csv, summary.md, the plot; returns how many rows. */
int write_book(const class_run *cr);
/* Gradescope's results.json for the one submission of --one (with the status explained). */
bool write_gradescope_result(const class_run *cr, const submission *s, const char *path);

/* similar.c */
void write_similarity(const class_run *cr, text *summary);

#endif
