#include "paging_json_check.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* The deepest nesting the bit stack holds. */
#define STACK_BITS 512

static inline size_t skip_ws(const uint8_t *p, size_t n, size_t i) {
    if (i < n && p[i] > ' ') return i;
    while (i < n && (p[i] == ' ' || p[i] == '\n' || p[i] == '\r' || p[i] == '\t')) i++;
    return i;
}

/* The length of the well-formed UTF-8 sequence of 2 to 4 bytes at i, or 0. */
static size_t utf8_length(const uint8_t *p, size_t n, size_t i) {
    uint8_t lead = p[i];
#define CONT(k) ((k) < n && (p[k] & 0xC0) == 0x80)
    if (lead < 0xE0) return lead >= 0xC2 && CONT(i + 1) ? 2 : 0; /* C0, C1 overlong */
    if (i + 1 >= n) return 0;
    uint8_t second = p[i + 1];
    if (lead < 0xF0) { /* E0 80-9F overlong; ED A0-BF surrogates */
        uint8_t low = lead == 0xE0 ? 0xA0 : 0x80, high = lead == 0xED ? 0x9F : 0xBF;
        return second >= low && second <= high && CONT(i + 2) ? 3 : 0;
    }
    if (lead > 0xF4) return 0; /* above U+10FFFF */
    uint8_t low = lead == 0xF0 ? 0x90 : 0x80, high = lead == 0xF4 ? 0x8F : 0xBF;
    return second >= low && second <= high && CONT(i + 2) && CONT(i + 3) ? 4 : 0;
#undef CONT
}

static inline int is_hex(uint8_t c) {
    return (uint8_t)(c - '0') < 10 || (uint8_t)((c | 0x20) - 'a') < 6;
}

/* A string's contents and closing quote, from just after its opening quote: the index after
 * the quote, or 0 when the string is not valid (a string never ends at index 0). */
static size_t string_end(const uint8_t *p, size_t n, size_t i) {
    for (;;) {
#if defined(__SSE2__)
        /* 16 bytes at a time while none is a quote, a backslash, below 0x20 or non-ASCII (the
         * signed comparison takes the bytes from 0x80 up as negative, below 0x20). */
        while (n - i >= 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + i));
            __m128i quote = _mm_cmpeq_epi8(v, _mm_set1_epi8('"'));
            __m128i special = _mm_or_si128(_mm_or_si128(quote, _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))),
                                           _mm_cmplt_epi8(v, _mm_set1_epi8(0x20)));
            unsigned mask = (unsigned)_mm_movemask_epi8(special);
            if (mask) {
                unsigned first = (unsigned)__builtin_ctz(mask);
                /* The usual end: the first special byte is the closing quote. */
                if ((unsigned)_mm_movemask_epi8(quote) >> first & 1) return i + first + 1;
                i += first;
                break;
            }
            i += 16;
        }
#endif
        if (i >= n) return 0;
        uint8_t c = p[i];
        if (c == '"') return i + 1;
        if (c == '\\') {
            if (i + 1 >= n) return 0;
            switch (p[i + 1]) {
            case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
                i += 2;
                break;
            case 'u':
                if (n - i < 6 || !is_hex(p[i + 2]) || !is_hex(p[i + 3]) || !is_hex(p[i + 4]) || !is_hex(p[i + 5])) return 0;
                i += 6;
                break;
            default:
                return 0;
            }
        } else if (c < 0x20) {
            return 0;
        } else if (c >= 0x80) {
            size_t length = utf8_length(p, n, i);
            if (length == 0) return 0;
            i += length;
        } else {
            i += 1;
        }
    }
}

/* A number from its first byte ('-' or a digit): the index after it, or 0. */
static size_t number_end(const uint8_t *p, size_t n, size_t i) {
#define DIGIT(k) ((k) < n && (uint8_t)(p[k] - '0') < 10)
    if (p[i] == '-') i++;
    if (i < n && p[i] == '0') {
        i++;
        if (DIGIT(i)) return 0; /* leading zero */
    } else {
        if (!DIGIT(i)) return 0;
        while (DIGIT(i)) i++;
    }
    if (i < n && p[i] == '.') {
        i++;
        if (!DIGIT(i)) return 0;
        while (DIGIT(i)) i++;
    }
    if (i < n && (p[i] | 0x20) == 'e') {
        i++;
        if (i < n && (p[i] == '+' || p[i] == '-')) i++;
        if (!DIGIT(i)) return 0;
        while (DIGIT(i)) i++;
    }
    return i;
#undef DIGIT
}

/* A key, its colon and the whitespace around them, from the key's opening quote: the index of
 * the member's value, or 0. */
static inline size_t key_end(const uint8_t *p, size_t n, size_t i) {
    if (i >= n || p[i] != '"') return 0;
    i = string_end(p, n, i + 1);
    if (i == 0) return 0;
    i = skip_ws(p, n, i);
    if (i >= n || p[i] != ':') return 0;
    return i + 1;
}

int paging_json_check(const uint8_t *p, size_t n, size_t max_depth) {
    uint64_t stack[STACK_BITS / 64] = {0}; /* bit k: the container at depth k + 1 is an object */
    if (max_depth > STACK_BITS) max_depth = STACK_BITS;
    size_t i = 0, depth = 0;
    int in_object = 0;
    for (;;) {
        /* A value (or a container's opening and its first member's key). */
        i = skip_ws(p, n, i);
        if (i >= n) return 0;
        switch (p[i]) {
        case '"':
            if ((i = string_end(p, n, i + 1)) == 0) return 0;
            break;
        case '{':
        case '[': {
            int object = p[i] == '{';
            if (depth >= max_depth) return 0;
            if (object) stack[depth >> 6] |= (uint64_t)1 << (depth & 63);
            else stack[depth >> 6] &= ~((uint64_t)1 << (depth & 63));
            depth++;
            in_object = object;
            i = skip_ws(p, n, i + 1);
            if (i < n && p[i] == (object ? '}' : ']')) {
                i++;
                depth--;
                if (depth > 0) in_object = (int)(stack[(depth - 1) >> 6] >> ((depth - 1) & 63) & 1);
                break;
            }
            if (object && (i = key_end(p, n, i)) == 0) return 0;
            continue;
        }
        case 't':
            if (n - i < 4 || p[i + 1] != 'r' || p[i + 2] != 'u' || p[i + 3] != 'e') return 0;
            i += 4;
            break;
        case 'f':
            if (n - i < 5 || p[i + 1] != 'a' || p[i + 2] != 'l' || p[i + 3] != 's' || p[i + 4] != 'e') return 0;
            i += 5;
            break;
        case 'n':
            if (n - i < 4 || p[i + 1] != 'u' || p[i + 2] != 'l' || p[i + 3] != 'l') return 0;
            i += 4;
            break;
        case '-': case '0': case '1': case '2': case '3': case '4': case '5': case '6': case '7': case '8': case '9':
            if ((i = number_end(p, n, i)) == 0) return 0;
            break;
        default:
            return 0;
        }
        /* After a value: a comma and the next member, or closing brackets, or the end. */
        for (;;) {
            i = skip_ws(p, n, i);
            if (depth == 0) return i == n;
            if (i >= n) return 0;
            if (p[i] == ',') {
                i++;
                if (in_object && (i = key_end(p, n, skip_ws(p, n, i))) == 0) return 0;
                break;
            }
            if (p[i] != (in_object ? '}' : ']')) return 0;
            i++;
            depth--;
            if (depth > 0) in_object = (int)(stack[(depth - 1) >> 6] >> ((depth - 1) & 63) & 1);
        }
    }
}
