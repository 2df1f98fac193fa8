/*
 * The standard streams of the pager host. (Part of the pager host, not of the plugin ABI.)
 */
#ifndef PAGING_STANDARD_STREAMS_H
#define PAGING_STANDARD_STREAMS_H

/* Whether fd 1 was closed when the process started. Such a descriptor is opened on /dev/null
 * before main (by a constructor of this file), so that no file the process opens later, nor a
 * descriptor the runtime makes, becomes its standard output; the same for fds 0 and 2. */
int paging_standard_output_was_closed(void);

#endif
