/* util.c - pl-class's small helpers: memory, strings, whole files written through a
 * rename, directory trees removed without following links, and the two ways a raw
 * folder name is shown (in a report) or used (as a file name). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "class.h"

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) die("out of memory");
    return p;
}

void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n ? n : 1);
    if (!p) die("out of memory");
    return p;
}

char *xstrdup(const char *s)
{
    char *p = strdup(s);
    if (!p) die("out of memory");
    return p;
}

char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0) die("out of memory");
    return s;
}

void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("pl-class: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void slist_push_own(slist *l, char *s)
{
    if (l->count + 1 >= l->cap) {
        l->cap = l->cap ? 2 * l->cap : 8;
        l->items = xrealloc(l->items, (size_t)l->cap * sizeof *l->items);
    }
    l->items[l->count++] = s;
    l->items[l->count] = NULL;
}

void slist_push(slist *l, const char *s)
{
    slist_push_own(l, xstrdup(s));
}

static int by_bytes(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void slist_sort(slist *l)
{
    if (l->count > 1) qsort(l->items, (size_t)l->count, sizeof *l->items, by_bytes);
}

void slist_free(slist *l)
{
    for (int i = 0; i < l->count; i++) free(l->items[i]);
    free(l->items);
    *l = (slist){0};
}

/* ---------------------------------------------------------------- text */

void text_add(text *t, const char *s, size_t n)
{
    if (t->len + n + 1 > t->cap) {
        while (t->len + n + 1 > t->cap) t->cap = t->cap ? 2 * t->cap : 1024;
        t->s = xrealloc(t->s, t->cap);
    }
    memcpy(t->s + t->len, s, n);
    t->len += n;
    t->s[t->len] = '\0';
}

void text_printf(text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int n = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (n < 0) die("out of memory");
    text_add(t, s, (size_t)n);
    free(s);
}

void text_free(text *t)
{
    free(t->s);
    *t = (text){0};
}

/* ---------------------------------------------------------------- files */

char *read_file(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    text t = {0};
    char buf[65536];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            int e = errno;
            close(fd);
            text_free(&t);
            errno = e;
            return NULL;
        }
        if (n == 0) break;
        text_add(&t, buf, (size_t)n);
    }
    close(fd);
    if (!t.s) text_add(&t, "", 0);
    if (len) *len = t.len;
    return t.s;
}

bool write_file_atomic(const char *path, const char *data, size_t len)
{
    char *tmp = xasprintf("%s.tmp.%d", path, (int)getpid());
    unlink(tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    bool ok = fd >= 0;
    size_t done = 0;
    while (ok && done < len) {
        ssize_t n = write(fd, data + done, len - done);
        if (n < 0 && errno == EINTR) continue;
        ok = n > 0;
        if (ok) done += (size_t)n;
    }
    if (fd >= 0 && close(fd) != 0) ok = false;
    if (ok && rename(tmp, path) != 0) ok = false;
    if (!ok) {
        fprintf(stderr, "pl-class: cannot write %s: %s\n", path, strerror(errno));
        unlink(tmp);
    }
    free(tmp);
    return ok;
}

bool write_text_file(const char *path, const char *s)
{
    return write_file_atomic(path, s ? s : "", s ? strlen(s) : 0);
}

static bool remove_at(int dirfd, const char *name)
{
    if (unlinkat(dirfd, name, 0) == 0 || errno == ENOENT) return true;
    if (errno != EISDIR && errno != EPERM) return false;
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return false;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return false;
    }
    struct dirent *e;
    bool ok = true;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) ok = remove_at(fd, e->d_name) && ok;
    closedir(d);
    return unlinkat(dirfd, name, AT_REMOVEDIR) == 0 && ok;
}

bool remove_tree(const char *path)
{
    return remove_at(AT_FDCWD, path);
}

bool make_dirs(const char *path, mode_t mode)
{
    char *p = xstrdup(path);
    bool ok = true;
    for (char *s = p + 1; ok; s++) {
        if (*s && *s != '/') continue;
        char c = *s;
        *s = '\0';
        if (mkdir(p, mode) != 0 && errno != EEXIST) ok = false;
        *s = c;
        if (!c) break;
    }
    struct stat st;
    ok = ok && stat(path, &st) == 0 && S_ISDIR(st.st_mode);
    free(p);
    return ok;
}

static void chown_at(int dirfd, const char *name, uid_t uid, gid_t gid)
{
    if (fchownat(dirfd, name, uid, gid, AT_SYMLINK_NOFOLLOW) != 0) return;
    int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return;
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return;
    }
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) chown_at(fd, e->d_name, uid, gid);
    closedir(d);
}

void chown_tree(const char *path, uid_t uid, gid_t gid)
{
    chown_at(AT_FDCWD, path, uid, gid);
}

cJSON *read_json(const char *path)
{
    char *s = read_file(path, NULL);
    if (!s) return NULL;
    cJSON *j = cJSON_Parse(s);
    free(s);
    return j;
}

/* ---------------------------------------------------------------- names */

/* Length of the valid UTF-8 sequence at p (not an overlong form, not a surrogate), or 0. */
static int utf8_len(const unsigned char *p)
{
    unsigned c = p[0];
    if (c < 0x80) return 1;
    int n = (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (!n || c == 0xC0 || c == 0xC1 || c > 0xF4) return 0;
    for (int i = 1; i < n; i++)
        if ((p[i] & 0xC0) != 0x80) return 0;
    if (n == 3 && c == 0xE0 && p[1] < 0xA0) return 0;
    if (n == 3 && c == 0xED && p[1] >= 0xA0) return 0;
    if (n == 4 && c == 0xF0 && p[1] < 0x90) return 0;
    if (n == 4 && c == 0xF4 && p[1] >= 0x90) return 0;
    return n;
}

bool valid_utf8(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        int n = utf8_len(p);
        if (!n) return false;
        p += n;
    }
    return true;
}

char *display_name(const char *raw)
{
    text t = {0};
    const unsigned char *p = (const unsigned char *)raw;
    while (*p) {
        int n = utf8_len(p);
        if (n == 0 || *p < 0x20 || *p == 0x7F || *p == '%') {
            text_printf(&t, "%%%02X", *p);
            p++;
        } else {
            text_add(&t, (const char *)p, (size_t)n);
            p += n;
        }
    }
    if (!t.s) text_add(&t, "", 0);
    return t.s;
}

char *safe_name(const char *raw)
{
    text t = {0};
    for (const unsigned char *p = (const unsigned char *)raw; *p; p++) {
        bool keep = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                    *p == '_' || *p == '@' || *p == '+' || *p == '-' || (*p == '.' && p != (const unsigned char *)raw);
        if (keep) text_add(&t, (const char *)p, 1);
        else text_printf(&t, "%%%02X", *p);
    }
    if (!t.s) text_add(&t, "", 0);
    return t.s;
}

char *replace_all(const char *s, const char *from, const char *to)
{
    text t = {0};
    size_t n = strlen(from);
    const char *p = s, *hit;
    while (n && (hit = strstr(p, from))) {
        text_add(&t, p, (size_t)(hit - p));
        text_add(&t, to, strlen(to));
        p = hit + n;
    }
    text_add(&t, p, strlen(p));
    return t.s;
}

void md_cell(text *t, const char *s)
{
    for (const char *p = s; *p; p++) {
        if (*p == '|') text_add(t, "\\|", 2);
        else if (*p == '\n' || *p == '\r') text_add(t, " ", 1);
        else text_add(t, p, 1);
    }
}

/* One CSV field, quoted when it must be. A text field that a spreadsheet would take for a
 * formula (it starts with = + - @, a tab or a carriage return: a student's name or email
 * from a Gradescope export can) gets a leading apostrophe, so that opening the gradebook
 * shows the text and runs nothing. Numbers are written by the caller as plain digits. */
void csv_field(text *t, const char *s, bool last)
{
    bool formula = strchr("=+-@\t\r", s[0]) && s[0] != '\0';
    if (formula) {
        char *safe = xasprintf("'%s", s);
        csv_field(t, safe, last);
        free(safe);
        return;
    }
    if (strpbrk(s, ",\"\r\n")) {
        text_add(t, "\"", 1);
        for (const char *p = s; *p; p++) {
            if (*p == '"') text_add(t, "\"", 1);
            text_add(t, p, 1);
        }
        text_add(t, "\"", 1);
    } else {
        text_add(t, s, strlen(s));
    }
    text_add(t, last ? "\n" : ",", 1);
}

/* A submission's status as the gradebook and the reports spell it. */
const char *status_name(sub_status s)
{
    switch (s) {
    case ST_PENDING: return "pending";
    case ST_GRADED: return "graded";
    case ST_MISSING: return "missing file";
    case ST_BUILD_ERROR: return "build error";
    case ST_TIMED_OUT: return "timed out";
    case ST_REFUSED: return "refused";
    case ST_GRADER_ERROR: return "grader error";
    }
    return "?";
}

/* Where a submission's reports go: OUT/students/<key>. */
char *student_dir(const class_run *cr, const submission *s)
{
    return xasprintf("%s/students/%s", cr->out, s->key);
}
