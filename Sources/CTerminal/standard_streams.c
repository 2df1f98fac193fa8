#include "paging_standard_streams.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

static int standard_output_was_closed = 0;

/* Before main and before the Swift runtime starts threads: open() returns the lowest free
 * descriptor, so fds 0, 1 and 2, taken in order, each get their own /dev/null. */
__attribute__((constructor)) static void paging_open_closed_standard_streams(void) {
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
        if (fd == 1) standard_output_was_closed = 1;
        int null = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
        if (null >= 0 && null != fd) {
            dup2(null, fd);
            close(null);
        }
    }
}

int paging_standard_output_was_closed(void) { return standard_output_was_closed; }
