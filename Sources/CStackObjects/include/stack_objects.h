/*
 * Which loaded objects (the program, its libraries, the plugins) hold the calls on the calling
 * thread's stack: how the host names the plugin that called exit(). Part of the host, not of
 * the plugin ABI.
 */
#ifndef PAGING_STACK_OBJECTS_H
#define PAGING_STACK_OBJECTS_H

/* Fills `files` with the file name (dladdr's dli_fname) of the object holding each of the
 * calling thread's innermost `max` return addresses, innermost first (NULL where none does);
 * returns how many it filled. The names stay valid while their objects stay loaded. */
int paging_stack_objects(const char **files, int max);

#endif
