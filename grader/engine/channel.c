/* channel.c - the results channel of one driver run (protocol 3).
 *
 * A fresh directory (mkdtemp: mode 0700, a random name) under the engine's work directory
 * holds a listening AF_UNIX socket whose path reaches the run through its environment
 * (PL_RESULTS_SOCK). Every rank's referee connects and says hello with its rank; no player
 * (no student code) exists yet, because a referee starts its player only once it holds the
 * run's key, and the engine hands the key out only when every rank has said hello - at
 * which moment it closes and unlinks the listening socket, so nothing started later can
 * connect. The key never travels through an environment or a file.
 *
 * After that, rank 0's connection carries the run's records (protocol.c reads them);
 * every other connection may carry one signed `abort` record (a referee that saw its player
 * break the protocol, or a relay altered) and nothing else. Lines are framed here, each at
 * most line_max bytes. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>  // defines: socket, bind, listen, accept4
#include <sys/un.h>      // defines: sockaddr_un
#include <unistd.h>

#include "engine.h"
#include "siphash.h"  // defines: siphash_record, the signature of the abort record

#define READ_CHUNK 65536
#define HELLO_MAX 512
#define CONNECTIONS_MAX(np) (2 * (np) + 8)  // refused ones included: no flood can grow this

void channel_open(channel *ch, const char *work_dir, int serial, uid_t owner, const char *lab, int np)
{
    *ch = (channel){.listen_fd = -1, .line_max = LINE_MAX_BYTES, .np = np, .lab = lab};
    ch->dir = xasprintf("%s/run%d.XXXXXX", work_dir, serial);  // a name nobody can guess
    if (!mkdtemp(ch->dir)) die_engine("cannot create %s: %s", ch->dir, strerror(errno));
    ch->path = xasprintf("%s/results.sock", ch->dir);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(ch->path) >= sizeof addr.sun_path)
        die_engine("the socket path %s is too long; set TMPDIR to a shorter directory", ch->path);
    strcpy(addr.sun_path, ch->path);
    random_hex(ch->key, 16);
    ch->peers = xmalloc((size_t)CONNECTIONS_MAX(np) * sizeof *ch->peers);

    ch->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (ch->listen_fd < 0 || bind(ch->listen_fd, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        listen(ch->listen_fd, np + 4) != 0)
        die_engine("cannot open the results socket %s: %s", ch->path, strerror(errno));
    // a sandboxed run is another user: it must reach the directory and the socket, nobody else
    if (owner != (uid_t)-1 && (chown(ch->dir, owner, owner) != 0 || chown(ch->path, owner, owner) != 0))
        die_engine("cannot hand %s to uid %d: %s", ch->dir, (int)owner, strerror(errno));
}

static void stop_listening(channel *ch)
{
    if (ch->listen_fd >= 0) close(ch->listen_fd);  // connections queued behind are reset
    ch->listen_fd = -1;
    unlink(ch->path);
}

static bool distrust(channel *ch, char *why)
{
    if (!ch->tamper) ch->tamper = why;
    else free(why);
    return false;
}

void channel_accept(channel *ch)
{
    while (ch->listen_fd >= 0) {
        int fd = accept4(ch->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) return;  // EAGAIN: nobody yet
        ch->accepted = true;
        if (ch->npeers == CONNECTIONS_MAX(ch->np)) {
            close(fd);
            stop_listening(ch);
            distrust(ch, xasprintf("more than %d connections to the results channel", CONNECTIONS_MAX(ch->np)));
            return;
        }
        ch->peers[ch->npeers++] = (chan_peer){.fd = fd, .rank = -1};
    }
}

int channel_pollfds(const channel *ch, struct pollfd *out, int max)
{
    int n = 0;
    if (ch->listen_fd >= 0 && n < max) out[n++] = (struct pollfd){ch->listen_fd, POLLIN, 0};
    for (int i = 0; i < ch->npeers && n < max; i++)
        if (ch->peers[i].fd >= 0) out[n++] = (struct pollfd){ch->peers[i].fd, POLLIN, 0};
    return n;
}

/* A referee's hello: {"event":"hello","protocol":3,"lab":L,"np":N,"rank":R}, unsigned (it
 * has no key yet); every rank once. */
static bool on_hello(channel *ch, chan_peer *p, const char *line, size_t len)
{
    cJSON *o = cJSON_ParseWithLength(line, len);
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(o, "event"), *ver = cJSON_GetObjectItemCaseSensitive(o, "protocol");
    const cJSON *lab = cJSON_GetObjectItemCaseSensitive(o, "lab"), *np = cJSON_GetObjectItemCaseSensitive(o, "np");
    const cJSON *rank = cJSON_GetObjectItemCaseSensitive(o, "rank");
    char *why = NULL;
    if (!cJSON_IsObject(o) || !cJSON_IsString(ev) || strcmp(ev->valuestring, "hello"))
        why = xstrdup("the first record of a connection is not a referee's hello");
    else if (!cJSON_IsNumber(ver) || ver->valuedouble != 3)
        why = xstrdup("the driver does not speak protocol 3 (rebuild it: make clean, then make)");
    else if (!cJSON_IsString(lab) || strcmp(lab->valuestring, ch->lab)) {
        char *q = xstrdup(cJSON_IsString(lab) ? lab->valuestring : "(none)");
        flatten_text(q, 60);
        why = xasprintf("the driver is for lab '%s', not '%s'", q, ch->lab);
        free(q);
    } else if (!cJSON_IsNumber(np) || np->valuedouble != ch->np)
        why = xasprintf("the driver does not run with %d ranks", ch->np);
    else if (!cJSON_IsNumber(rank) || rank->valuedouble < 0 || rank->valuedouble >= ch->np ||
             rank->valuedouble != floor(rank->valuedouble))
        why = xstrdup("a hello without a valid rank");
    else {
        int r = (int)rank->valuedouble;
        for (int i = 0; i < ch->npeers; i++)
            if (ch->peers[i].rank == r) why = xasprintf("two connections say hello as rank %d", r);
        if (!why) p->rank = r;
    }
    cJSON_Delete(o);
    if (why) return distrust(ch, why);
    if (++ch->hellos < ch->np) return true;
    // every rank is here, and no player runs yet: close the door, then hand out the key
    stop_listening(ch);
    char msg[64];
    int n = snprintf(msg, sizeof msg, "{\"event\":\"key\",\"key\":\"%s\"}\n", ch->key);
    for (int i = 0; i < ch->npeers; i++) {
        chan_peer *q = &ch->peers[i];
        if (q->rank < 0 || q->fd < 0) continue;
        for (ssize_t off = 0; off < n;) {  // 60 bytes into a fresh socket: never blocks for long
            ssize_t w = write(q->fd, msg + off, (size_t)(n - off));
            if (w < 0 && (errno == EAGAIN || errno == EINTR)) continue;
            if (w <= 0) break;
            off += w;
        }
    }
    memset(msg, 0, sizeof msg);
    ch->keyed = true;
    return true;
}

/* A record from another rank than 0: one signed abort, saying why its referee stopped. */
static bool on_other(channel *ch, chan_peer *p, const char *line, size_t len)
{
    const char *tab = memrchr(line, '\t', len);
    unsigned char key[16];
    bool signed_ok = false;
    if (tab && siphash_key_from_hex(ch->key, key) == 0 && (size_t)(line + len - tab - 1) == SIPHASH_HEX) {
        char hex[SIPHASH_HEX + 1];
        memcpy(hex, tab + 1, SIPHASH_HEX);
        hex[SIPHASH_HEX] = '\0';
        unsigned long long sig = strtoull(hex, NULL, 16);
        signed_ok = sig == siphash_record(key, p->seq++, line, (size_t)(tab - line));
    }
    if (!signed_ok)
        return distrust(ch, xasprintf("rank %d's connection carried a record without the run's signature", p->rank));
    cJSON *o = cJSON_ParseWithLength(line, (size_t)(tab - line));
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(o, "event"), *why = cJSON_GetObjectItemCaseSensitive(o, "why");
    char *text = NULL;
    if (cJSON_IsString(ev) && !strcmp(ev->valuestring, "abort")) {
        // the referee knows its case; rank 0's records may still be on their way
        const cJSON *cs = cJSON_GetObjectItemCaseSensitive(o, "case");
        if (cJSON_IsString(cs) && !ch->abort_case && strlen(cs->valuestring) < 256) ch->abort_case = xstrdup(cs->valuestring);
        char *w = xstrdup(cJSON_IsString(why) ? why->valuestring : "(no reason)");
        flatten_text(w, 300);
        text = xasprintf("rank %d's referee stopped the run: %s", p->rank, w);
        free(w);
    } else {
        text = xasprintf("rank %d's referee sent a record other than abort", p->rank);
    }
    cJSON_Delete(o);
    return distrust(ch, text);
}

/* Read what one connection has (at most `budget` bytes), line by line. */
static bool read_peer(channel *ch, chan_peer *p, size_t budget, line_fn fn, void *ctx)
{
    while (p->fd >= 0 && budget > 0) {
        if (p->cap - p->len < READ_CHUNK + 1) {
            p->cap = p->cap ? 2 * p->cap : 4 * READ_CHUNK;
            p->buf = xrealloc(p->buf, p->cap);
        }
        ssize_t got = read(p->fd, p->buf + p->len, READ_CHUNK);
        if (got < 0 && (errno == EAGAIN || errno == EINTR)) return true;
        if (got <= 0) {  // end of file (an unfinished last line is not a record)
            close(p->fd);
            p->fd = -1;
            return true;
        }
        size_t old = p->len;
        p->len += (size_t)got;
        budget = budget > (size_t)got ? budget - (size_t)got : 0;
        size_t start = 0;
        for (size_t i = old; i < p->len; i++) {
            if (p->buf[i] != '\n') continue;
            p->buf[i] = '\0';
            size_t n = i - start;
            const char *line = p->buf + start;
            start = i + 1;
            bool ok;
            if (p->rank < 0) ok = n > HELLO_MAX ? distrust(ch, xstrdup("an overlong hello")) : on_hello(ch, p, line, n);
            else if (!ch->keyed) ok = distrust(ch, xasprintf("rank %d wrote before every rank had said hello", p->rank));
            else if (p->rank != 0) ok = n > LINE_MAX_BYTES ? distrust(ch, xstrdup("an overlong record")) : on_other(ch, p, line, n);
            else ok = n > ch->line_max ? fn(ctx, NULL, 0) : fn(ctx, line, n);
            if (!ok) {
                p->len = 0;
                return false;
            }
        }
        memmove(p->buf, p->buf + start, p->len - start);
        p->len -= start;
        if (p->len > ch->line_max && p->len > HELLO_MAX) {  // no newline in sight: over the cap already
            p->len = 0;
            return p->rank == 0 && ch->keyed ? fn(ctx, NULL, 0) : distrust(ch, xstrdup("an overlong record"));
        }
    }
    return true;
}

bool channel_read(channel *ch, size_t budget, line_fn fn, void *ctx)
{
    for (int i = 0; i < ch->npeers; i++) {
        chan_peer *p = &ch->peers[i];
        if (read_peer(ch, p, budget, fn, ctx)) continue;
        // another rank's referee stopped the run: what rank 0 wrote before it may have
        // arrived after rank 0's turn; read it, so that the records place the stop
        for (int j = 0; p->rank > 0 && ch->keyed && j < ch->npeers; j++)
            if (ch->peers[j].rank == 0) read_peer(ch, &ch->peers[j], budget, fn, ctx);
        return false;
    }
    return !ch->tamper;
}

void channel_close(channel *ch)
{
    if (ch->listen_fd >= 0) close(ch->listen_fd);
    for (int i = 0; i < ch->npeers; i++) {
        if (ch->peers[i].fd >= 0) close(ch->peers[i].fd);
        free(ch->peers[i].buf);
    }
    free(ch->peers);
    if (ch->path) unlink(ch->path);
    if (ch->dir) rmdir(ch->dir);
    free(ch->dir);
    free(ch->path);
    free(ch->tamper);
    free(ch->abort_case);
    memset(ch->key, 0, sizeof ch->key);
    *ch = (channel){.listen_fd = -1};
}
