// The http source's JSON scanner: one pass over a body that validates it (RFC 8259, UTF-8) and
// records where the values at a few JSON pointers lie, as byte ranges of the body. No tree is
// built and nothing is copied: the items are handed out as the bytes the server sent.
//
// Pointers are matched while descending: each value carries the set (a bit mask) of pointers
// whose tokens match the path to it, so a body with no pointer inside a subtree costs only the
// validation of that subtree. The items themselves are not validated unless asked: the host
// checks every item it is handed, so an array or object item that no pointer enters is only
// measured, 64 bytes at a time (skip_container), and one that is not JSON fails its page where
// the host takes it; the plugin then scans again with check_items to say where and why.
#include "http_core.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

// How many arrays and objects may nest, as the host's check (JSONValidator.maxDepth) allows.
enum { MAX_DEPTH = 512 };

typedef struct scanner {
    const uint8_t *p;
    size_t len;
    size_t i;
    const hj_pointer *ptrs;
    size_t nptr;
    hj_result *r;
    char *err;
    size_t errlen;
    size_t spaces; // whitespace bytes skipped outside strings so far
    int check_items; // validate the items too (see hj_scan)
    // For each pointer with a "*": the depth of its last "*" (SIZE_MAX: none), the serial
    // number of the last element begun of an array that "*" goes through, and that of the
    // element its last match is in.
    size_t last_star[64];
    uint64_t element[64];
    uint64_t matched_in[64];
    uint64_t serial;
} scanner;

static int fail_at(scanner *s, const char *what) {
    if (s->i >= s->len) {
        snprintf(s->err, s->errlen, "the body ends early at byte %zu, %s (truncated JSON)", s->len, what);
    } else {
        uint8_t c = s->p[s->i];
        if (c >= 0x20 && c < 0x7f) snprintf(s->err, s->errlen, "unexpected '%c' at byte %zu, %s", c, s->i, what);
        else snprintf(s->err, s->errlen, "unexpected byte 0x%02X at byte %zu, %s", c, s->i, what);
    }
    return -1;
}

static inline void skip_ws(scanner *s) {
    size_t i = s->i;
    while (i < s->len) {
        uint8_t c = s->p[i];
        if (c != ' ' && c != '\n' && c != '\r' && c != '\t') break;
        i++;
    }
    s->spaces += i - s->i;
    s->i = i;
}

static int push_range(hj_range **list, size_t *count, size_t *cap, hj_range range) {
    if (*count == *cap) {
        size_t grown_cap = *cap ? *cap * 2 : 16;
        hj_range *grown = realloc(*list, grown_cap * sizeof *grown);
        if (!grown) return -1;
        *list = grown;
        *cap = grown_cap;
    }
    (*list)[(*count)++] = range;
    return 0;
}

static int hex(uint8_t c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/// Validates the string starting at s->i (a quote); s->i ends after the closing quote.
/// `escaped` tells whether it held a backslash.
static int string(scanner *s, int *escaped) {
    const uint8_t *p = s->p;
    size_t i = s->i + 1, n = s->len;
    *escaped = 0;
    for (;;) {
        // 8 bytes at a time while none is a quote, a backslash, a control character or
        // non-ASCII (each test flags the lowest matching byte exactly: borrows run upwards from
        // a matching byte), then byte by byte from the first such byte.
        while (n - i >= 8) {
            const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
            uint64_t word;
            memcpy(&word, p + i, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
            word = __builtin_bswap64(word); // the first byte lowest, as on little-endian machines
#endif
            uint64_t quote = word ^ (ones * '"'), backslash = word ^ (ones * '\\');
            uint64_t flags = (((word - ones * 0x20) & ~word) | ((quote - ones) & ~quote)
                              | ((backslash - ones) & ~backslash) | word) & high;
            if (flags != 0) {
                i += (size_t)__builtin_ctzll(flags) >> 3;
                break;
            }
            i += 8;
        }
        while (i < n && p[i] >= 0x20 && p[i] < 0x80 && p[i] != '"' && p[i] != '\\') i++;
        if (i >= n) { s->i = n; return fail_at(s, "inside a string"); }
        uint8_t c = p[i];
        if (c == '"') { s->i = i + 1; return 0; }
        if (c == '\\') {
            *escaped = 1;
            if (i + 1 >= n) { s->i = n; return fail_at(s, "inside a string"); }
            uint8_t e = p[i + 1];
            if (e == 'u') {
                if (i + 6 > n) { s->i = n; return fail_at(s, "inside a \\u escape"); }
                for (int k = 2; k < 6; k++) if (hex(p[i + k]) < 0) { s->i = i + k; return fail_at(s, "in a \\u escape (expected 4 hex digits)"); }
                i += 6;
            } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't') {
                i += 2;
            } else {
                s->i = i + 1;
                return fail_at(s, "after a backslash (not a JSON escape)");
            }
            continue;
        }
        if (c < 0x20) { s->i = i; return fail_at(s, "inside a string (a control character must be escaped)"); }
        // UTF-8: a lead byte and its continuation bytes, no overlong forms or surrogates.
        size_t need;
        uint32_t min;
        uint32_t cp;
        if (c >= 0xC2 && c <= 0xDF) { need = 1; cp = c & 0x1F; min = 0x80; }
        else if (c >= 0xE0 && c <= 0xEF) { need = 2; cp = c & 0x0F; min = 0x800; }
        else if (c >= 0xF0 && c <= 0xF4) { need = 3; cp = c & 0x07; min = 0x10000; }
        else { s->i = i; return fail_at(s, "inside a string (not UTF-8)"); }
        if (i + need >= n) { s->i = n; return fail_at(s, "inside a string"); }
        for (size_t k = 1; k <= need; k++) {
            if ((p[i + k] & 0xC0) != 0x80) { s->i = i + k; return fail_at(s, "inside a string (not UTF-8)"); }
            cp = (cp << 6) | (p[i + k] & 0x3F);
        }
        if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) { s->i = i; return fail_at(s, "inside a string (not UTF-8)"); }
        i += need + 1;
    }
}

static int number(scanner *s) {
    const uint8_t *p = s->p;
    size_t i = s->i, n = s->len;
    if (i < n && p[i] == '-') i++;
    if (i < n && p[i] == '0') i++;
    else if (i < n && p[i] >= '1' && p[i] <= '9') { while (i < n && p[i] >= '0' && p[i] <= '9') i++; }
    else { s->i = i; return fail_at(s, "in a number"); }
    if (i < n && p[i] == '.') {
        i++;
        if (!(i < n && p[i] >= '0' && p[i] <= '9')) { s->i = i; return fail_at(s, "in a number (a digit must follow '.')"); }
        while (i < n && p[i] >= '0' && p[i] <= '9') i++;
    }
    if (i < n && (p[i] == 'e' || p[i] == 'E')) {
        i++;
        if (i < n && (p[i] == '+' || p[i] == '-')) i++;
        if (!(i < n && p[i] >= '0' && p[i] <= '9')) { s->i = i; return fail_at(s, "in a number's exponent"); }
        while (i < n && p[i] >= '0' && p[i] <= '9') i++;
    }
    s->i = i;
    return 0;
}

static int literal(scanner *s, const char *word, size_t len) {
    if (s->i + len > s->len || memcmp(s->p + s->i, word, len) != 0) {
        // Point at the first byte that differs.
        size_t k = 0;
        while (s->i + k < s->len && k < len && s->p[s->i + k] == (uint8_t)word[k]) k++;
        s->i += k;
        return fail_at(s, "in a literal (true, false or null)");
    }
    s->i += len;
    return 0;
}

/// Decodes a string's content (with escapes) for comparing with a pointer token; returns the
/// length written to `out` (at most cap), or (size_t)-1 when it does not fit.
static size_t unescape(const uint8_t *p, size_t len, uint8_t *out, size_t cap) {
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        uint32_t cp;
        if (p[i] != '\\') { if (o >= cap) return (size_t)-1; out[o++] = p[i]; continue; }
        uint8_t e = p[++i];
        switch (e) {
        case 'b': cp = 8; break;
        case 'f': cp = 12; break;
        case 'n': cp = 10; break;
        case 'r': cp = 13; break;
        case 't': cp = 9; break;
        case 'u':
            cp = (uint32_t)(hex(p[i + 1]) << 12 | hex(p[i + 2]) << 8 | hex(p[i + 3]) << 4 | hex(p[i + 4]));
            i += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF && i + 6 < len && p[i + 1] == '\\' && p[i + 2] == 'u') {
                uint32_t lo = (uint32_t)(hex(p[i + 3]) << 12 | hex(p[i + 4]) << 8 | hex(p[i + 5]) << 4 | hex(p[i + 6]));
                if (lo >= 0xDC00 && lo <= 0xDFFF) { cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00); i += 6; }
            }
            break;
        default: cp = e; break;
        }
        uint8_t enc[4];
        size_t k;
        if (cp < 0x80) { enc[0] = (uint8_t)cp; k = 1; }
        else if (cp < 0x800) { enc[0] = (uint8_t)(0xC0 | cp >> 6); enc[1] = (uint8_t)(0x80 | (cp & 0x3F)); k = 2; }
        else if (cp < 0x10000) { enc[0] = (uint8_t)(0xE0 | cp >> 12); enc[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F)); enc[2] = (uint8_t)(0x80 | (cp & 0x3F)); k = 3; }
        else { enc[0] = (uint8_t)(0xF0 | cp >> 18); enc[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F)); enc[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F)); enc[3] = (uint8_t)(0x80 | (cp & 0x3F)); k = 4; }
        if (o + k > cap) return (size_t)-1;
        memcpy(out + o, enc, k);
        o += k;
    }
    return o;
}

/// The pointers of `mask` whose token at `depth` is `token` (or "*" when `index` is set).
static uint64_t child_mask(scanner *s, uint64_t mask, size_t depth, const uint8_t *token, size_t len, int index) {
    uint64_t out = 0;
    for (size_t k = 0; k < s->nptr; k++) {
        if (!(mask >> k & 1)) continue;
        const hj_pointer *ptr = &s->ptrs[k];
        if (ptr->token_count <= depth) continue;
        size_t tl = ptr->token_lens[depth];
        const char *t = ptr->tokens[depth];
        if ((index && tl == 1 && t[0] == '*') || (tl == len && memcmp(t, token, len) == 0)) out |= (uint64_t)1 << k;
    }
    return out;
}

static int value(scanner *s, size_t depth, uint64_t mask);

/// Records the first place where the items pointer (pointer 0) stops resolving.
static void path_problem(scanner *s, int problem, size_t depth, size_t at) {
    if (s->r->items_path_problem) return;
    s->r->items_path_problem = problem;
    s->r->items_path_depth = depth;
    s->r->items_path_at = at;
}

/// Whether the items pointer goes on below `depth` through a value of `mask`: its token there
/// must be found in that value.
static int items_path_goes_on(const scanner *s, size_t depth, uint64_t mask) {
    return (mask & 1) && s->ptrs[0].token_count > depth;
}

/// Whether token `depth` of the items pointer is "*".
static int items_token_is_star(const scanner *s, size_t depth) {
    return s->ptrs[0].token_lens[depth] == 1 && s->ptrs[0].tokens[depth][0] == '*';
}

/// Records the value just parsed from `start` for every pointer of `mask` that ends here.
static int record(scanner *s, size_t depth, uint64_t mask, size_t start) {
    for (size_t k = 0; k < s->nptr; k++) {
        if (!(mask >> k & 1) || s->ptrs[k].token_count != depth) continue;
        s->matched_in[k] = s->element[k];
        if (push_range(&s->r->matches[k], &s->r->match_counts[k], &s->r->match_caps[k], (hj_range){start, s->i}) != 0) {
            snprintf(s->err, s->errlen, "out of memory while scanning");
            return -1;
        }
    }
    return 0;
}

// MARK: - Measuring an item without validating it

/// Where the bytes of interest lie in a block of 64: bit k for byte k.
typedef struct block {
    uint64_t quote, backslash, open, close, space;
} block;

/// Classifies the 64 bytes at `b`: quotes, backslashes, opening brackets ('{' '['), closing
/// ones ('}' ']') and whitespace.
static inline block classify(const uint8_t *b) {
    block m = {0, 0, 0, 0, 0};
#if defined(__SSE2__)
    for (int k = 0; k < 4; k++) {
        __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(b + 16 * k));
        // '{' and '[' differ in bit 0x20 only, as do '}' and ']'.
        __m128i folded = _mm_or_si128(v, _mm_set1_epi8(0x20));
        __m128i space = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8(' ')), _mm_cmpeq_epi8(v, _mm_set1_epi8('\n'))),
                                     _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('\r')), _mm_cmpeq_epi8(v, _mm_set1_epi8('\t'))));
        int shift = 16 * k;
        m.quote |= (uint64_t)(uint16_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8('"'))) << shift;
        m.backslash |= (uint64_t)(uint16_t)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))) << shift;
        m.open |= (uint64_t)(uint16_t)_mm_movemask_epi8(_mm_cmpeq_epi8(folded, _mm_set1_epi8('{'))) << shift;
        m.close |= (uint64_t)(uint16_t)_mm_movemask_epi8(_mm_cmpeq_epi8(folded, _mm_set1_epi8('}'))) << shift;
        m.space |= (uint64_t)(uint16_t)_mm_movemask_epi8(space) << shift;
    }
#else
    for (int k = 0; k < 64; k++) {
        uint64_t bit = (uint64_t)1 << k;
        uint8_t c = b[k];
        if (c == '"') m.quote |= bit;
        else if (c == '\\') m.backslash |= bit;
        else if ((c | 0x20) == '{') m.open |= bit;
        else if ((c | 0x20) == '}') m.close |= bit;
        else if (c == ' ' || c == '\n' || c == '\r' || c == '\t') m.space |= bit;
    }
#endif
    return m;
}

/// The bytes of a block that a backslash escapes. `carry` says the block's first byte is
/// escaped (the last byte of the block before was a backslash that escapes); it is updated for
/// the next block. Backslashes are rare: each is visited.
static inline uint64_t escaped_bytes(uint64_t backslash, uint64_t *carry) {
    uint64_t escaped = *carry, starts = backslash & ~escaped;
    *carry = 0;
    while (starts) {
        unsigned k = (unsigned)__builtin_ctzll(starts);
        starts &= starts - 1;
        if (k == 63) { *carry = 1; break; }
        uint64_t next = (uint64_t)1 << (k + 1);
        escaped |= next;
        starts &= ~next; // an escaped backslash escapes nothing
    }
    return escaped;
}

/// Bit k set when byte k lies inside a string: from an opening quote up to its closing quote
/// (excluded). `inside` is all ones when the block before ended inside a string; updated.
static inline uint64_t string_bytes(uint64_t quotes, uint64_t *inside) {
    uint64_t x = quotes; // each bit becomes the parity of the quotes at or below it
    x ^= x << 1;
    x ^= x << 2;
    x ^= x << 4;
    x ^= x << 8;
    x ^= x << 16;
    x ^= x << 32;
    x ^= *inside;
    *inside = (uint64_t)0 - (x >> 63);
    return x;
}

/// The number of bits set (without the POPCNT instruction, which x86-64 does not promise).
static inline size_t count_bits(uint64_t x) {
    x = x - ((x >> 1) & 0x5555555555555555ull);
    x = (x & 0x3333333333333333ull) + ((x >> 2) & 0x3333333333333333ull);
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0Full;
    return (size_t)((x * 0x0101010101010101ull) >> 56);
}

/// Finds the end of the array or object at s->i, a value `level` deep (at least 1), without
/// validating what it holds (see the top of the file): brackets outside strings are counted
/// until the first one closes, nesting at most MAX_DEPTH deep as in a validating scan. s->i
/// ends after it; s->spaces grows when whitespace lies outside its strings.
static int skip_container(scanner *s, size_t level) {
    const uint8_t *p = s->p;
    size_t n = s->len, at = s->i, outer = level - 1, depth = outer;
    uint64_t blank = 0;
    uint64_t escape_carry = 0, inside = 0;
    uint8_t tail[64];
    while (at < n) {
        size_t left = n - at;
        const uint8_t *b = p + at;
        uint64_t valid = ~(uint64_t)0;
        if (left < 64) {
            memset(tail, 0, sizeof tail);
            memcpy(tail, b, left);
            b = tail;
            valid = ((uint64_t)1 << left) - 1;
        }
        block m = classify(b);
        uint64_t quotes = m.quote & ~escaped_bytes(m.backslash, &escape_carry);
        uint64_t outside = ~string_bytes(quotes, &inside) & valid;
        uint64_t opens = m.open & outside, closes = m.close & outside, blanks = m.space & outside;
        size_t opened = count_bits(opens);
        if (!closes && depth + opened < MAX_DEPTH) {
            depth += opened;
            blank |= blanks;
            at += 64;
            continue;
        }
        for (uint64_t brackets = opens | closes; brackets; brackets &= brackets - 1) {
            unsigned k = (unsigned)__builtin_ctzll(brackets);
            uint64_t bit = (uint64_t)1 << k;
            if (opens & bit) {
                if (++depth >= MAX_DEPTH) {
                    snprintf(s->err, s->errlen, "nesting deeper than %d at byte %zu", MAX_DEPTH, at + k);
                    return -1;
                }
            } else if (--depth == outer) {
                uint64_t before = k == 63 ? ~(uint64_t)0 : (bit << 1) - 1;
                s->spaces += (blank | (blanks & before)) != 0;
                s->i = at + k + 1;
                return 0;
            }
        }
        blank |= blanks;
        at += 64;
    }
    s->i = n;
    return fail_at(s, inside ? "inside a string" : "inside an array or object");
}

static int array(scanner *s, size_t depth, uint64_t mask, int collect) {
    size_t opened = s->i;
    // An index the items pointer names must be there ("*" may match no element).
    int must_enter = items_path_goes_on(s, depth, mask) && !items_token_is_star(s, depth), entered = 0;
    s->i++; // [
    skip_ws(s);
    if (s->i < s->len && s->p[s->i] == ']') {
        s->i++;
        if (must_enter) path_problem(s, HJ_PATH_MISSING, depth, opened);
        return 0;
    }
    // The pointers whose last "*" goes through this array's elements.
    uint64_t stars = 0;
    for (size_t k = 0; mask && k < s->nptr; k++) {
        if ((mask >> k & 1) && s->last_star[k] == depth) stars |= (uint64_t)1 << k;
    }
    size_t index = 0;
    for (;;) {
        uint64_t child = 0;
        if (mask) {
            // The index in decimal, written backwards from the end (snprintf cost an item ~0.2 µs).
            uint8_t digits[24];
            size_t at = sizeof digits, rest = index;
            do { digits[--at] = (uint8_t)('0' + rest % 10); rest /= 10; } while (rest);
            child = child_mask(s, mask, depth, digits + at, sizeof digits - at, 1);
            entered |= (int)(child & 1);
            if (stars) {
                s->serial++;
                for (uint64_t left = stars; left; left &= left - 1) s->element[__builtin_ctzll(left)] = s->serial;
            }
        }
        size_t start = s->i, spaces = s->spaces;
        // An item no pointer enters is measured, not validated (the host checks it).
        int container = s->i < s->len && (s->p[s->i] == '{' || s->p[s->i] == '[');
        if (collect && !child && container && !s->check_items) {
            if (skip_container(s, depth + 1) != 0) return -1;
        } else if (value(s, depth + 1, child) != 0) {
            return -1;
        }
        if (collect) {
            hj_result *r = s->r;
            if (push_range(&r->items, &r->item_count, &r->items_cap, (hj_range){start, s->i}) != 0) {
                snprintf(s->err, s->errlen, "out of memory while scanning");
                return -1;
            }
            if (r->flags_cap < r->items_cap) {
                uint8_t *flags = realloc(r->item_has_space, r->items_cap);
                if (!flags) { snprintf(s->err, s->errlen, "out of memory while scanning"); return -1; }
                r->item_has_space = flags;
                r->flags_cap = r->items_cap;
            }
            r->item_has_space[r->item_count - 1] = s->spaces != spaces;
        }
        index++;
        skip_ws(s);
        if (s->i < s->len && s->p[s->i] == ',') { s->i++; skip_ws(s); continue; }
        if (s->i < s->len && s->p[s->i] == ']') {
            s->i++;
            if (must_enter && !entered) path_problem(s, HJ_PATH_MISSING, depth, opened);
            return 0;
        }
        return fail_at(s, "in an array (expected ',' or ']')");
    }
}

static int object(scanner *s, size_t depth, uint64_t mask) {
    size_t opened = s->i;
    // A member the items pointer names must be there.
    int must_enter = items_path_goes_on(s, depth, mask), entered = 0;
    s->i++; // {
    skip_ws(s);
    if (s->i < s->len && s->p[s->i] == '}') {
        s->i++;
        if (must_enter) path_problem(s, HJ_PATH_MISSING, depth, opened);
        return 0;
    }
    for (;;) {
        if (!(s->i < s->len && s->p[s->i] == '"')) return fail_at(s, "in an object (expected a member name)");
        size_t key_start = s->i + 1;
        int escaped;
        if (string(s, &escaped) != 0) return -1;
        size_t key_end = s->i - 1;
        uint64_t child = 0;
        if (mask) {
            if (!escaped) {
                child = child_mask(s, mask, depth, s->p + key_start, key_end - key_start, 0);
            } else {
                uint8_t buffer[512];
                size_t len = unescape(s->p + key_start, key_end - key_start, buffer, sizeof buffer);
                if (len != (size_t)-1) child = child_mask(s, mask, depth, buffer, len, 0);
            }
            entered |= (int)(child & 1);
        }
        skip_ws(s);
        if (!(s->i < s->len && s->p[s->i] == ':')) return fail_at(s, "in an object (expected ':')");
        s->i++;
        skip_ws(s);
        if (value(s, depth + 1, child) != 0) return -1;
        skip_ws(s);
        if (s->i < s->len && s->p[s->i] == ',') { s->i++; skip_ws(s); continue; }
        if (s->i < s->len && s->p[s->i] == '}') {
            s->i++;
            if (must_enter && !entered) path_problem(s, HJ_PATH_MISSING, depth, opened);
            return 0;
        }
        return fail_at(s, "in an object (expected ',' or '}')");
    }
}

static int value(scanner *s, size_t depth, uint64_t mask) {
    // At most MAX_DEPTH arrays and objects nest (the root's depth is 0), as the host counts.
    if (depth >= MAX_DEPTH && s->i < s->len && (s->p[s->i] == '[' || s->p[s->i] == '{')) {
        snprintf(s->err, s->errlen, "nesting deeper than %d at byte %zu", MAX_DEPTH, s->i);
        return -1;
    }
    if (s->i >= s->len) return fail_at(s, "where a value was expected");
    size_t start = s->i;
    // The items pointer (pointer 0) ends here: an array's elements are the items.
    int items_here = (mask & 1) && s->ptrs[0].token_count == depth;
    if (items_path_goes_on(s, depth, mask)) {
        // "*" needs an array; a name an object (or, if it is an index, an array).
        const char *t = s->ptrs[0].tokens[depth];
        size_t tl = s->ptrs[0].token_lens[depth], k = 0;
        while (k < tl && t[k] >= '0' && t[k] <= '9') k++;
        int is_index = tl > 0 && k == tl && (tl == 1 || t[0] != '0');
        uint8_t c = s->p[s->i];
        if (items_token_is_star(s, depth) ? c != '[' : !(c == '{' || (c == '[' && is_index)))
            path_problem(s, HJ_PATH_NOT_CONTAINER, depth, start);
    }
    // A member named twice (duplicate names are valid JSON): the last one is the items, as the
    // last is the value of any other pointer. Through a "*", every array is the items.
    if (items_here && s->last_star[0] == SIZE_MAX) {
        s->r->item_count = 0;
        s->r->items_not_array = 0;
        if (s->r->items_path_problem == HJ_PATH_NOT_ARRAY) s->r->items_path_problem = HJ_PATH_OK;
    }
    int rc;
    int escaped;
    switch (s->p[s->i]) {
    case '{': rc = object(s, depth, mask); break;
    case '[': rc = array(s, depth, mask, items_here); break;
    case '"': rc = string(s, &escaped); break;
    case 't': rc = literal(s, "true", 4); break;
    case 'f': rc = literal(s, "false", 5); break;
    case 'n': rc = literal(s, "null", 4); break;
    default:
        if (s->p[s->i] == '-' || (s->p[s->i] >= '0' && s->p[s->i] <= '9')) rc = number(s);
        else return fail_at(s, "where a value was expected");
    }
    if (rc != 0) return rc;
    if (items_here && s->p[start] != '[') {
        s->r->items_not_array = 1;
        path_problem(s, HJ_PATH_NOT_ARRAY, depth, start);
    }
    return mask ? record(s, depth, mask, start) : 0;
}

int hj_scan(const uint8_t *text, size_t len, const hj_pointer *pointers, size_t pointer_count, int check_items,
            hj_result *result, char *error, size_t error_len) {
    memset(result, 0, sizeof *result);
    if (pointer_count > 64) { snprintf(error, error_len, "at most 64 pointers"); return -1; }
    result->pointer_count = pointer_count;
    result->matches = calloc(pointer_count ? pointer_count : 1, sizeof *result->matches);
    result->match_counts = calloc(pointer_count ? pointer_count : 1, sizeof *result->match_counts);
    result->match_caps = calloc(pointer_count ? pointer_count : 1, sizeof *result->match_caps);
    if (!result->matches || !result->match_counts || !result->match_caps) {
        snprintf(error, error_len, "out of memory while scanning");
        return -1;
    }
    scanner s = {text ? text : (const uint8_t *)"", len, 0, pointers, pointer_count, result, error, error_len, 0, check_items};
    for (size_t k = 0; k < pointer_count; k++) {
        s.last_star[k] = SIZE_MAX;
        for (size_t t = 0; t < pointers[k].token_count; t++) {
            if (pointers[k].token_lens[t] == 1 && pointers[k].tokens[t][0] == '*') s.last_star[k] = t;
        }
    }
    uint64_t mask = pointer_count == 64 ? ~(uint64_t)0 : (((uint64_t)1 << pointer_count) - 1);
    // A UTF-8 byte order mark is tolerated, as by most parsers.
    if (len >= 3 && text[0] == 0xEF && text[1] == 0xBB && text[2] == 0xBF) s.i = 3;
    skip_ws(&s);
    if (value(&s, 0, mask) != 0) return -1;
    skip_ws(&s);
    if (s.i != len) return fail_at(&s, "after the JSON value (extra data)");
    for (size_t k = 0; k < pointer_count; k++) {
        if (s.element[k] != s.matched_in[k]) result->not_in_last_element |= (uint64_t)1 << k;
    }
    return 0;
}

void hj_result_free(hj_result *result) {
    for (size_t k = 0; k < result->pointer_count && result->matches; k++) free(result->matches[k]);
    free(result->matches);
    free(result->match_counts);
    free(result->match_caps);
    free(result->items);
    free(result->item_has_space);
    memset(result, 0, sizeof *result);
}

size_t hj_compact(const uint8_t *text, size_t len, uint8_t *out) {
    size_t o = 0;
    int in_string = 0, escaped = 0;
    for (size_t i = 0; i < len; i++) {
        uint8_t c = text[i];
        if (in_string) {
            out[o++] = c;
            if (escaped) escaped = 0;
            else if (c == '\\') escaped = 1;
            else if (c == '"') in_string = 0;
            continue;
        }
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
        if (c == '"') in_string = 1;
        out[o++] = c;
    }
    return o;
}
