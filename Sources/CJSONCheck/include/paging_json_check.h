/*
 * The host's check of an item: exactly one JSON value (RFC 8259) in well-formed UTF-8, with
 * whitespace around it allowed, arrays and objects nesting at most `max_depth` deep (at most
 * 512). (Part of the pager host, not of the plugin ABI.)
 *
 * The fast path of PagingHost's JSONValidator: it says only whether the bytes pass; the
 * validator finds the place and the reason of a refusal.
 */
#ifndef PAGING_JSON_CHECK_H
#define PAGING_JSON_CHECK_H

#include <stddef.h>
#include <stdint.h>

/* 1 when the `len` bytes at `bytes` are one JSON value in well-formed UTF-8, else 0. */
int paging_json_check(const uint8_t *bytes, size_t len, size_t max_depth);

#endif
