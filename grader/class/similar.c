/* similar.c - pairs of submissions that share code beyond the starter, found with
 * sim_c (Debian's similarity-tester, Dick Grune's tester: it compares token streams, so
 * renamed variables, moved comments and new layout do not hide a copy).
 *
 * The starter's own lines are blanked first (a line whose text, blanks removed, is a line
 * of the starter and holds a letter or digit), keeping every other line where it was, so
 * the signatures everyone keeps never make two students look alike and sim_c's line numbers
 * are the submission's. Every pair is compared (sim_c -e); a pair whose larger share ("A
 * consists for x % of B material") reaches the instructor's threshold is listed, and its
 * matching regions are written side by side (sim_c's two-column output) to
 * OUT/similarity/<a>__<b>.txt. This only reports: no score changes because of it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "class.h"

typedef struct {
    char *a, *b;  // keys, a < b
    int percent;
} pair;

/* The line without blanks; NULL when it holds no letter or digit (braces, blank lines). */
static char *squeeze(const char *line, size_t n)
{
    char *s = xmalloc(n + 1);
    size_t k = 0;
    bool alnum = false;
    for (size_t i = 0; i < n; i++) {
        char c = line[i];
        if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') continue;
        alnum = alnum || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        s[k++] = c;
    }
    s[k] = '\0';
    if (!alnum) {
        free(s);
        return NULL;
    }
    return s;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void starter_lines(const class_run *cr, slist *out)
{
    for (int f = 0; f < cr->lab_files.count; f++) {
        char *path = xasprintf("%s/labs/%s/%s", cr->root, cr->lab, cr->lab_files.items[f]);
        size_t len = 0;
        char *data = read_file(path, &len);
        free(path);
        for (size_t i = 0; data && i < len;) {
            size_t n = strcspn(data + i, "\n");
            char *sq = squeeze(data + i, n);
            if (sq) slist_push_own(out, sq);
            i += n + 1;
        }
        free(data);
    }
    slist_sort(out);
}

/* The submission's files, one after the other, with the starter's lines blanked. */
static bool write_stripped(const submission *s, const slist *starter, const char *path)
{
    text t = {0};
    for (int f = 0; f < s->files.count; f++) {
        size_t len = 0;
        char *data = read_file(s->files.items[f], &len);
        for (size_t i = 0; data && i < len;) {
            size_t n = strcspn(data + i, "\n");
            char *sq = squeeze(data + i, n);
            bool common = sq && starter->count &&
                          bsearch(&sq, starter->items, (size_t)starter->count, sizeof *starter->items, cmp_str);
            if (!common) text_add(&t, data + i, n);
            text_add(&t, "\n", 1);
            free(sq);
            i += n + 1;
        }
        free(data);
    }
    bool ok = write_text_file(path, t.s ? t.s : "");
    text_free(&t);
    return ok;
}

static int by_percent(const void *x, const void *y)
{
    const pair *a = x, *b = y;
    if (a->percent != b->percent) return b->percent - a->percent;
    int c = strcmp(a->a, b->a);
    return c ? c : strcmp(a->b, b->b);
}

static const char *student_of(const class_run *cr, const char *key)
{
    for (int i = 0; i < cr->n_subs; i++)
        if (!strcmp(cr->subs[i].key, key)) return cr->subs[i].student;
    return key;
}

/* "src/KEY.c" -> "KEY" (malloc'd), NULL if not that shape. */
static char *key_of(const char *word)
{
    size_t n = strlen(word);
    if (strncmp(word, "src/", 4) || n < 7 || strcmp(word + n - 2, ".c")) return NULL;
    char *k = xstrdup(word + 4);
    k[n - 6] = '\0';
    return k;
}

static int run(const char *cmd)
{
    int rc = system(cmd);
    return rc == -1 || !WIFEXITED(rc) ? -1 : WEXITSTATUS(rc);
}

void write_similarity(const class_run *cr, text *md)
{
    text_printf(md, "\n## Similar pairs (beyond the starter)\n\n");
    if (cr->similarity <= 0) {
        text_printf(md, "Not computed (SIMILARITY=0).\n");
        return;
    }
    if (run("command -v sim_c >/dev/null 2>&1") != 0) {
        text_printf(md, "Not computed: sim_c is not installed (Debian package similarity-tester; "
                        "scripts/install-deps.sh installs it).\n");
        return;
    }
    char *dir = xasprintf("%s/similarity", cr->out);
    remove_tree(dir);
    char *src = xasprintf("%s/src", dir);
    if (!make_dirs(src, 0755)) die("cannot create %s", src);
    slist starter = {0};
    starter_lines(cr, &starter);
    text list = {0};
    int n = 0;
    for (int i = 0; i < cr->n_subs; i++) {
        const submission *s = &cr->subs[i];
        if (s->files.count != cr->lab_files.count || !s->files.count) continue;
        char *path = xasprintf("%s/%s.c", src, s->key);
        if (write_stripped(s, &starter, path)) {
            text_printf(&list, "src/%s.c\n", s->key);
            n++;
        }
        free(path);
    }
    char *list_path = xasprintf("%s/files.txt", dir);
    write_text_file(list_path, list.s ? list.s : "");
    char *cmd = xasprintf("cd '%s' && sim_c -p -e -s -i <files.txt >percent.txt 2>sim.log", dir);
    int rc = n >= 2 ? run(cmd) : 0;
    free(cmd);

    pair *pairs = NULL;
    int n_pairs = 0;
    char *pct_path = xasprintf("%s/percent.txt", dir);
    char *pct = n >= 2 && rc == 0 ? read_file(pct_path, NULL) : NULL;
    for (char *line = pct ? strtok(pct, "\n") : NULL; line; line = strtok(NULL, "\n")) {
        char a[4096], b[4096];
        int p = 0;
        if (sscanf(line, "%4095s consists for %d %% of %4095s material", a, &p, b) != 3) continue;
        char *ka = key_of(a), *kb = key_of(b);
        if (ka && kb && strcmp(ka, kb)) {
            if (strcmp(ka, kb) > 0) {
                char *t = ka;
                ka = kb, kb = t;
            }
            int k = 0;
            while (k < n_pairs && (strcmp(pairs[k].a, ka) || strcmp(pairs[k].b, kb))) k++;
            if (k == n_pairs) {
                pairs = xrealloc(pairs, (size_t)(n_pairs + 1) * sizeof *pairs);
                pairs[n_pairs++] = (pair){.a = ka, .b = kb, .percent = p};
                ka = kb = NULL;
            } else if (p > pairs[k].percent) {
                pairs[k].percent = p;
            }
        }
        free(ka);
        free(kb);
    }
    free(pct);
    qsort(pairs, (size_t)n_pairs, sizeof *pairs, by_percent);

    text_printf(md, "sim_c compared %d submission(s) pairwise, the starter's lines removed; listed: pairs where one "
                    "consists for at least %g %% of the other's material (SIMILARITY=). Regions side by side in "
                    "similarity/. This report changes no score.\n\n",
                n, cr->similarity);
    if (rc != 0) text_printf(md, "(sim_c failed with exit code %d: see similarity/sim.log)\n", rc);
    int listed = 0;
    for (int k = 0; k < n_pairs; k++) {
        if (pairs[k].percent < cr->similarity) continue;
        if (!listed++) text_printf(md, "| pair | shared | side by side |\n|---|---|---|\n");
        char *side = xasprintf("%s__%s.txt", pairs[k].a, pairs[k].b);
        char *c2 = xasprintf("cd '%s' && sim_c -e -s -T -w 200 src/%s.c src/%s.c >'%s' 2>>sim.log", dir, pairs[k].a,
                             pairs[k].b, side);
        run(c2);
        text_add(md, "| ", 2);
        md_cell(md, student_of(cr, pairs[k].a));
        text_add(md, ", ", 2);
        md_cell(md, student_of(cr, pairs[k].b));
        text_printf(md, " | %d %% | similarity/%s |\n", pairs[k].percent, side);
        free(c2);
        free(side);
    }
    if (!listed) text_printf(md, "No pair reaches %g %%.\n", cr->similarity);
    for (int k = 0; k < n_pairs; k++) free(pairs[k].a), free(pairs[k].b);
    free(pairs);
    free(pct_path);
    free(list_path);
    text_free(&list);
    slist_free(&starter);
    free(src);
    free(dir);
}
