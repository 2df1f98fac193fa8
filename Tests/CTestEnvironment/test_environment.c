/* The environment variables the tests set, each declared (empty) before main, while the test
 * process has one thread. Adding a variable to the environment can move the array that other
 * threads read as they spawn processes (posix_spawn copies it, getenv walks it): a test that
 * added one while another test spawned a child crashed the test process (SIGSEGV in
 * "paging-spawn"). Replacing the value of a declared variable leaves the array in place.
 * PagingTestSupport's setTestEnvironment refuses a name that is not declared here. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>

#include "test_environment.h"

static const char *const declared[] = {
    "API_TEST_CLIENT_SECRET",
    "API_TEST_TOKEN",
    "HOSTILE_CLIENT_SECRET",
    "HOSTILE_ECHO_TOKEN",
    "HOSTILE_ENCODED_KEY",
    "HOSTILE_POST_TOKEN",
    "HOSTILE_QUERY_KEY",
    "HOSTILE_TEST_PASSWORD",
    "HOSTILE_TEST_TOKEN",
    "HOSTILE_ENCODED_TOKEN",
    "HOSTILE_URL_SECRET",
    "HTTPS_TEST_TOKEN",
    "HTTP_PLUGIN_TEST_TOKEN",
    "HTTP_PLUGIN_TEST_UNSET",
    "HTTP_TEST_CONTROL",
    "HTTP_TEST_HOSTPORT",
    "HTTP_TEST_SHORT",
    "PAGING_TEST_REDIS_ADDRESS",
    "REDIS_TEST_ADDRESS_PASSWORD",
    "REDIS_TEST_ODD_PASSWORD",
};

__attribute__((constructor)) static void declare_test_environment(void)
{
    size_t i;
    for (i = 0; i < sizeof declared / sizeof declared[0]; i++) setenv(declared[i], "", 0);
}

int paging_test_environment_declares(const char *name)
{
    size_t i;
    for (i = 0; i < sizeof declared / sizeof declared[0]; i++)
        if (strcmp(declared[i], name) == 0) return 1;
    return 0;
}
