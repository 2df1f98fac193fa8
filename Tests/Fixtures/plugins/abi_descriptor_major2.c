/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/abi_descriptor_major2.c -o libabi_descriptor_major2.so */
/*
 * Fixture: abi_major2.c with an entry that claims ABI 1.0 and a descriptor that claims 2.0.0.
 * Every host command must refuse it at load, naming the plugin and both versions.
 */
#define FIXTURE_DESCRIPTOR_ONLY 1
#include "abi_major2.c"
