/* build: cc -std=c99 -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/ctor_sigchld.c -o libctor_sigchld.so */
/* Fixture: source "numbered" (numbered_source.c), in a library whose constructor sets SIGCHLD
 * to be ignored (children reaped by the kernel): the host must still learn how its isolated
 * plugins' processes end. */
#include "numbered_source.c"

__attribute__((constructor)) static void cs_ignore_sigchld(void)
{
    signal(SIGCHLD, SIG_IGN);
}
