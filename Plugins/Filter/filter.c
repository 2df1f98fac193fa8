/*
 * filter.c - a SwiftPaging interceptor plugin that keeps (or drops) the items of each page that
 * match conditions on their JSON values, and can project each kept item onto a few fields. It is
 * a page transform (paging.page-transform/1): the page changes on its way back to the caller.
 *
 * Plugin id: "filter" (kind INTERCEPTOR, THREAD_SAFE: the config is immutable after create and
 * transform() keeps its scratch space on its own stack or heap). Requires the host extension
 * paging.page-transform/1 (ABI 1.1).
 *
 * Config keys (any other key is refused):
 *   where   array, optional (default []). Conditions, all of which must hold for an item to
 *           match. Each is an object with "pointer" (an RFC 6901 JSON pointer into the item, such
 *           as "/owner/login"; ~0 stands for ~ and ~1 for / in a token) and exactly one operator:
 *             "equals", "not_equals"  a string, number, true, false or null, compared by value:
 *                                     strings after decoding escapes ("caf\u00e9" equals "café"),
 *                                     numbers numerically and exactly (10 equals 10.0 and 1e1).
 *                                     A value of another type is not equal.
 *             "contains"              a string: a substring of a string value; or, for an array
 *                                     value, an element equal to it (any scalar may be given; a
 *                                     non-string one only matches array elements).
 *             "less_than", "less_or_equal", "greater_than", "greater_or_equal"
 *                                     a number; a value that is not a number does not match.
 *           A value the pointer does not reach never matches, except for "not_equals", which then
 *           holds. Where an object repeats a key, the last one counts (as JSON parsers and
 *           the http source read it).
 *   mode    string, optional: "keep" (default) keeps the items that match, "drop" drops them
 *           ("drop" needs at least one condition).
 *   fields  array, optional. Projection: each kept item becomes an object holding only these
 *           fields, in this order. An element is a pointer string (the field is named by the
 *           pointer's last token: "/owner/login" gives "login") or an object of
 *           "name": "/pointer" members (to name fields yourself). A field the item lacks is
 *           left out. Values are copied byte for byte from the item.
 * A bad config (a wrong type, a malformed pointer, a condition with no or two operators, a
 * non-number for a numeric comparison, a field name given twice...) fails create with
 * PAGING_ERR_INVALID_CONFIG and a message naming the key path, e.g.
 *   where[1]: expected exactly one of equals, not_equals, contains, ...; got none
 *
 * Behaviour: intercept() lets every request proceed and asks for its page
 * (PROCEED_AND_OBSERVE). transform() decides each item: without fields, kept items are kept
 * as they are (keep_item, no copy), and a page that loses no item goes on unchanged
 * (PAGING_TRANSFORM_KEEP); with fields, each kept item is replaced by its projection. A page
 * that changed carries the metadata "filter.dropped": the items dropped from it, in decimal,
 * added to the count an earlier filter in the chain left on the page.
 *
 * The items are never parsed into a tree: each condition walks the item's bytes to the value
 * its pointer names, skipping every other value; a projection finds all its fields in one walk
 * of the item's top-level members. The host guarantees each item is one valid
 * JSON value in valid UTF-8; the walk still never reads outside the item, and treats what it
 * cannot follow as a missing value.
 *
 * build (third-party path): cc -std=c99 -Wall -Wextra -pedantic -Werror -O2 -shared -fPIC \
 *                               -I Sources/CPaging/include Plugins/Filter/filter.c -o libfilter.so
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paging/paging.h"

#define FILT_METADATA_DROPPED "filter.dropped"

/* Operators, in the order the error messages list them. */
enum { FILT_EQUALS, FILT_NOT_EQUALS, FILT_CONTAINS, FILT_LESS_THAN, FILT_LESS_OR_EQUAL,
       FILT_GREATER_THAN, FILT_GREATER_OR_EQUAL, FILT_OPERATOR_COUNT };

static const char *const filt_operator_names[FILT_OPERATOR_COUNT] = {
    "equals", "not_equals", "contains", "less_than", "less_or_equal", "greater_than", "greater_or_equal"
};

/* The length to print of config text quoted in a message (printf's precision: an int). */
#define FILT_SHOWN(len) ((int)((len) > 200 ? 200 : (len)))

#define FILT_OPERATOR_LIST "equals, not_equals, contains, less_than, less_or_equal, greater_than, greater_or_equal"

/* A JSON number as written, reduced to its significant digits: value = 0.d1d2...dn x 10^msd,
 * where d1...dn are the `count` digits from index `first` of the integer digits followed by the
 * fraction digits. Exact: no conversion to double. */
typedef struct filt_number {
    const uint8_t *int_digits, *frac_digits;
    size_t int_len, frac_len;
    size_t first, count; /* count == 0: the number is zero */
    int64_t msd;
    int negative;
} filt_number;

/* A scalar operand from the config. */
typedef struct filt_scalar {
    uint8_t kind;           /* the first byte of its JSON text: '"', '-' (any number), 't', 'f', 'n' */
    const uint8_t *text;    /* a string's decoded bytes */
    size_t len;
    int has_backslash;      /* the decoded string holds a backslash */
    filt_number number;     /* a number's digits (pointing into a copy of its text) */
} filt_scalar;

/* One reference token of a JSON pointer, decoded (~0 and ~1 resolved). */
typedef struct filt_token {
    const uint8_t *text;
    size_t len;
    size_t index;           /* the array index it names, when is_index */
    int is_index;           /* "0", or digits without a leading zero */
    int has_backslash;
} filt_token;

typedef struct filt_pointer {
    filt_token *tokens;
    size_t count;           /* 0: the whole item */
} filt_pointer;

typedef struct filt_condition {
    filt_pointer pointer;
    int op;                 /* FILT_EQUALS... */
    filt_scalar operand;
} filt_condition;

typedef struct filt_field {
    filt_pointer pointer;
    const uint8_t *key;     /* the output member's name, encoded with its colon: "login": */
    size_t key_len;
    const uint8_t *name;    /* the name, decoded (to find duplicates) */
    size_t name_len;
} filt_field;

/* Everything create allocates hangs off one list, freed by destroy. */
typedef struct filt_block {
    struct filt_block *next;
    double align;
} filt_block;

typedef struct filt_state {
    paging_interceptor_t interceptor; /* first member: `self` points here */
    const paging_host_t *host;
    const paging_ext_page_transform_host_t *out;
    filt_condition *conditions;
    size_t condition_count;
    filt_field *fields;
    size_t field_count;     /* 0: no projection */
    int drop;               /* mode "drop" */
    filt_block *blocks;
    /* during create only: the first problem found */
    paging_status_t error_code;
    char error[700];
} filt_state;

static const char *const filt_required_extensions[] = { PAGING_EXT_PAGE_TRANSFORM, NULL };

static const paging_plugin_descriptor_t filt_descriptor = {
    PAGING_DESCRIPTOR_HEAD,
    "filter",
    "Filter",
    "1.0.0",
    "Keeps or drops the items matching conditions on JSON pointers; optionally projects fields.",
    PAGING_PLUGIN_INTERCEPTOR,
    PAGING_PLUGIN_THREAD_SAFE,
    filt_required_extensions
};

/* ---- the scanner: walks raw JSON bytes, never past `end` --------------------------------- */

/* Bytes that end a number or a literal (and whitespace). */
static const uint8_t filt_delimiter[256] = {
    [' '] = 1, ['\t'] = 1, ['\n'] = 1, ['\r'] = 1, [','] = 1, [']'] = 1, ['}'] = 1, [':'] = 1
};

/* Bytes that matter while skipping a container. */
static const uint8_t filt_structural[256] = { ['"'] = 1, ['{'] = 1, ['['] = 1, ['}'] = 1, [']'] = 1 };

static const uint8_t *filt_ws(const uint8_t *p, const uint8_t *end)
{
    while (p < end && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    return p;
}

/* `p` is at a string's opening quote: returns the position after its closing quote. */
static const uint8_t *filt_skip_string(const uint8_t *p, const uint8_t *end)
{
    const uint8_t *start = ++p;
    while (p < end) {
        const uint8_t *quote = (const uint8_t *)memchr(p, '"', (size_t)(end - p));
        const uint8_t *b;
        if (quote == NULL) return end;
        for (b = quote; b > start && b[-1] == '\\'; b--) {}
        if (((size_t)(quote - b) & 1u) == 0) return quote + 1; /* not escaped */
        p = quote + 1;
    }
    return end;
}

/* `p` is at '{' or '[': returns the position after the matching bracket. */
static const uint8_t *filt_skip_container(const uint8_t *p, const uint8_t *end)
{
    size_t depth = 0;
    while (p < end) {
        uint8_t c = *p;
        if (!filt_structural[c]) { p++; continue; }
        if (c == '"') { p = filt_skip_string(p, end); continue; }
        if (c == '{' || c == '[') depth++;
        else if (--depth == 0) return p + 1;
        p++;
    }
    return end;
}

/* `p` is at a value: returns the position after it. */
static const uint8_t *filt_skip_value(const uint8_t *p, const uint8_t *end)
{
    if (p >= end) return end;
    if (*p == '"') return filt_skip_string(p, end);
    if (*p == '{' || *p == '[') return filt_skip_container(p, end);
    while (p < end && !filt_delimiter[*p]) p++;
    return p;
}

/* Iterates the members of an object or the elements of an array. */
typedef struct filt_cursor {
    const uint8_t *p, *end;
    int started;
} filt_cursor;

static void filt_open(filt_cursor *c, const uint8_t *bracket, const uint8_t *end)
{
    c->p = bracket + 1;
    c->end = end;
    c->started = 0;
}

/* Moves to the next member (its key's bytes between the quotes in [*key, *key_end)) or
 * element, and returns the start of its value; NULL at the end of the container (or where the
 * bytes are not JSON). */
static const uint8_t *filt_next(filt_cursor *c, int object, const uint8_t **key, const uint8_t **key_end)
{
    const uint8_t *p = c->p, *end = c->end;
    if (c->started) {
        p = filt_ws(filt_skip_value(p, end), end);
        if (p >= end || *p != ',') return NULL;
        p++;
    }
    p = filt_ws(p, end);
    if (object) {
        const uint8_t *k;
        if (p >= end || *p != '"') return NULL;
        k = p + 1;
        p = filt_skip_string(p, end);
        if (p <= k || p[-1] != '"') return NULL;
        *key = k;
        *key_end = p - 1;
        p = filt_ws(p, end);
        if (p >= end || *p != ':') return NULL;
        p = filt_ws(p + 1, end);
    }
    if (p >= end || *p == ']' || *p == '}') return NULL;
    c->started = 1;
    c->p = p;
    return p;
}

static unsigned filt_hex4(const uint8_t *p, int *ok)
{
    unsigned v = 0;
    int i;
    for (i = 0; i < 4; i++) {
        uint8_t c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') v |= (unsigned)((c | 0x20) - 'a' + 10);
        else *ok = 0;
    }
    return v;
}

/* Decodes the escape at `p` (p[0] == '\\') into out[0..*out_len); returns the bytes it takes,
 * or 0 when it is not an escape. A surrogate pair becomes one 4-byte character; a lone
 * surrogate is encoded as its code unit (both sides of a comparison decode alike). */
static size_t filt_unescape(const uint8_t *p, const uint8_t *end, uint8_t out[4], size_t *out_len)
{
    unsigned cp;
    size_t used = 6;
    int ok = 1;
    if (end - p < 2) return 0;
    *out_len = 1;
    switch (p[1]) {
    case '"': out[0] = '"'; return 2;
    case '\\': out[0] = '\\'; return 2;
    case '/': out[0] = '/'; return 2;
    case 'b': out[0] = '\b'; return 2;
    case 'f': out[0] = '\f'; return 2;
    case 'n': out[0] = '\n'; return 2;
    case 'r': out[0] = '\r'; return 2;
    case 't': out[0] = '\t'; return 2;
    case 'u': break;
    default: return 0;
    }
    if (end - p < 6) return 0;
    cp = filt_hex4(p + 2, &ok);
    if (!ok) return 0;
    if (cp >= 0xD800 && cp <= 0xDBFF && end - p >= 12 && p[6] == '\\' && p[7] == 'u') {
        unsigned low = filt_hex4(p + 8, &ok);
        if (ok && low >= 0xDC00 && low <= 0xDFFF) {
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            used = 12;
        }
    }
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
    } else if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        *out_len = 2;
    } else if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        *out_len = 3;
    } else {
        out[0] = (uint8_t)(0xF0 | (cp >> 18));
        out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
        out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[3] = (uint8_t)(0x80 | (cp & 0x3F));
        *out_len = 4;
    }
    return used;
}

/* Decodes the string bytes [p, end) (between the quotes) into `out`, which has room for
 * end - p bytes (decoding never lengthens); returns the decoded length. */
static size_t filt_decode(const uint8_t *p, const uint8_t *end, uint8_t *out)
{
    size_t n = 0;
    while (p < end) {
        uint8_t buf[4];
        size_t len, used;
        if (*p != '\\') { out[n++] = *p++; continue; }
        used = filt_unescape(p, end, buf, &len);
        if (used == 0) { out[n++] = *p++; continue; }
        memcpy(out + n, buf, len);
        n += len;
        p += used;
    }
    return n;
}

/* Matches the decoded form of the string bytes from `p` against s[0..n): returns the position
 * after the matched bytes, or NULL when they differ. */
static const uint8_t *filt_match_decoded(const uint8_t *p, const uint8_t *end, const uint8_t *s, size_t n)
{
    while (n > 0) {
        uint8_t buf[4];
        size_t len, used;
        if (p >= end) return NULL;
        if (*p != '\\') {
            if (*p != *s) return NULL;
            p++, s++, n--;
            continue;
        }
        used = filt_unescape(p, end, buf, &len);
        if (used == 0 || len > n || memcmp(buf, s, len) != 0) return NULL;
        p += used, s += len, n -= len;
    }
    return p;
}

/* Whether the string bytes [p, p + raw_len) decode to s[0..n). Escapes shorten a string, so an
 * escaped string is longer than what it decodes to. */
static int filt_string_is(const uint8_t *p, size_t raw_len, const uint8_t *s, size_t n, int s_has_backslash)
{
    if (raw_len == n) return memcmp(p, s, n) == 0 && !s_has_backslash;
    /* Longer: only escapes can make it match. Decoded, it starts with its first byte unless
     * that starts an escape. */
    if (raw_len < n || n == 0 || (p[0] != '\\' && p[0] != s[0]) || memchr(p, '\\', raw_len) == NULL) return 0;
    return filt_match_decoded(p, p + raw_len, s, n) == p + raw_len;
}

/* Whether the string bytes [p, end) decode to something holding s[0..n). */
static int filt_string_contains(const uint8_t *p, const uint8_t *end, const uint8_t *s, size_t n)
{
    if (n == 0) return 1;
    if (memchr(p, '\\', (size_t)(end - p)) == NULL) {
        while ((size_t)(end - p) >= n) {
            const uint8_t *hit = (const uint8_t *)memchr(p, s[0], (size_t)(end - p) - n + 1);
            if (hit == NULL) return 0;
            if (memcmp(hit, s, n) == 0) return 1;
            p = hit + 1;
        }
        return 0;
    }
    while (p < end) {
        uint8_t buf[4];
        size_t len, used;
        if (filt_match_decoded(p, end, s, n) != NULL) return 1;
        used = *p == '\\' ? filt_unescape(p, end, buf, &len) : 1;
        p += used ? used : 1;
    }
    return 0;
}

#define FILT_DIGIT(d, k) ((k) < (d)->int_len ? (d)->int_digits[k] : (d)->frac_digits[(k) - (d)->int_len])

/* Reads the JSON number [p, end); returns 0 when it is not one. */
static int filt_parse_number(const uint8_t *p, const uint8_t *end, filt_number *d)
{
    int64_t exponent = 0;
    int exponent_negative = 0;
    size_t total, last;
    d->negative = p < end && *p == '-';
    if (d->negative) p++;
    d->int_digits = p;
    while (p < end && *p >= '0' && *p <= '9') p++;
    d->int_len = (size_t)(p - d->int_digits);
    if (d->int_len == 0) return 0;
    d->frac_digits = p;
    d->frac_len = 0;
    if (p < end && *p == '.') {
        d->frac_digits = ++p;
        while (p < end && *p >= '0' && *p <= '9') p++;
        d->frac_len = (size_t)(p - d->frac_digits);
        if (d->frac_len == 0) return 0;
    }
    if (p < end && (*p | 0x20) == 'e') {
        const uint8_t *digits;
        if (++p < end && (*p == '+' || *p == '-')) exponent_negative = *p++ == '-';
        digits = p;
        for (; p < end && *p >= '0' && *p <= '9'; p++)
            if (exponent < 1000000000000) exponent = exponent * 10 + (*p - '0');
        if (p == digits) return 0;
    }
    if (p != end) return 0;
    total = d->int_len + d->frac_len;
    for (d->first = 0; d->first < total && FILT_DIGIT(d, d->first) == '0'; d->first++) {}
    for (last = total; last > d->first && FILT_DIGIT(d, last - 1) == '0'; last--) {}
    d->count = last - d->first;
    d->msd = (int64_t)d->int_len - (int64_t)d->first + (exponent_negative ? -exponent : exponent);
    return 1;
}

/* -1, 0 or 1 as a < b, a == b, a > b, exactly. */
static int filt_compare_numbers(const filt_number *a, const filt_number *b)
{
    int sa = a->count == 0 ? 0 : a->negative ? -1 : 1;
    int sb = b->count == 0 ? 0 : b->negative ? -1 : 1;
    size_t k;
    if (sa != sb) return sa < sb ? -1 : 1;
    if (sa == 0) return 0;
    if (a->msd != b->msd) return a->msd < b->msd ? -sa : sa;
    for (k = 0; k < a->count && k < b->count; k++) {
        uint8_t x = FILT_DIGIT(a, a->first + k), y = FILT_DIGIT(b, b->first + k);
        if (x != y) return x < y ? -sa : sa;
    }
    if (a->count != b->count) return a->count < b->count ? -sa : sa;
    return 0;
}

/* Returns the start of the value that the tokens of `pointer` from `first` on name in the JSON
 * value [p, end), or NULL. */
static const uint8_t *filt_resolve_from(const filt_pointer *pointer, size_t first, const uint8_t *p, const uint8_t *end)
{
    size_t i;
    p = filt_ws(p, end);
    for (i = first; i < pointer->count; i++) {
        const filt_token *t = &pointer->tokens[i];
        const uint8_t *value = NULL, *key = NULL, *key_end = NULL;
        filt_cursor c;
        if (p >= end) return NULL;
        if (*p == '{') {
            /* Every member is read: of a repeated key, the last one counts. */
            const uint8_t *member;
            filt_open(&c, p, end);
            while ((member = filt_next(&c, 1, &key, &key_end)) != NULL) {
                if (filt_string_is(key, (size_t)(key_end - key), t->text, t->len, t->has_backslash)) value = member;
            }
        } else if (*p == '[' && t->is_index) {
            size_t k = 0;
            filt_open(&c, p, end);
            while ((value = filt_next(&c, 0, &key, &key_end)) != NULL && k++ < t->index) {}
        }
        if (value == NULL) return NULL;
        p = value;
    }
    return p < end ? p : NULL;
}

static const uint8_t *filt_resolve(const filt_pointer *pointer, const uint8_t *p, const uint8_t *end)
{
    return filt_resolve_from(pointer, 0, p, end);
}

/* ---- conditions -------------------------------------------------------------------------- */

/* Whether the JSON value [v, end) equals the operand. */
static int filt_equals(const filt_scalar *operand, const uint8_t *v, const uint8_t *end)
{
    const uint8_t *value_end;
    filt_number number;
    switch (operand->kind) {
    case '"':
        if (*v != '"') return 0;
        value_end = filt_skip_string(v, end);
        if (value_end - v < 2 || value_end[-1] != '"') return 0;
        return filt_string_is(v + 1, (size_t)(value_end - v - 2), operand->text, operand->len, operand->has_backslash);
    case '-':
        if (*v != '-' && (*v < '0' || *v > '9')) return 0;
        value_end = filt_skip_value(v, end);
        return filt_parse_number(v, value_end, &number) && filt_compare_numbers(&number, &operand->number) == 0;
    case 't': return end - v >= 4 && memcmp(v, "true", 4) == 0 && (end - v == 4 || filt_delimiter[v[4]]);
    case 'f': return end - v >= 5 && memcmp(v, "false", 5) == 0 && (end - v == 5 || filt_delimiter[v[5]]);
    default: return end - v >= 4 && memcmp(v, "null", 4) == 0 && (end - v == 4 || filt_delimiter[v[4]]);
    }
}

static int filt_contains(const filt_scalar *operand, const uint8_t *v, const uint8_t *end)
{
    if (*v == '"' && operand->kind == '"') {
        const uint8_t *value_end = filt_skip_string(v, end);
        if (value_end - v < 2 || value_end[-1] != '"') return 0;
        return filt_string_contains(v + 1, value_end - 1, operand->text, operand->len);
    }
    if (*v == '[') {
        filt_cursor c;
        const uint8_t *element, *unused = NULL, *unused_end = NULL;
        filt_open(&c, v, end);
        while ((element = filt_next(&c, 0, &unused, &unused_end)) != NULL)
            if (filt_equals(operand, element, end)) return 1;
    }
    return 0;
}

static int filt_holds(const filt_condition *c, const uint8_t *item, const uint8_t *end)
{
    const uint8_t *v = filt_resolve(&c->pointer, item, end);
    filt_number number;
    int order;
    if (c->op == FILT_NOT_EQUALS) return v == NULL || !filt_equals(&c->operand, v, end);
    if (v == NULL) return 0;
    if (c->op == FILT_EQUALS) return filt_equals(&c->operand, v, end);
    if (c->op == FILT_CONTAINS) return filt_contains(&c->operand, v, end);
    if (*v != '-' && (*v < '0' || *v > '9')) return 0;
    if (!filt_parse_number(v, filt_skip_value(v, end), &number)) return 0;
    order = filt_compare_numbers(&number, &c->operand.number);
    switch (c->op) {
    case FILT_LESS_THAN: return order < 0;
    case FILT_LESS_OR_EQUAL: return order <= 0;
    case FILT_GREATER_THAN: return order > 0;
    default: return order >= 0;
    }
}

/* Whether the item stays on the page. */
static int filt_keeps(const filt_state *st, paging_bytes_t item)
{
    const uint8_t *end = item.data + item.len;
    size_t i;
    for (i = 0; i < st->condition_count; i++)
        if (!filt_holds(&st->conditions[i], item.data, end)) return st->drop; /* it does not match */
    return !st->drop;
}

/* ---- transform --------------------------------------------------------------------------- */

/* A growable byte buffer starting on the caller's stack. */
typedef struct filt_buffer {
    uint8_t *data;
    size_t len, cap;
    int heap;
} filt_buffer;

static int filt_append(filt_buffer *b, const uint8_t *bytes, size_t n)
{
    if (b->cap - b->len < n) {
        size_t cap = b->cap * 2;
        uint8_t *data;
        while (cap - b->len < n) cap *= 2;
        data = (uint8_t *)(b->heap ? realloc(b->data, cap) : malloc(cap));
        if (data == NULL) return 0;
        if (!b->heap) memcpy(data, b->data, b->len);
        b->data = data;
        b->cap = cap;
        b->heap = 1;
    }
    memcpy(b->data + b->len, bytes, n);
    b->len += n;
    return 1;
}

/* Fields found in one walk of an item's top-level object, up to this many (more: a walk each). */
#define FILT_FIELDS_IN_ONE_WALK 32

/* Sets values[i] to the start of field i's value in the item [p, end), or NULL. Each top-level
 * member is read once and matched against the first token of every field (the last member
 * of a repeated key counts, as in filt_resolve). */
static void filt_find_fields(const filt_state *st, const uint8_t *p, const uint8_t *end, const uint8_t **values)
{
    unsigned char walked[FILT_FIELDS_IN_ONE_WALK];
    size_t i, pending = 0;
    const uint8_t *value, *key = NULL, *key_end = NULL;
    filt_cursor c;
    p = filt_ws(p, end);
    for (i = 0; i < st->field_count; i++) {
        values[i] = NULL;
        walked[i] = st->fields[i].pointer.count > 0 && p < end && *p == '{';
        if (walked[i]) pending++;
        else values[i] = filt_resolve(&st->fields[i].pointer, p, end);
    }
    if (pending == 0) return;
    filt_open(&c, p, end);
    while ((value = filt_next(&c, 1, &key, &key_end)) != NULL) {
        for (i = 0; i < st->field_count; i++) {
            const filt_token *t = &st->fields[i].pointer.tokens[0];
            if (!walked[i] || !filt_string_is(key, (size_t)(key_end - key), t->text, t->len, t->has_backslash)) continue;
            values[i] = filt_resolve_from(&st->fields[i].pointer, 1, value, end);
        }
    }
}

/* Builds the projection of `item` in `b`. Returns 0 when out of memory. */
static int filt_project(const filt_state *st, paging_bytes_t item, filt_buffer *b)
{
    const uint8_t *end = item.data + item.len;
    const uint8_t *values[FILT_FIELDS_IN_ONE_WALK];
    int one_walk = st->field_count <= FILT_FIELDS_IN_ONE_WALK;
    size_t i;
    int first = 1;
    b->len = 0;
    if (one_walk) filt_find_fields(st, item.data, end, values);
    if (!filt_append(b, (const uint8_t *)"{", 1)) return 0;
    for (i = 0; i < st->field_count; i++) {
        const filt_field *f = &st->fields[i];
        const uint8_t *v = one_walk ? values[i] : filt_resolve(&f->pointer, item.data, end);
        if (v == NULL) continue;
        if ((!first && !filt_append(b, (const uint8_t *)",", 1)) || !filt_append(b, f->key, f->key_len)
            || !filt_append(b, v, (size_t)(filt_skip_value(v, end) - v)))
            return 0;
        first = 0;
    }
    return filt_append(b, (const uint8_t *)"}", 1);
}

/* The count an earlier filter left in the page's metadata, or 0. */
static uint64_t filt_dropped_before(const paging_page_t *page)
{
    size_t i, name_len = sizeof FILT_METADATA_DROPPED - 1;
    if (!PAGING_STRUCT_HAS(page, paging_page_t, metadata_count)) return 0;
    for (i = 0; i < page->metadata_count && page->metadata != NULL; i++) {
        const paging_param_t *m = &page->metadata[i];
        uint64_t n = 0;
        size_t k;
        if (m->name.len != name_len || memcmp(m->name.data, FILT_METADATA_DROPPED, name_len) != 0) continue;
        for (k = 0; k < m->value.len && k < 19; k++) {
            if (m->value.data[k] < '0' || m->value.data[k] > '9') return 0;
            n = n * 10 + (uint64_t)(m->value.data[k] - '0');
        }
        return n;
    }
    return 0;
}

static uint32_t filt_fail_transform(filt_state *st, paging_page_out_t *out, paging_status_t status)
{
    /* A builder that refused (status) has already failed the load; otherwise we ran out of memory. */
    if (status == PAGING_OK) st->out->fail(out, PAGING_ERR_INTERNAL, "filter: out of memory building the page");
    return PAGING_TRANSFORM_FAIL;
}

static uint32_t filt_transform(void *self, const paging_page_t *page, paging_page_out_t *out)
{
    filt_state *st = (filt_state *)self;
    const paging_ext_page_transform_host_t *x = st->out;
    uint8_t stack[2048];
    filt_buffer b = { stack, 0, sizeof stack, 0 }; /* projections; on the heap once larger */
    size_t i, dropped = 0;
    paging_status_t status = PAGING_OK;
    char count[24];
    paging_bytes_t name, value;
    int n;

    for (i = 0; i < page->item_count && status == PAGING_OK; i++) {
        paging_bytes_t item = page->items[i];
        if (item.data == NULL) item.data = (const uint8_t *)""; /* (never: items are JSON) nothing is found in it */
        if (!filt_keeps(st, item)) {
            size_t j;
            /* The first drop: the items before it were kept without telling the host. */
            if (dropped++ == 0 && st->field_count == 0)
                for (j = 0; j < i && status == PAGING_OK; j++) status = x->keep_item(out, j);
        } else if (st->field_count > 0) {
            paging_bytes_t projected;
            if (!filt_project(st, item, &b)) break;
            projected.data = b.data;
            projected.len = b.len;
            status = x->add_item(out, projected);
        } else if (dropped > 0) {
            status = x->keep_item(out, i);
        }
    }
    if (b.heap) free(b.data);
    if (status != PAGING_OK || i < page->item_count) return filt_fail_transform(st, out, status);
    if (dropped == 0 && st->field_count == 0) return PAGING_TRANSFORM_KEEP;

    n = snprintf(count, sizeof count, "%llu", (unsigned long long)(filt_dropped_before(page) + dropped));
    name.data = (const uint8_t *)FILT_METADATA_DROPPED;
    name.len = sizeof FILT_METADATA_DROPPED - 1;
    value.data = (const uint8_t *)count;
    value.len = n > 0 ? (size_t)n : 0;
    status = x->set_metadata(out, name, value);
    return status == PAGING_OK ? PAGING_TRANSFORM_REPLACE : PAGING_TRANSFORM_FAIL;
}

static const paging_ext_page_transform_t filt_transform_ext = { filt_transform };

static uint32_t filt_intercept(paging_interceptor_t *self, const paging_request_t *request, paging_intercept_out_t *out)
{
    (void)self;
    (void)request;
    (void)out;
    return PAGING_INTERCEPT_PROCEED_AND_OBSERVE;
}

static const void *filt_get_extension(paging_interceptor_t *self, const char *id)
{
    (void)self;
    return strcmp(id, PAGING_EXT_PAGE_TRANSFORM) == 0 ? &filt_transform_ext : NULL;
}

/* ---- config ------------------------------------------------------------------------------ */

static void filt_destroy(paging_interceptor_t *self)
{
    filt_state *st = (filt_state *)self;
    while (st->blocks != NULL) {
        filt_block *next = st->blocks->next;
        free(st->blocks);
        st->blocks = next;
    }
    free(st);
}

/* Records the first problem of the config (create reports it). Returns 0. */
static int filt_fail(filt_state *st, paging_status_t code, const char *format, ...)
{
    va_list args;
    if (st->error_code != PAGING_OK) return 0;
    st->error_code = code;
    va_start(args, format);
    vsnprintf(st->error, sizeof st->error, format, args);
    va_end(args);
    return 0;
}

/* Memory that lives until destroy; NULL (and the failure recorded) when out of memory. */
static void *filt_alloc(filt_state *st, size_t size)
{
    filt_block *b = (filt_block *)malloc(sizeof *b + (size ? size : 1));
    if (b == NULL) {
        filt_fail(st, PAGING_ERR_INTERNAL, "out of memory");
        return NULL;
    }
    b->next = st->blocks;
    st->blocks = b;
    return b + 1;
}

/* "a string", "an object"...: what the JSON value at `v` is, for messages. */
static const char *filt_kind_name(const uint8_t *v)
{
    switch (*v) {
    case '"': return "a string";
    case '{': return "an object";
    case '[': return "an array";
    case 't': return "true";
    case 'f': return "false";
    case 'n': return "null";
    default: return "a number";
    }
}

/* Decodes the JSON string at `v` (a config value, known to be a string) into memory of the
 * state. Returns 0 when out of memory. */
static int filt_config_string(filt_state *st, const uint8_t *v, const uint8_t *end, const uint8_t **text, size_t *len)
{
    const uint8_t *value_end = filt_skip_string(v, end);
    uint8_t *out = (uint8_t *)filt_alloc(st, (size_t)(value_end - v));
    if (out == NULL) return 0;
    *len = filt_decode(v + 1, value_end - 1, out);
    *text = out;
    return 1;
}

/* Reads the pointer string at `v` (the config value at `path`) into `pointer`. */
static int filt_config_pointer(filt_state *st, const char *path, const uint8_t *v, const uint8_t *end, filt_pointer *pointer)
{
    const uint8_t *text;
    uint8_t *tokens_text;
    size_t len, i, n = 0;
    filt_token *t;
    if (*v != '"')
        return filt_fail(st, PAGING_ERR_INVALID_CONFIG, "%s: expected a JSON pointer string such as \"/owner/login\", got %s",
                         path, filt_kind_name(v));
    if (!filt_config_string(st, v, end, &text, &len)) return 0;
    pointer->count = 0;
    pointer->tokens = NULL;
    if (len == 0) return 1;
    if (text[0] != '/')
        return filt_fail(st, PAGING_ERR_INVALID_CONFIG,
                         "%s: \"%.*s\" is not a JSON pointer: it must be empty or start with \"/\" (such as \"/owner/login\")",
                         path, FILT_SHOWN(len), (const char *)text);
    for (i = 0; i < len; i++) pointer->count += text[i] == '/';
    pointer->tokens = (filt_token *)filt_alloc(st, pointer->count * sizeof *pointer->tokens);
    tokens_text = (uint8_t *)filt_alloc(st, len);
    if (pointer->tokens == NULL || tokens_text == NULL) return 0;
    t = pointer->tokens;
    for (i = 0; i < len; i++) {
        uint8_t c = text[i];
        if (c == '/') {
            if (i > 0) t++;
            t->text = tokens_text + n;
            t->len = 0;
            continue;
        }
        if (c == '~') {
            if (i + 1 >= len || (text[i + 1] != '0' && text[i + 1] != '1'))
                return filt_fail(st, PAGING_ERR_INVALID_CONFIG,
                                 "%s: \"%.*s\" is not a JSON pointer: \"~\" must be followed by 0 or 1 (~0 is ~, ~1 is /)",
                                 path, FILT_SHOWN(len), (const char *)text);
            c = text[++i] == '0' ? '~' : '/';
        }
        tokens_text[n++] = c;
        t->len++;
    }
    for (i = 0; i < pointer->count; i++) {
        size_t k;
        t = &pointer->tokens[i];
        t->has_backslash = memchr(t->text, '\\', t->len) != NULL;
        t->is_index = t->len > 0 && t->len <= 18 && (t->len == 1 || t->text[0] != '0');
        t->index = 0;
        for (k = 0; k < t->len && t->is_index; k++) {
            if (t->text[k] < '0' || t->text[k] > '9') t->is_index = 0;
            else t->index = t->index * 10 + (size_t)(t->text[k] - '0');
        }
    }
    return 1;
}

/* Reads the operand at `v` of the operator `op` (the config value at `path`). */
static int filt_config_operand(filt_state *st, const char *path, int op, const uint8_t *v, const uint8_t *end, filt_scalar *s)
{
    const uint8_t *value_end = filt_skip_value(v, end);
    s->kind = *v == '-' || (*v >= '0' && *v <= '9') ? '-' : *v;
    if (op >= FILT_LESS_THAN && s->kind != '-')
        return filt_fail(st, PAGING_ERR_INVALID_CONFIG, "%s: expected a number, got %s", path, filt_kind_name(v));
    if (s->kind == '{' || s->kind == '[')
        return filt_fail(st, PAGING_ERR_INVALID_CONFIG, "%s: expected a string, number, true, false or null, got %s",
                         path, filt_kind_name(v));
    if (s->kind == '"') {
        if (!filt_config_string(st, v, end, &s->text, &s->len)) return 0;
        s->has_backslash = memchr(s->text, '\\', s->len) != NULL;
    } else if (s->kind == '-') {
        uint8_t *copy = (uint8_t *)filt_alloc(st, (size_t)(value_end - v));
        if (copy == NULL) return 0;
        memcpy(copy, v, (size_t)(value_end - v));
        if (!filt_parse_number(copy, copy + (value_end - v), &s->number))
            return filt_fail(st, PAGING_ERR_INVALID_CONFIG, "%s: expected a number, got %.*s", path,
                             FILT_SHOWN(value_end - v), (const char *)v);
    }
    return 1;
}

/* Reads the condition object at `v`, where[index]. */
static int filt_config_condition(filt_state *st, size_t index, const uint8_t *v, const uint8_t *end, filt_condition *c)
{
    char path[64], member_path[128];
    filt_cursor cursor;
    const uint8_t *key, *key_end, *value, *pointer = NULL, *operand = NULL;
    int i, op = -1, op_count = 0;
    char ops[160] = "";

    snprintf(path, sizeof path, "where[%lu]", (unsigned long)index);
    if (*v != '{')
        return filt_fail(st, PAGING_ERR_INVALID_CONFIG,
                         "%s: expected an object {\"pointer\": \"/...\", \"<operator>\": <value>}, got %s", path, filt_kind_name(v));
    filt_open(&cursor, v, end);
    while ((value = filt_next(&cursor, 1, &key, &key_end)) != NULL) {
        size_t len = (size_t)(key_end - key);
        if (len == 7 && memcmp(key, "pointer", 7) == 0) {
            if (pointer != NULL) return filt_fail(st, PAGING_ERR_INVALID_CONFIG, "%s: \"pointer\" is given twice", path);
            pointer = value;
            continue;
        }
        for (i = 0; i < FILT_OPERATOR_COUNT; i++)
            if (strlen(filt_operator_names[i]) == len && memcmp(key, filt_operator_names[i], len) == 0) break;
        if (i == FILT_OPERATOR_COUNT)
            return filt_fail(st, PAGING_ERR_INVALID_CONFIG, "%s: unknown key \"%.*s\"; expected \"pointer\" and one of " FILT_OPERATOR_LIST,
                             path, FILT_SHOWN(len), (const char *)key);
        if (op_count++ > 0) strncat(ops, " and ", sizeof ops - strlen(ops) - 1);
        strncat(ops, filt_operator_names[i], sizeof ops - strlen(ops) - 1);
        op = i;
        operand = value;
    }
    if (op_count != 1)
        return filt_fail(st, PAGING_ERR_INVALID_CONFIG, "%s: expected exactly one of " FILT_OPERATOR_LIST "; got %s",
                         path, op_count == 0 ? "none" : ops);
    if (pointer == NULL)
        return filt_fail(st, PAGING_ERR_INVALID_CONFIG, "%s: \"pointer\" is required (a JSON pointer such as \"/owner/login\")", path);
    snprintf(member_path, sizeof member_path, "%s.pointer", path);
    if (!filt_config_pointer(st, member_path, pointer, end, &c->pointer)) return 0;
    snprintf(member_path, sizeof member_path, "%s.%s", path, filt_operator_names[op]);
    c->op = op;
    return filt_config_operand(st, member_path, op, operand, end, &c->operand);
}

/* Counts the elements of the array at `v`. */
static size_t filt_count_elements(const uint8_t *v, const uint8_t *end)
{
    filt_cursor c;
    const uint8_t *unused = NULL, *unused_end = NULL;
    size_t n = 0;
    filt_open(&c, v, end);
    while (filt_next(&c, 0, &unused, &unused_end) != NULL) n++;
    return n;
}

static int filt_config_where(filt_state *st, const uint8_t *v, const uint8_t *end)
{
    filt_cursor c;
    const uint8_t *element, *unused = NULL, *unused_end = NULL;
    size_t n = 0;
    if (*v != '[')
        return filt_fail(st, PAGING_ERR_INVALID_CONFIG, "where: expected an array of conditions, got %s", filt_kind_name(v));
    st->condition_count = filt_count_elements(v, end);
    st->conditions = (filt_condition *)filt_alloc(st, st->condition_count * sizeof *st->conditions);
    if (st->conditions == NULL) return 0;
    filt_open(&c, v, end);
    while ((element = filt_next(&c, 0, &unused, &unused_end)) != NULL) {
        if (!filt_config_condition(st, n, element, end, &st->conditions[n])) return 0;
        n++;
    }
    return 1;
}

/* Adds the next field, whose pointer is parsed already, as `name` (decoded; the config value
 * at `path`). */
static int filt_add_field(filt_state *st, const char *path, const uint8_t *name, size_t name_len)
{
    static const char hex[] = "0123456789abcdef";
    filt_field *f = &st->fields[st->field_count];
    uint8_t *key;
    size_t i, n = 0;
    for (i = 0; i < st->field_count; i++)
        if (st->fields[i].name_len == name_len && memcmp(st->fields[i].name, name, name_len) == 0)
            return filt_fail(st, PAGING_ERR_INVALID_CONFIG, "%s: the field name \"%.*s\" is given twice", path,
                             FILT_SHOWN(name_len), (const char *)name);
    key = (uint8_t *)filt_alloc(st, name_len * 6 + 3);
    if (key == NULL) return 0;
    key[n++] = '"';
    for (i = 0; i < name_len; i++) {
        uint8_t c = name[i];
        if (c == '"' || c == '\\') {
            key[n++] = '\\';
            key[n++] = c;
        } else if (c < 0x20) {
            key[n++] = '\\', key[n++] = 'u', key[n++] = '0', key[n++] = '0';
            key[n++] = (uint8_t)hex[c >> 4];
            key[n++] = (uint8_t)hex[c & 15];
        } else {
            key[n++] = c;
        }
    }
    key[n++] = '"';
    key[n++] = ':';
    f->key = key;
    f->key_len = n;
    f->name = name;
    f->name_len = name_len;
    st->field_count++;
    return 1;
}

static int filt_config_fields(filt_state *st, const uint8_t *v, const uint8_t *end)
{
    filt_cursor c, members;
    const uint8_t *element, *key, *key_end, *value;
    size_t capacity = 0, index = 0;
    char path[160];
    if (*v != '[')
        return filt_fail(st, PAGING_ERR_INVALID_CONFIG,
                         "fields: expected an array of JSON pointers (or {\"name\": \"/pointer\"} objects), got %s", filt_kind_name(v));
    filt_open(&c, v, end);
    while ((element = filt_next(&c, 0, &key, &key_end)) != NULL) {
        if (*element == '{') {
            filt_open(&members, element, end);
            while (filt_next(&members, 1, &key, &key_end) != NULL) capacity++;
        } else {
            capacity++;
        }
    }
    if (capacity == 0)
        return filt_fail(st, PAGING_ERR_INVALID_CONFIG, "fields: expected at least one field (leave fields out to keep items whole)");
    st->fields = (filt_field *)filt_alloc(st, capacity * sizeof *st->fields);
    if (st->fields == NULL) return 0;
    filt_open(&c, v, end);
    for (; (element = filt_next(&c, 0, &key, &key_end)) != NULL; index++) {
        filt_field *f = &st->fields[st->field_count];
        snprintf(path, sizeof path, "fields[%lu]", (unsigned long)index);
        if (*element == '"') {
            const filt_token *last;
            if (!filt_config_pointer(st, path, element, end, &f->pointer)) return 0;
            if (f->pointer.count == 0)
                return filt_fail(st, PAGING_ERR_INVALID_CONFIG,
                                 "%s: the pointer \"\" names the whole item, which has no name: write {\"item\": \"\"}", path);
            last = &f->pointer.tokens[f->pointer.count - 1];
            if (!filt_add_field(st, path, last->text, last->len)) return 0;
        } else if (*element == '{') {
            size_t members_before = st->field_count;
            filt_open(&members, element, end);
            while ((value = filt_next(&members, 1, &key, &key_end)) != NULL) {
                const uint8_t *name;
                size_t name_len;
                uint8_t *decoded = (uint8_t *)filt_alloc(st, (size_t)(key_end - key));
                if (decoded == NULL) return 0;
                name = decoded;
                name_len = filt_decode(key, key_end, decoded);
                snprintf(path, sizeof path, "fields[%lu].%.*s", (unsigned long)index,
                         FILT_SHOWN(name_len), (const char *)name);
                if (!filt_config_pointer(st, path, value, end, &st->fields[st->field_count].pointer)
                    || !filt_add_field(st, path, name, name_len))
                    return 0;
            }
            if (st->field_count == members_before)
                return filt_fail(st, PAGING_ERR_INVALID_CONFIG, "%s: expected at least one \"name\": \"/pointer\" member", path);
        } else {
            return filt_fail(st, PAGING_ERR_INVALID_CONFIG,
                             "%s: expected a JSON pointer string or an object {\"name\": \"/pointer\"}, got %s",
                             path, filt_kind_name(element));
        }
    }
    return 1;
}

static int filt_config_mode(filt_state *st, const uint8_t *v, const uint8_t *end)
{
    const uint8_t *text;
    size_t len;
    if (*v != '"')
        return filt_fail(st, PAGING_ERR_INVALID_CONFIG, "mode: expected \"keep\" or \"drop\", got %s", filt_kind_name(v));
    if (!filt_config_string(st, v, end, &text, &len)) return 0;
    if (len == 4 && memcmp(text, "keep", 4) == 0) return 1;
    if (len == 4 && memcmp(text, "drop", 4) == 0) {
        st->drop = 1;
        return 1;
    }
    return filt_fail(st, PAGING_ERR_INVALID_CONFIG, "mode: expected \"keep\" or \"drop\", got \"%.*s\"",
                     FILT_SHOWN(len), (const char *)text);
}

/* Reads the whole config. Returns 1, or 0 with the problem recorded. */
static int filt_configure(filt_state *st, const char *json)
{
    const uint8_t *p = (const uint8_t *)json, *end = p + strlen(json);
    const uint8_t *key, *key_end, *value, *where = NULL, *fields = NULL, *mode = NULL;
    filt_cursor c;
    p = filt_ws(p, end);
    if (p >= end || *p != '{') return filt_fail(st, PAGING_ERR_INVALID_CONFIG, "config: expected an object");
    filt_open(&c, p, end);
    while ((value = filt_next(&c, 1, &key, &key_end)) != NULL) {
        size_t len = (size_t)(key_end - key);
        const uint8_t **slot = len == 5 && memcmp(key, "where", 5) == 0 ? &where
                             : len == 6 && memcmp(key, "fields", 6) == 0 ? &fields
                             : len == 4 && memcmp(key, "mode", 4) == 0 ? &mode : NULL;
        if (slot == NULL)
            return filt_fail(st, PAGING_ERR_INVALID_CONFIG, "%.*s: unknown key; expected where, mode or fields",
                             FILT_SHOWN(len), (const char *)key);
        if (*slot != NULL)
            return filt_fail(st, PAGING_ERR_INVALID_CONFIG, "%.*s: given twice", (int)len, (const char *)key);
        *slot = value;
    }
    if (where != NULL && !filt_config_where(st, where, end)) return 0;
    if (mode != NULL && !filt_config_mode(st, mode, end)) return 0;
    if (fields != NULL && !filt_config_fields(st, fields, end)) return 0;
    if (st->drop && st->condition_count == 0)
        return filt_fail(st, PAGING_ERR_INVALID_CONFIG,
                         "mode: \"drop\" needs at least one condition in where (without one it would drop every item)");
    return 1;
}

/* ---- entry ------------------------------------------------------------------------------- */

static paging_interceptor_t *filt_create_interceptor(const char *plugin_id, const paging_host_t *host,
                                                     const paging_config_t *config)
{
    filt_state *st;
    const char *json;

    if (plugin_id == NULL || strcmp(plugin_id, "filter") != 0) {
        host->config_fail(config, PAGING_ERR_NOT_FOUND, "filter: unknown plugin id");
        return NULL;
    }
    st = (filt_state *)calloc(1, sizeof *st);
    if (st == NULL) {
        host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory");
        return NULL;
    }
    st->host = host;
    st->out = (const paging_ext_page_transform_host_t *)host->get_extension(host, PAGING_EXT_PAGE_TRANSFORM);
    json = host->config_json(config);
    if (st->out == NULL)
        filt_fail(st, PAGING_ERR_UNSUPPORTED, "this host does not offer " PAGING_EXT_PAGE_TRANSFORM);
    else if (json == NULL)
        filt_fail(st, PAGING_ERR_INVALID_CONFIG, "config: the host gave no config");
    else
        filt_configure(st, json);
    if (st->error_code != PAGING_OK) {
        host->config_fail(config, st->error_code, st->error);
        filt_destroy(&st->interceptor);
        return NULL;
    }
    st->interceptor.plugin_data = st;
    st->interceptor.intercept = filt_intercept;
    st->interceptor.handle = NULL; /* transform() is called instead */
    st->interceptor.destroy = filt_destroy;
    st->interceptor.struct_size = (uint32_t)sizeof st->interceptor;
    st->interceptor.get_extension = filt_get_extension;
    return &st->interceptor;
}

static uint32_t filt_plugin_count(void) { return 1; }

static const paging_plugin_descriptor_t *filt_descriptor_at(uint32_t index)
{
    return index == 0 ? &filt_descriptor : NULL;
}

static const paging_plugin_entry_t filt_entry = {
    PAGING_ENTRY_HEAD,
    filt_plugin_count,
    filt_descriptor_at,
    NULL,
    filt_create_interceptor,
    NULL, NULL
};

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void)
{
    return &filt_entry;
}
