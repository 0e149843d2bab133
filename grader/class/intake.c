/* intake.c - the submissions folder, one folder per student, and the lab's file taken
 * from each. Two layouts are read the same way:
 *
 *   a Gradescope "export submissions" archive, unzipped: submission_<id>/ folders holding
 *     the uploaded files, and submission_metadata.yml naming who submitted each;
 *   a folder of GitHub Classroom clones: <assignment>-<user>/ folders, each a copy of the
 *     kit with the student's file at labs/<lab>/<file>.
 *
 * In each folder the file is looked for at the top, then at labs/<lab>/, then anywhere
 * below (one match only). What cannot be graded is a row with a status, never a stop: an
 * empty folder or no such file (missing file); a symbolic link pointing outside the
 * folder, a file over 1 MiB, a binary file, two candidates (refused). A folder name that is
 * not UTF-8 is shown with %XX escapes. Only the lab's files are taken: the rest of what a
 * student uploaded is listed as ignored and never reaches the build. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "class.h"

#define FILE_BYTES_MAX (1024 * 1024)  // a lab's source file is a few hundred lines
#define SEARCH_DEPTH_MAX 8
#define EXTRAS_LISTED 5

/* ---------------------------------------------------------------- Gradescope's metadata */

typedef struct {
    slist folders, students;
} metadata;

static char *unquote(char *v)
{
    size_t n = strlen(v);
    while (n && (v[n - 1] == '\n' || v[n - 1] == '\r' || v[n - 1] == ' ')) v[--n] = '\0';
    if (n >= 2 && (v[0] == '\'' || v[0] == '"') && v[n - 1] == v[0]) {
        v[n - 1] = '\0';
        return v + 1;
    }
    return v;
}

/* submission_metadata.yml: per submission folder, its submitters' :email: (else :sid:,
 * else :name:), joined with '+' for a group. Only these keys are read; the rest of the
 * YAML is skipped, so no YAML library is needed. */
static void read_metadata(const char *path, metadata *m)
{
    FILE *f = fopen(path, "r");
    if (!f) return;
    char *line = NULL;
    size_t cap = 0;
    char *folder = NULL;
    text who = {0};
    char *email = NULL, *sid = NULL, *name = NULL;
#define FLUSH_SUBMITTER()                                                           \
    do {                                                                            \
        const char *id = email ? email : sid ? sid : name;                          \
        if (id) {                                                                   \
            if (who.len) text_add(&who, "+", 1);                                    \
            text_add(&who, id, strlen(id));                                         \
        }                                                                           \
        free(email), free(sid), free(name);                                         \
        email = sid = name = NULL;                                                  \
    } while (0)
#define FLUSH_FOLDER()                                                              \
    do {                                                                            \
        FLUSH_SUBMITTER();                                                          \
        if (folder && who.len) {                                                    \
            slist_push(&m->folders, folder);                                        \
            slist_push(&m->students, who.s);                                        \
        }                                                                           \
        free(folder);                                                               \
        folder = NULL;                                                              \
        text_free(&who);                                                            \
    } while (0)
    while (getline(&line, &cap, f) >= 0) {
        if (line[0] && line[0] != ' ' && line[0] != '-' && line[0] != '#' && line[0] != '\n') {
            FLUSH_FOLDER();
            char *colon = strrchr(line, ':');
            if (colon) {
                *colon = '\0';
                folder = xstrdup(unquote(line));
            }
            continue;
        }
        char *p = line;
        while (*p == ' ') p++;
        if (*p == '-') {
            FLUSH_SUBMITTER();
            p++;
            while (*p == ' ') p++;
        }
        char **slot = !strncmp(p, ":email:", 7) ? &email : !strncmp(p, ":sid:", 5) ? &sid
                    : !strncmp(p, ":name:", 6)  ? &name : NULL;
        if (!slot || !folder) continue;
        char *v = strchr(p + 1, ':') + 1;
        v = unquote(v + strspn(v, " "));
        if (*v && !*slot) *slot = xstrdup(v);
    }
    FLUSH_FOLDER();
#undef FLUSH_SUBMITTER
#undef FLUSH_FOLDER
    free(line);
    fclose(f);
}

static const char *metadata_student(const metadata *m, const char *folder)
{
    for (int i = 0; i < m->folders.count; i++)
        if (!strcmp(m->folders.items[i], folder)) return m->students.items[i];
    return NULL;
}

/* ---------------------------------------------------------------- finding the file */

/* Every path below dir (relative to base) whose last part is `name`, not following links
 * and skipping .git, at most SEARCH_DEPTH_MAX deep. */
static void find_named(const char *base, const char *rel, const char *name, int depth, slist *found)
{
    char *dir = rel[0] ? xasprintf("%s/%s", base, rel) : xstrdup(base);
    DIR *d = opendir(dir);
    free(dir);
    if (!d) return;
    slist names = {0};
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, ".git")) slist_push(&names, e->d_name);
    closedir(d);
    slist_sort(&names);
    for (int i = 0; i < names.count; i++) {
        char *sub = rel[0] ? xasprintf("%s/%s", rel, names.items[i]) : xstrdup(names.items[i]);
        char *full = xasprintf("%s/%s", base, sub);
        struct stat st;
        if (lstat(full, &st) == 0) {
            if (!strcmp(names.items[i], name) && !S_ISDIR(st.st_mode)) slist_push(found, sub);
            else if (S_ISDIR(st.st_mode) && depth < SEARCH_DEPTH_MAX) find_named(base, sub, name, depth + 1, found);
        }
        free(full);
        free(sub);
    }
    slist_free(&names);
}

/* The top level of a folder: its entries, sorted. */
static void list_top(const char *dir, slist *out)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) slist_push(out, e->d_name);
    closedir(d);
    slist_sort(out);
}

/* "a.c, notes.txt, main.c and 4 more" (names shown safely). */
static char *name_list(const slist *names, const slist *skip)
{
    text t = {0};
    int shown = 0, more = 0;
    for (int i = 0; i < names->count; i++) {
        bool skipped = false;
        for (int k = 0; skip && k < skip->count; k++) skipped = skipped || !strcmp(skip->items[k], names->items[i]);
        if (skipped) continue;
        if (shown == EXTRAS_LISTED) {
            more++;
            continue;
        }
        char *d = display_name(names->items[i]);
        text_printf(&t, "%s%s", shown ? ", " : "", d);
        free(d);
        shown++;
    }
    if (more) text_printf(&t, " and %d more", more);
    if (!t.s) text_add(&t, "", 0);
    return t.s;
}

/* Check the file a submission offers: a regular file (or a link that stays inside the
 * folder), at most FILE_BYTES_MAX, no NUL byte. NULL when fine, else why not. */
static char *check_file(const char *folder, const char *path, char **taken)
{
    struct stat st;
    if (lstat(path, &st) != 0) return xasprintf("cannot read it: %s", strerror(errno));
    *taken = xstrdup(path);
    if (S_ISLNK(st.st_mode)) {
        char *real = realpath(path, NULL), *top = realpath(folder, NULL);
        size_t n = top ? strlen(top) : 0;
        bool inside = real && top && !strncmp(real, top, n) && real[n] == '/';
        free(top);
        if (!inside) {
            free(real);
            return xstrdup("a symbolic link pointing outside the submission");
        }
        free(*taken);
        *taken = real;
        if (stat(real, &st) != 0) return xasprintf("cannot read it: %s", strerror(errno));
    }
    if (!S_ISREG(st.st_mode)) return xstrdup("not a regular file");
    if (st.st_size > FILE_BYTES_MAX)
        return xasprintf("%lld bytes, over the %d KiB a source file may have", (long long)st.st_size, FILE_BYTES_MAX / 1024);
    size_t len = 0;
    char *data = read_file(*taken, &len);
    if (!data) return xasprintf("cannot read it: %s", strerror(errno));
    bool binary = memchr(data, '\0', len) != NULL;
    free(data);
    if (binary) return xstrdup("a binary file (it holds NUL bytes), not C source");
    return NULL;
}

static void set_problem(submission *s, sub_status st, char *why)
{
    if (s->status != ST_PENDING) {  // the first problem found is the one reported
        free(why);
        return;
    }
    s->status = st;
    s->why = why;
}

static void note(submission *s, char *what)
{
    char *n = s->notes ? xasprintf("%s; %s", s->notes, what) : xstrdup(what);
    free(s->notes);
    free(what);
    s->notes = n;
}

/* Take the lab's files from one folder. */
static void take_files(const class_run *cr, submission *s)
{
    slist top = {0};
    list_top(s->path, &top);
    if (!top.count) {
        set_problem(s, ST_MISSING, xstrdup("the folder is empty"));
        slist_free(&top);
        return;
    }
    slist taken_top = {0};
    for (int f = 0; f < cr->lab_files.count && s->status == ST_PENDING; f++) {
        const char *name = cr->lab_files.items[f];
        char *at_top = xasprintf("%s/%s", s->path, name);
        char *in_lab = xasprintf("%s/labs/%s/%s", s->path, cr->lab, name);
        struct stat st;
        char *path = NULL;
        if (lstat(at_top, &st) == 0) {
            path = xstrdup(at_top);
            slist_push(&taken_top, name);
        } else if (lstat(in_lab, &st) == 0) {
            path = xstrdup(in_lab);
        } else {
            slist found = {0};
            find_named(s->path, "", name, 0, &found);
            if (found.count == 1) {
                path = xasprintf("%s/%s", s->path, found.items[0]);
                char *d = display_name(found.items[0]);
                note(s, xasprintf("%s taken from %s", name, d));
                free(d);
            } else if (found.count > 1) {
                char *list = name_list(&found, NULL);
                set_problem(s, ST_REFUSED, xasprintf("%d files named %s, none at the top: %s", found.count, name, list));
                free(list);
            } else {
                char *list = name_list(&top, NULL);
                set_problem(s, ST_MISSING, xasprintf("no %s in the submission (it holds %s)", name, list));
                free(list);
            }
            slist_free(&found);
        }
        if (path) {
            char *taken = NULL;
            char *why = check_file(s->path, path, &taken);
            if (why) set_problem(s, ST_REFUSED, xasprintf("%s: %s", name, why));
            else slist_push(&s->files, taken);
            free(taken);
        }
        free(path);
        free(at_top);
        free(in_lab);
    }
    // an upload (files at the top): whatever else it holds is ignored, and said so
    if (s->status == ST_PENDING && taken_top.count) {
        slist skip = {0};
        slist_push(&skip, ".git");
        for (int i = 0; i < taken_top.count; i++) slist_push(&skip, taken_top.items[i]);
        char *extra = name_list(&top, &skip);
        if (extra[0]) note(s, xasprintf("ignored: %s", extra));
        free(extra);
        slist_free(&skip);
    }
    slist_free(&taken_top);
    slist_free(&top);
}

/* The content hash: the grader's, the lab's files' bytes (or why there are none). */
static void hash_submission(const class_run *cr, submission *s)
{
    sha256 c;
    sha256_init(&c);
    sha256_add_string(&c, cr->grader_hash);
    sha256_add_string(&c, status_name(s->status));
    sha256_add_string(&c, s->why ? s->why : "");
    for (int i = 0; i < s->files.count; i++) {
        sha256_add_string(&c, cr->lab_files.items[i]);
        size_t len = 0;
        char *data = read_file(s->files.items[i], &len);
        sha256_update(&c, data ? data : "", data ? len : 0);
        free(data);
    }
    unsigned char d[32];
    char hex[65];
    sha256_final(&c, d);
    sha256_hex(d, hex);
    s->hash = xstrdup(hex);
}

static void add_submission(class_run *cr, const char *folder, const char *path, const char *student)
{
    cr->subs = xrealloc(cr->subs, (size_t)(cr->n_subs + 1) * sizeof *cr->subs);
    submission *s = &cr->subs[cr->n_subs++];
    *s = (submission){.folder = xstrdup(folder), .key = safe_name(folder), .path = xstrdup(path)};
    s->student = student ? display_name(student) : display_name(folder);
    if (!valid_utf8(folder)) note(s, xstrdup("the folder's name is not UTF-8 (shown with %XX escapes)"));
    struct stat st;
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode)) set_problem(s, ST_REFUSED, xstrdup("the folder is a symbolic link"));
    else take_files(cr, s);
    hash_submission(cr, s);
}

void intake(class_run *cr)
{
    slist entries = {0};
    DIR *d = opendir(cr->submissions);
    if (!d) die("SUBMISSIONS=%s: %s", cr->submissions, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) slist_push(&entries, e->d_name);
    closedir(d);
    slist_sort(&entries);

    metadata m = {0};
    char *meta = xasprintf("%s/submission_metadata.yml", cr->submissions);
    read_metadata(meta, &m);
    free(meta);
    for (int i = 0; i < entries.count; i++) {
        const char *name = entries.items[i];
        char *path = xasprintf("%s/%s", cr->submissions, name);
        struct stat st, target;
        bool is_dir = lstat(path, &st) == 0 && S_ISDIR(st.st_mode);
        bool links_dir = S_ISLNK(st.st_mode) && stat(path, &target) == 0 && S_ISDIR(target.st_mode);
        if (is_dir || links_dir) {
            add_submission(cr, name, path, metadata_student(&m, name));
        } else if (strcmp(name, "submission_metadata.yml")) {
            char *shown = display_name(name);
            fprintf(stderr, "pl-class: note: %s is not a folder: ignored (one folder per student)\n", shown);
            free(shown);
        }
        free(path);
    }
    // two folders whose names differ only in escaped bytes would share a key: refuse both
    for (int i = 0; i < cr->n_subs; i++)
        for (int k = i + 1; k < cr->n_subs; k++)
            if (!strcmp(cr->subs[i].key, cr->subs[k].key)) die("two folders map to the same name %s", cr->subs[i].key);
    slist_free(&entries);
    slist_free(&m.folders);
    slist_free(&m.students);
}

void intake_one(class_run *cr, const char *dir)
{
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) die("--one %s: not a folder", dir);
    // Gradescope puts who submitted beside the submission folder
    char *parent = xstrdup(dir);
    char *slash = strrchr(parent, '/');
    if (slash) *slash = '\0';
    char *meta = xasprintf("%s/submission_metadata.json", slash ? parent : ".");
    cJSON *j = read_json(meta);
    const cJSON *users = cJSON_GetObjectItemCaseSensitive(j, "users");
    const cJSON *u0 = cJSON_IsArray(users) ? cJSON_GetArrayItem(users, 0) : NULL;
    const cJSON *email = cJSON_GetObjectItemCaseSensitive(u0, "email");
    const char *who = cJSON_IsString(email) && email->valuestring[0] ? email->valuestring : "submission";
    add_submission(cr, "submission", dir, who);
    cJSON_Delete(j);
    free(meta);
    free(parent);
}
