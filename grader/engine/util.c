/* util.c - small helpers the engine files share: checked allocation, string lists,
 * globs, sizes, a monotonic clock, random keys, cleaning untrusted text and removing a
 * directory tree a run wrote. */
#include <ctype.h>
#include <errno.h>
#include <fnmatch.h>     // defines: fnmatch
#include <ftw.h>         // defines: nftw
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>  // defines: getrandom
#include <time.h>        // defines: clock_gettime, CLOCK_MONOTONIC
#include <unistd.h>      // defines: rmdir, unlink

#include "engine.h"
#include "loadclock.h"  // defines: load_clock, lc_now, lc_slowdown

/* Out of memory is not a grading outcome we can report sensibly: stop with exit 3. */
static void out_of_memory(void)
{
    fputs("pl-grade: out of memory\n", stderr);
    exit(3);
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) out_of_memory();
    return p;
}

void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) out_of_memory();
    return q;
}

char *xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(xmalloc(n), s, n);
}

char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *s = xmalloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

void strlist_push(strlist *l, const char *s)
{
    if (l->count + 1 >= l->cap) {  // keep room for a NULL terminator (argv use)
        l->cap = l->cap ? 2 * l->cap : 8;
        l->items = xrealloc(l->items, (size_t)l->cap * sizeof *l->items);
    }
    l->items[l->count++] = xstrdup(s);
    l->items[l->count] = NULL;
}

void strlist_push_all(strlist *l, const strlist *from)
{
    for (int i = 0; i < from->count; i++) strlist_push(l, from->items[i]);
}

bool strlist_has(const strlist *l, const char *s)
{
    for (int i = 0; i < l->count; i++)
        if (!strcmp(l->items[i], s)) return true;
    return false;
}

void strlist_free(strlist *l)
{
    for (int i = 0; i < l->count; i++) free(l->items[i]);
    free(l->items);
    *l = (strlist){0};
}

void strlist_split(strlist *l, const char *text)
{
    const char *p = text;
    while (*p) {
        while (*p && isspace((unsigned char)*p)) p++;
        const char *start = p;
        while (*p && !isspace((unsigned char)*p)) p++;
        if (p > start) {
            char *word = xmalloc((size_t)(p - start) + 1);
            memcpy(word, start, (size_t)(p - start));
            word[p - start] = '\0';
            strlist_push(l, word);
            free(word);
        }
    }
}

char *strlist_join(const strlist *l, const char *sep)
{
    size_t n = 1;
    for (int i = 0; i < l->count; i++) n += strlen(l->items[i]) + strlen(sep);
    char *s = xmalloc(n);
    s[0] = '\0';
    for (int i = 0; i < l->count; i++) {
        if (i) strcat(s, sep);
        strcat(s, l->items[i]);
    }
    return s;
}

void die_usage(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("pl-grade: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

void die_engine(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("pl-grade: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(3);
}

double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static load_clock g_quiet;
double quiet_seconds(void) { return lc_now(&g_quiet); }
double quiet_slowdown(void) { return lc_slowdown(&g_quiet); }

/* Length of the valid UTF-8 sequence starting at p (1..4), or 0 if it is not one. */
static int utf8_length(const unsigned char *p)
{
    int n;
    if (p[0] < 0x80) return 1;
    if (p[0] >= 0xC2 && p[0] <= 0xDF) n = 2;
    else if (p[0] >= 0xE0 && p[0] <= 0xEF) n = 3;
    else if (p[0] >= 0xF0 && p[0] <= 0xF4) n = 4;
    else return 0;
    for (int i = 1; i < n; i++)
        if ((p[i] & 0xC0) != 0x80) return 0;  // also stops at the terminating NUL
    if (n == 3 && p[0] == 0xE0 && p[1] < 0xA0) return 0;  // overlong
    if (n == 3 && p[0] == 0xED && p[1] >= 0xA0) return 0; // surrogate
    if (n == 4 && p[0] == 0xF0 && p[1] < 0x90) return 0;  // overlong
    if (n == 4 && p[0] == 0xF4 && p[1] >= 0x90) return 0; // beyond U+10FFFF
    return n;
}

static void clean(char *s, bool keep_newlines)
{
    unsigned char *p = (unsigned char *)s;
    while (*p) {
        int n = utf8_length(p);
        bool allowed = *p == '\t' || (keep_newlines && *p == '\n');
        if (n == 0 || (n == 1 && ((*p < 0x20 && !allowed) || *p == 0x7F))) {
            *p++ = '?';
        } else {
            p += n;
        }
    }
}

bool glob_match(const char *glob, const char *text)
{
    return fnmatch(glob, text, 0) == 0;
}

bool parse_number(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || !isfinite(v)) return false;
    *out = v;
    return true;
}

bool parse_size(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || !isfinite(v) || v < 0) return false;
    double scale = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K': scale = 1024.0; end++; break;
    case 'M': scale = 1024.0 * 1024; end++; break;
    case 'G': scale = 1024.0 * 1024 * 1024; end++; break;
    default: break;
    }
    if (toupper((unsigned char)*end) == 'B') end++;  // accept "1MB" as well as "1M"
    if (*end != '\0') return false;
    *out = v * scale;
    return true;
}

double round2(double x)
{
    // no libm: the build line links only cJSON; scores are far below 2^53 / 100
    double scaled = x * 100.0;
    return (double)(long long)(scaled + (scaled >= 0 ? 0.5 : -0.5)) / 100.0;
}

void clean_text(char *s)
{
    clean(s, false);
}

void clean_text_keep_lines(char *s)
{
    clean(s, true);
}

void flatten_text(char *s, size_t cap)
{
    for (char *p = s; *p; p++)
        if (*p == '\n' || *p == '\r' || *p == '\t') *p = ' ';
    clean(s, false);  // after JSON decoding: escape sequences are control bytes by now
    size_t n = strlen(s);
    if (n <= cap || cap < 4) return;
    size_t cut = cap - 3;
    while (cut > 0 && ((unsigned char)s[cut] & 0xC0) == 0x80) cut--;  // not inside a character
    strcpy(s + cut, "...");
}

bool valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > NAME_MAX_BYTES) return false;
    return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._:+=,@-") == n;
}

bool banner_line(const char *s)
{
    for (; *s; s++)
        if (isalnum((unsigned char)*s)) return false;
    return true;
}

void random_hex(char *out, size_t bytes)
{
    unsigned char raw[64];
    if (bytes > sizeof raw) bytes = sizeof raw;
    size_t got = 0;
    while (got < bytes) {
        ssize_t n = getrandom(raw + got, bytes - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) die_engine("cannot read random bytes for the channel key: %s", strerror(errno));
        got += (size_t)n;
    }
    for (size_t i = 0; i < bytes; i++) snprintf(out + 2 * i, 3, "%02x", raw[i]);
}

static int remove_one(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (type == FTW_DP) rmdir(path);
    else unlink(path);  // links are removed, never followed (FTW_PHYS)
    return 0;
}

void remove_tree(const char *dir)
{
    nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}
