/* The environment variables the tests set, declared when the test process starts. */
#ifndef PAGING_TEST_ENVIRONMENT_H
#define PAGING_TEST_ENVIRONMENT_H

/* Whether `name` is one of the variables declared at start (so setting it replaces a value and
 * never grows the environment). */
int paging_test_environment_declares(const char *name);

#endif
