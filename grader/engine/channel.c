/* channel.c - the results channel of one driver run (protocol 4).
 *
 * On one host, a fresh directory (mkdtemp: mode 0700, a random name) under the engine's work
 * directory holds a listening AF_UNIX socket whose path reaches the run through its
 * environment (PL_RESULTS_SOCK). Across hosts (PL_ENGINE_ADDR), the engine listens on TCP
 * at that address instead and the run gets "ip:port" (PL_ENGINE_TCP). Either way, the run
 * also gets the run's secret (PL_ENGINE_SECRET), every connection gets a challenge, and a
 * referee's hello must answer it under the secret (handshake.h): a connection from anyone
 * else on the network is closed unheard. No player (no student code) exists during the
 * hellos, because a referee starts its player only once it holds the run's key, and the
 * engine hands the key out - XORed with a pad only holders of the secret can compute, and
 * signed - only when every rank has said hello; at that moment it stops listening, so
 * nothing started later can connect. The key never travels in the clear, in an environment
 * or in a file.
 *
 * After that, rank 0's connection carries the run's records (protocol.c reads them);
 * every other connection may carry one signed `abort` record (a referee that saw its player
 * break the protocol, or a relay altered) and nothing else. Lines are framed here, each at
 * most line_max bytes. */
#include <cjson/cJSON.h>
#include <arpa/inet.h>   // defines: inet_ntop
#include <errno.h>
#include <math.h>
#include <netdb.h>       // defines: getaddrinfo
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>  // defines: socket, bind, listen, accept4
#include <sys/un.h>      // defines: sockaddr_un
#include <unistd.h>

#include "engine.h"
#include "handshake.h"  // defines: hs_mac, hs_crypt_key, HS_*
#include "siphash.h"    // defines: siphash_record, the signature of the abort record

#define READ_CHUNK 65536
#define HELLO_MAX 1024
#define CONNECTIONS_MAX(np) (2 * (np) + 8)  // refused ones included: no flood can grow this

/* "host", "host:port", "[v6]:port": listen there (port 0: any free one); the address the
 * referees are told is the one bound, numeric. */
static void listen_tcp(channel *ch, const char *spec, int np)
{
    char host[256] = "", port[16] = "0";
    const char *colon = strrchr(spec, ':');
    if (spec[0] == '[') {  // [v6] or [v6]:port
        const char *close = strchr(spec, ']');
        if (!close || (close[1] && close[1] != ':') || (size_t)(close - spec - 1) >= sizeof host)
            die_usage("PL_ENGINE_ADDR=%s: not an address (host, host:port or [v6]:port)", spec);
        memcpy(host, spec + 1, (size_t)(close - spec - 1));
        if (close[1] == ':') snprintf(port, sizeof port, "%s", close + 2);
    } else if (colon && colon == strchr(spec, ':')) {  // one colon: host:port
        if ((size_t)(colon - spec) >= sizeof host) die_usage("PL_ENGINE_ADDR=%s: the host name is too long", spec);
        memcpy(host, spec, (size_t)(colon - spec));
        snprintf(port, sizeof port, "%s", colon + 1);
    } else {
        snprintf(host, sizeof host, "%s", spec);
    }
    if (!host[0] || !port[0] || strspn(port, "0123456789") != strlen(port) || atoi(port) > 65535)
        die_usage("PL_ENGINE_ADDR=%s: not an address (host, host:port or [v6]:port)", spec);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV},
                    *res = NULL;
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0) die_usage("PL_ENGINE_ADDR=%s: %s", spec, gai_strerror(rc));
    int err = 0;
    for (struct addrinfo *a = res; a && ch->listen_fd < 0; a = a->ai_next) {
        int fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        int one = 1;
        if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (fd >= 0 && bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, np + 4) == 0) {
            ch->listen_fd = fd;
            break;
        }
        err = errno;
        if (fd >= 0) close(fd);
    }
    freeaddrinfo(res);
    if (ch->listen_fd < 0)
        die_usage("PL_ENGINE_ADDR=%s: cannot listen there (%s); give an address of this host that the nodes "
                  "can reach", spec, strerror(err));
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    char ip[INET6_ADDRSTRLEN] = "?";
    int bound_port = 0;
    if (getsockname(ch->listen_fd, (struct sockaddr *)&ss, &len) == 0) {
        if (ss.ss_family == AF_INET) {
            struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
            inet_ntop(AF_INET, &v4->sin_addr, ip, sizeof ip);
            bound_port = ntohs(v4->sin_port);
        } else {
            struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
            inet_ntop(AF_INET6, &v6->sin6_addr, ip, sizeof ip);
            bound_port = ntohs(v6->sin6_port);
        }
    }
    if (!strcmp(ip, "0.0.0.0") || !strcmp(ip, "::"))
        die_usage("PL_ENGINE_ADDR=%s: the referees need one address of this host to connect to, not the "
                  "wildcard", spec);
    ch->endpoint = ss.ss_family == AF_INET6 ? xasprintf("[%s]:%d", ip, bound_port) : xasprintf("%s:%d", ip, bound_port);
}

void channel_open(channel *ch, const char *work_dir, int serial, uid_t owner, const char *lab, int np,
                  const char *tcp_addr)
{
    *ch = (channel){.listen_fd = -1, .line_max = LINE_MAX_BYTES, .np = np, .lab = lab};
    ch->dir = xasprintf("%s/run%d.XXXXXX", work_dir, serial);  // a name nobody can guess
    if (!mkdtemp(ch->dir)) die_engine("cannot create %s: %s", ch->dir, strerror(errno));
    random_hex(ch->key, 16);
    random_hex(ch->secret, 16);
    ch->peers = xmalloc((size_t)CONNECTIONS_MAX(np) * sizeof *ch->peers);
    if (owner != (uid_t)-1 && chown(ch->dir, owner, owner) != 0)
        die_engine("cannot hand %s to uid %d: %s", ch->dir, (int)owner, strerror(errno));
    if (tcp_addr && tcp_addr[0]) {
        listen_tcp(ch, tcp_addr, np);
        return;
    }
    ch->path = xasprintf("%s/results.sock", ch->dir);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(ch->path) >= sizeof addr.sun_path)
        die_engine("the socket path %s is too long; set TMPDIR to a shorter directory", ch->path);
    strcpy(addr.sun_path, ch->path);
    ch->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (ch->listen_fd < 0 || bind(ch->listen_fd, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        listen(ch->listen_fd, np + 4) != 0)
        die_engine("cannot open the results socket %s: %s", ch->path, strerror(errno));
    // a sandboxed run is another user: it must reach the directory and the socket, nobody else
    if (owner != (uid_t)-1 && chown(ch->path, owner, owner) != 0)
        die_engine("cannot hand %s to uid %d: %s", ch->dir, (int)owner, strerror(errno));
}

/* A whole short line into a fresh connection (its buffer is empty: never blocks for long). */
static void write_line(int fd, const char *text, size_t n)
{
    for (size_t off = 0; off < n;) {
        ssize_t w = write(fd, text + off, n - off);
        if (w < 0 && (errno == EAGAIN || errno == EINTR)) continue;
        if (w <= 0) break;
        off += (size_t)w;
    }
}

static void stop_listening(channel *ch)
{
    if (ch->listen_fd >= 0) close(ch->listen_fd);  // connections queued behind are reset
    ch->listen_fd = -1;
    if (ch->path) unlink(ch->path);
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
        chan_peer *p = &ch->peers[ch->npeers++];
        *p = (chan_peer){.fd = fd, .rank = -1};
        random_hex(p->ne, 16);
        char msg[128];
        int n = snprintf(msg, sizeof msg, "{\"event\":\"challenge\",\"protocol\":%d,\"nonce\":\"%s\"}\n",
                         HS_PROTOCOL, p->ne);
        write_line(fd, msg, (size_t)n);
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

/* A hello that does not answer this connection's challenge under the run's secret: across
 * hosts, anyone on the network may have connected (closed, counted, not held against the
 * run); on one host only the run's own processes can reach the socket (distrust). */
static bool refuse(channel *ch, chan_peer *p, const char *what)
{
    if (!ch->endpoint) return distrust(ch, xstrdup(what));
    close(p->fd);
    p->fd = -1;
    ch->refused++;
    return true;
}

/* A referee's hello: {"event":"hello","protocol":4,"lab":L,"np":N,"rank":R,"host":H,
 * "nonce":NR} TAB its MAC under the secret (handshake.h); every rank once. */
static bool on_hello(channel *ch, chan_peer *p, const char *line, size_t len)
{
    uint64_t sig = 0;
    long text = siphash_split_signed(line, len, &sig);
    size_t jlen = text < 0 ? len : (size_t)text;
    cJSON *o = cJSON_ParseWithLength(line, jlen);
    const cJSON *ev = cJSON_GetObjectItemCaseSensitive(o, "event"), *ver = cJSON_GetObjectItemCaseSensitive(o, "protocol");
    const cJSON *lab = cJSON_GetObjectItemCaseSensitive(o, "lab"), *np = cJSON_GetObjectItemCaseSensitive(o, "np");
    const cJSON *rank = cJSON_GetObjectItemCaseSensitive(o, "rank"), *nonce = cJSON_GetObjectItemCaseSensitive(o, "nonce");
    const cJSON *host = cJSON_GetObjectItemCaseSensitive(o, "host"), *uid = cJSON_GetObjectItemCaseSensitive(o, "uid");
    const cJSON *userns = cJSON_GetObjectItemCaseSensitive(o, "userns");
    char *why = NULL;
    if (!cJSON_IsObject(o) || !cJSON_IsString(ev) || strcmp(ev->valuestring, "hello")) {
        cJSON_Delete(o);
        return refuse(ch, p, "the first record of a connection is not a referee's hello");
    }
    if (!cJSON_IsNumber(ver) || ver->valuedouble != HS_PROTOCOL) {
        cJSON_Delete(o);
        return distrust(ch, xasprintf("the driver does not speak protocol %d (rebuild it: make clean, then make)",
                                      HS_PROTOCOL));
    }
    // the secret first: nothing a stranger says is looked at
    bool proven = false;
    unsigned char secret[SIPHASH_KEY_BYTES];
    if (text >= 0 && cJSON_IsString(nonce) && strlen(nonce->valuestring) == HS_NONCE_HEX &&
        strspn(nonce->valuestring, "0123456789abcdef") == HS_NONCE_HEX && siphash_key_from_hex(ch->secret, secret) == 0)
        proven = sig == hs_mac(secret, HS_TAG_HELLO, p->ne, nonce->valuestring, line, jlen);
    memset(secret, 0, sizeof secret);
    if (!proven) {
        cJSON_Delete(o);
        return refuse(ch, p, "a hello that does not answer its challenge with the run's secret");
    }
    if (!cJSON_IsString(lab) || strcmp(lab->valuestring, ch->lab)) {
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
        if (!why) {
            p->rank = r;
            snprintf(p->nr, sizeof p->nr, "%s", nonce->valuestring);
            p->host = xstrdup(cJSON_IsString(host) && host->valuestring[0] ? host->valuestring : "?");
            flatten_text(p->host, 64);
            p->uid = cJSON_IsNumber(uid) ? (int)uid->valuedouble : -1;
            p->userns = cJSON_IsTrue(userns);
        }
    }
    cJSON_Delete(o);
    if (why) return distrust(ch, why);
    if (++ch->hellos < ch->np) return true;
    // every rank is here, and no player runs yet: close the door, then hand out the key
    stop_listening(ch);
    if (siphash_key_from_hex(ch->secret, secret) != 0) return distrust(ch, xstrdup("the run's secret is malformed"));
    for (int i = 0; i < ch->npeers; i++) {
        chan_peer *q = &ch->peers[i];
        if (q->rank < 0 || q->fd < 0) continue;
        char enc[2 * SIPHASH_KEY_BYTES + 1], msg[160];
        if (hs_crypt_key(secret, q->ne, q->nr, ch->key, enc) != 0) continue;
        int n = snprintf(msg, sizeof msg, "{\"event\":\"key\",\"key\":\"%s\"}", enc);
        uint64_t mac = hs_mac(secret, HS_TAG_KEY, q->ne, q->nr, msg, (size_t)n);
        n += snprintf(msg + n, sizeof msg - (size_t)n, "\t%016llx\n", (unsigned long long)mac);
        write_line(q->fd, msg, (size_t)n);
        memset(msg, 0, sizeof msg);
    }
    memset(secret, 0, sizeof secret);
    ch->keyed = true;
    return true;
}

char *channel_hosts(const channel *ch)
{
    if (!ch->keyed) return NULL;
    strlist out = {0};
    const chan_peer **by_rank = xmalloc((size_t)ch->np * sizeof *by_rank);  // every rank said hello once
    for (int i = 0; i < ch->npeers; i++)
        if (ch->peers[i].rank >= 0) by_rank[ch->peers[i].rank] = &ch->peers[i];
    bool *done = xmalloc((size_t)ch->np * sizeof *done);
    memset(done, 0, (size_t)ch->np * sizeof *done);
    for (int i = 0; i < ch->np; i++) {
        const chan_peer *p = by_rank[i];
        if (done[i]) continue;
        strlist ranks = {0};
        for (int j = i; j < ch->np; j++) {
            const chan_peer *q = by_rank[j];
            if (done[j] || strcmp(q->host, p->host)) continue;
            done[j] = true;
            char r[16];
            snprintf(r, sizeof r, "%d", q->rank);
            strlist_push(&ranks, r);
        }
        char *list = strlist_join(&ranks, ",");
        char *one = xasprintf("%s (rank%s %s; referee uid %d%s)", p->host, ranks.count > 1 ? "s" : "", list, p->uid,
                              p->userns ? ", in a user namespace" : "");
        strlist_push(&out, one);
        free(one);
        free(list);
        strlist_free(&ranks);
    }
    free(done);
    free(by_rank);
    char *text = strlist_join(&out, ", ");
    strlist_free(&out);
    return text;
}

/* A record from another rank than 0: one signed abort, saying why its referee stopped. */
static bool on_other(channel *ch, chan_peer *p, const char *line, size_t len)
{
    unsigned char key[16];
    uint64_t sig = 0;
    long body = siphash_split_signed(line, len, &sig);
    if (body < 0 || siphash_key_from_hex(ch->key, key) != 0 || sig != siphash_record(key, p->seq++, line, (size_t)body))
        return distrust(ch, xasprintf("rank %d's connection carried a record without the run's signature", p->rank));
    cJSON *o = cJSON_ParseWithLength(line, (size_t)body);
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
            if (p->rank < 0) ok = n > HELLO_MAX ? refuse(ch, p, "an overlong hello") : on_hello(ch, p, line, n);
            else if (!ch->keyed) ok = distrust(ch, xasprintf("rank %d wrote before every rank had said hello", p->rank));
            else if (p->rank != 0) ok = n > LINE_MAX_BYTES ? distrust(ch, xstrdup("an overlong record")) : on_other(ch, p, line, n);
            else ok = n > ch->line_max ? fn(ctx, NULL, 0) : fn(ctx, line, n);
            if (!ok || p->fd < 0) {  // stopped trusting, or a stranger's connection closed
                p->len = 0;
                return ok;
            }
        }
        memmove(p->buf, p->buf + start, p->len - start);
        p->len -= start;
        if (p->rank < 0 && p->len > HELLO_MAX) {
            p->len = 0;
            return refuse(ch, p, "an overlong hello");
        }
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
        free(ch->peers[i].host);
    }
    free(ch->peers);
    if (ch->path) unlink(ch->path);
    if (ch->dir) rmdir(ch->dir);
    free(ch->dir);
    free(ch->path);
    free(ch->endpoint);
    free(ch->tamper);
    free(ch->abort_case);
    memset(ch->key, 0, sizeof ch->key);
    memset(ch->secret, 0, sizeof ch->secret);
    *ch = (channel){.listen_fd = -1};
}
