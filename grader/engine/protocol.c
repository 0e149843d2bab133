/* protocol.c - the driver protocol, version 3: rank 0's records, one at a time.
 *
 * The referees' hellos and the key exchange are the channel's (channel.c). Then
 * rank 0's referee sends one record per line: a JSON object, a tab, and the record's
 * signature - SipHash-2-4 under the run's key of the record's number (0 for the plan) and
 * the JSON, 16 hex digits (grader/runner/siphash.h):
 *   {"event":"plan","cases":[{"case":C,"group":G},...]}        first: every case it will run
 *   {"event":"begin","case":C}                                 the next planned case
 *   {"event":"result","case":C,"group":G,"verdict":V,"message":M,...numbers}
 *   {"event":"end","cases":K,"failed":F}
 * Anything else - a missing or wrong signature, a begin out of plan order, a result for a case that is not
 * running, a second result, an unknown event, a line that is not an object, an overlong
 * line, more lines than the plan allows, a record after the end - ends the trust in the
 * run: proto_feed() says PROTO_TAMPERED and keeps the reason. Text that is kept (the
 * message and string fields) is cleaned here, after JSON decoding, so an escape sequence
 * cannot smuggle a control byte past the cleaning. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "siphash.h" // defines: siphash_record, siphash_key_from_hex

#define MESSAGE_MAX 400    // bytes of a driver message kept
#define FIELDS_MAX 128     // fields of one result record
#define FIELD_NAME_MAX 64
#define EXTRA_LINES 16     // lines allowed beyond hello, plan, begin+result per case, end

void plan_push(case_plan *p, const char *name, const char *group)
{
    if (p->count == p->cap) {
        p->cap = p->cap ? 2 * p->cap : 64;
        p->v = xrealloc(p->v, (size_t)p->cap * sizeof *p->v);
    }
    p->v[p->count++] = (planned_case){xstrdup(name), xstrdup(group)};
}

void plan_free(case_plan *p)
{
    for (int i = 0; i < p->count; i++) {
        free(p->v[i].name);
        free(p->v[i].group);
    }
    free(p->v);
    *p = (case_plan){0};
}

void proto_init(proto_state *p, const char *key, const char *lab, int np, const case_plan *expected)
{
    /* protocol 3: the hellos are the channel's (channel.c); rank 0's first record
     * is the plan */
    *p = (proto_state){.key = key, .lab = lab, .np = np, .expected = expected, .pending = -1, .last_result = -1,
                       .result_index = -1, .stage = PROTO_PLAN};
    if (siphash_key_from_hex(key, p->mac_key) != 0) die_engine("internal: a run key that is not 32 hex digits");
}

void proto_free(proto_state *p)
{
    plan_free(&p->plan);
    free(p->tamper);
    free(p->result_detail);
    cJSON_Delete(p->result_json);
    *p = (proto_state){0};
}

size_t proto_line_max(const proto_state *p)
{
    return p->stage == PROTO_PLAN ? PLAN_LINE_MAX : LINE_MAX_BYTES;
}

/* ---------------------------------------------------------------- helpers */

static proto_event distrust(proto_state *p, char *why)
{
    if (!p->tamper) p->tamper = why;
    else free(why);
    return PROTO_TAMPERED;
}

/* Untrusted text quoted in a reason: cleaned, one line, short. */
static char *quoted(const char *s)
{
    char *q = xstrdup(s ? s : "(none)");
    flatten_text(q, 60);
    return q;
}

static const char *string_field(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static bool number_field(const cJSON *o, const char *key, double *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) return false;
    *out = v->valuedouble;
    return true;
}

static bool field_name_ok(const char *k)
{
    size_t n = k ? strlen(k) : 0;
    return n > 0 && n <= FIELD_NAME_MAX &&
           strspn(k, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") == n;
}

/* ---------------------------------------------------------------- the plan */

static int by_name(const void *a, const void *b)
{
    return strcmp((*(const planned_case *const *)a)->name, (*(const planned_case *const *)b)->name);
}

static proto_event on_plan(proto_state *p, const cJSON *o, const char *event)
{
    if (strcmp(event, "plan")) return distrust(p, xstrdup("the second record is not the plan"));
    const cJSON *cases = cJSON_GetObjectItemCaseSensitive(o, "cases");
    if (!cJSON_IsArray(cases)) return distrust(p, xstrdup("the plan has no list of cases"));
    int n = cJSON_GetArraySize(cases);
    if (n > PLAN_CASES_MAX) return distrust(p, xasprintf("the plan lists more than %d cases", PLAN_CASES_MAX));
    const cJSON *c;
    cJSON_ArrayForEach(c, cases) {
        const char *name = string_field(c, "case"), *group = string_field(c, "group");
        if (!name || !group || !valid_name(name) || !valid_name(group)) {
            char *q = quoted(name);
            char *why = xasprintf("planned case %d ('%s') has no valid name and group", p->plan.count + 1, q);
            free(q);
            return distrust(p, why);
        }
        plan_push(&p->plan, name, group);
    }
    // every case exactly once
    const planned_case **sorted = xmalloc((size_t)(n ? n : 1) * sizeof *sorted);
    for (int i = 0; i < n; i++) sorted[i] = &p->plan.v[i];
    qsort(sorted, (size_t)n, sizeof *sorted, by_name);
    for (int i = 1; i < n; i++)
        if (!strcmp(sorted[i - 1]->name, sorted[i]->name)) {
            char *why = xasprintf("the plan lists case %s twice", sorted[i]->name);
            free(sorted);
            return distrust(p, why);
        }
    free(sorted);
    const case_plan *want = p->expected;
    if (want) {
        for (int i = 0; i < n || i < want->count; i++) {
            if (i < n && i < want->count && !strcmp(p->plan.v[i].name, want->v[i].name) &&
                !strcmp(p->plan.v[i].group, want->v[i].group))
                continue;
            return distrust(p, xasprintf("the restart's plan is not the rest of the first plan "
                                         "(at case %d: %s instead of %s)",
                                         i + 1, i < n ? p->plan.v[i].name : "nothing",
                                         i < want->count ? want->v[i].name : "nothing"));
        }
    }
    p->stage = PROTO_CASES;
    return PROTO_OK;
}

/* ---------------------------------------------------------------- cases */

static proto_event on_begin(proto_state *p, const cJSON *o)
{
    const char *name = string_field(o, "case");
    const char *next = p->next < p->plan.count ? p->plan.v[p->next].name : NULL;
    if (p->pending >= 0 || !name || !next || strcmp(name, next)) {
        char *q = quoted(name);
        char *why = p->pending >= 0 ? xasprintf("begin of '%s' while %s is running", q, p->plan.v[p->pending].name)
                    : next          ? xasprintf("begin of '%s' when the next planned case is %s", q, next)
                                    : xasprintf("begin of '%s' after every planned case", q);
        free(q);
        return distrust(p, why);
    }
    p->pending = p->next++;
    return PROTO_OK;
}

/* "index 17: expected 3, got 5 (12 of 1024 wrong)" from whichever fields exist. */
static char *wrong_detail(const cJSON *o)
{
    char buf[1024] = "";
    size_t n = 0;
    double v;
#define APPEND(...) n += (size_t)snprintf(buf + n, n < sizeof buf ? sizeof buf - n : 0, __VA_ARGS__)
    if (number_field(o, "first_wrong", &v)) APPEND("index %.15g", v);
    if (number_field(o, "expected", &v)) APPEND("%sexpected %.9g", n ? ": " : "", v);
    if (number_field(o, "got", &v)) APPEND("%sgot %.9g", n ? ", " : "", v);
    if (number_field(o, "wrong", &v)) {
        APPEND("%s(%.15g", n ? " " : "", v);
        if (number_field(o, "count", &v)) APPEND(" of %.15g", v);
        APPEND(" wrong)");
    }
#undef APPEND
    return xstrdup(n ? buf : "wrong result");
}

/* The result's fields as the reports keep them: flat, named [A-Za-z0-9_], finite numbers,
 * cleaned and capped strings. NULL (with the reason set) when the record breaks that. */
static cJSON *clean_fields(proto_state *p, const cJSON *o)
{
    cJSON *out = cJSON_CreateObject();
    int n = 0;
    const cJSON *f;
    cJSON_ArrayForEach(f, o) {
        const char *k = f->string;
        char *why = NULL;
        if (++n > FIELDS_MAX) why = xasprintf("a result with more than %d fields", FIELDS_MAX);
        else if (!field_name_ok(k)) why = xstrdup("a result field name that is not [A-Za-z0-9_]");
        else if (cJSON_GetObjectItemCaseSensitive(out, k)) why = xasprintf("a result with the field %s twice", k);
        else if (cJSON_IsArray(f) || cJSON_IsObject(f))
            why = xasprintf("a result field %s that is not a plain value", k);
        if (why) {
            distrust(p, why);
            cJSON_Delete(out);
            return NULL;
        }
        if (cJSON_IsNumber(f)) {
            if (isfinite(f->valuedouble)) cJSON_AddNumberToObject(out, k, f->valuedouble);
            else cJSON_AddNullToObject(out, k);
        } else if (cJSON_IsString(f)) {
            char *text = xstrdup(f->valuestring);
            flatten_text(text, MESSAGE_MAX);
            cJSON_AddStringToObject(out, k, text);
            free(text);
        } else if (cJSON_IsBool(f)) {
            cJSON_AddBoolToObject(out, k, cJSON_IsTrue(f));
        } else {
            cJSON_AddNullToObject(out, k);
        }
    }
    return out;
}

static proto_event on_result(proto_state *p, const cJSON *o)
{
    const char *name = string_field(o, "case");
    if (p->pending < 0 || !name || strcmp(name, p->plan.v[p->pending].name)) {
        char *q = quoted(name);
        char *why = p->pending >= 0 ? xasprintf("a result for '%s' while %s is running", q, p->plan.v[p->pending].name)
                                    : xasprintf("a result for '%s' with no case running", q);
        free(q);
        p->stray_result = p->pending < 0;
        return distrust(p, why);
    }
    const planned_case *pc = &p->plan.v[p->pending];
    const char *group = string_field(o, "group");
    if (!group || strcmp(group, pc->group))
        return distrust(p, xasprintf("the result of %s names another group than its plan (%s)", pc->name, pc->group));
    const char *verdict = string_field(o, "verdict");
    static const char *const verdicts[] = {"pass", "wrong", "forbidden", "error"};
    static const classification classes[] = {CL_PASS, CL_WRONG, CL_FORBIDDEN, CL_ERROR};
    int v = -1;
    for (int i = 0; i < 4 && verdict; i++)
        if (!strcmp(verdict, verdicts[i])) v = i;
    if (v < 0) {
        char *q = quoted(verdict);
        char *why = xasprintf("the result of %s has the unknown verdict '%s'", pc->name, q);
        free(q);
        return distrust(p, why);
    }
    cJSON *fields = clean_fields(p, o);
    if (!fields) return PROTO_TAMPERED;
    cJSON_DeleteItemFromObjectCaseSensitive(fields, "event");
    const char *msg = string_field(fields, "message");
    if (msg && !msg[0]) msg = NULL;
    char *detail = NULL;
    switch (classes[v]) {
    case CL_WRONG: detail = msg ? xstrdup(msg) : wrong_detail(fields); break;
    case CL_FORBIDDEN: detail = xstrdup(msg ? msg : "called a library collective"); break;
    case CL_ERROR: detail = xstrdup(msg ? msg : "the driver reported an error"); break;
    default: break;
    }
    free(p->result_detail);
    cJSON_Delete(p->result_json);
    p->result_index = p->pending;
    p->result_cls = classes[v];
    p->result_detail = detail;
    p->result_json = fields;
    p->last_result = p->pending;
    p->pending = -1;
    p->results++;
    if (classes[v] != CL_PASS) p->failed++;
    return PROTO_RESULT;
}

static proto_event on_end(proto_state *p, const cJSON *o)
{
    if (p->pending >= 0)
        return distrust(p, xasprintf("the end record came while %s was running", p->plan.v[p->pending].name));
    double cases, failed;
    if (!number_field(o, "cases", &cases) || !number_field(o, "failed", &failed) || cases != p->results ||
        failed != p->failed)
        return distrust(p, xasprintf("the end record's counts do not match the %d result(s), %d failed, of this run",
                                     p->results, p->failed));
    p->stage = PROTO_DONE;
    return PROTO_END;
}

/* Rank 0's referee stopped the run (its player broke the protocol, or a relay was altered). */
static proto_event on_abort(proto_state *p, const cJSON *o)
{
    char *q = xstrdup(string_field(o, "why") ? string_field(o, "why") : "(no reason)");
    flatten_text(q, 300);
    char *why = xasprintf("rank 0's referee stopped the run: %s", q);
    free(q);
    return distrust(p, why);
}

/* ---------------------------------------------------------------- one line */

proto_event proto_feed(proto_state *p, const char *line, size_t len)
{
    if (p->tamper) return PROTO_TAMPERED;
    if (!line) return distrust(p, xasprintf("a record longer than %zu bytes", proto_line_max(p)));
    p->lines++;
    if (p->stage == PROTO_CASES && p->lines > 2 * p->plan.count + EXTRA_LINES)
        return distrust(p, xasprintf("more than %d records for %d planned case(s)", 2 * p->plan.count + EXTRA_LINES,
                                     p->plan.count));
    if (p->stage == PROTO_DONE) return distrust(p, xstrdup("a record after the end record"));
    if (memchr(line, '\0', len)) return distrust(p, xstrdup("a record with a NUL byte"));
    /* the signature: after the last tab (the JSON has none: cJSON escapes tabs in strings) */
    uint64_t sig = 0;
    long text = siphash_split_signed(line, len, &sig);
    const char *tab = text < 0 ? NULL : line + text;
    if (!tab || sig != siphash_record(p->mac_key, (uint64_t)(p->lines - 1), line, (size_t)text))
        return distrust(p, xasprintf("record %d does not carry this run's signature (written by something that "
                                     "does not hold the run's key)", p->lines));
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(line, (size_t)(tab - line), &end, false);
    if (o && end != tab) {
        cJSON_Delete(o);
        o = NULL;
    }
    if (!cJSON_IsObject(o)) {
        cJSON_Delete(o);
        return distrust(p, xstrdup("a line that is not a JSON object"));
    }
    const char *event = string_field(o, "event");
    proto_event ev;
    if (!event) ev = distrust(p, xstrdup("a record without an event"));
    else if (!strcmp(event, "abort")) ev = on_abort(p, o);
    else if (p->stage == PROTO_PLAN) ev = on_plan(p, o, event);
    else if (!strcmp(event, "begin")) ev = on_begin(p, o);
    else if (!strcmp(event, "result")) ev = on_result(p, o);
    else if (!strcmp(event, "end")) ev = on_end(p, o);
    else {
        char *q = quoted(event);
        ev = distrust(p, xasprintf("an unknown event '%s'", q));
        free(q);
    }
    cJSON_Delete(o);
    return ev;
}
