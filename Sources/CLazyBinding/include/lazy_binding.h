/*
 * Plugins are opened with lazy binding (RTLD_LAZY): the functions a library and its
 * dependencies import are bound on their first call, not at load. libcurl alone brings ~30
 * libraries whose imports a run mostly never calls; binding them all at load cost more than a
 * hundred pages of the http source. This checks what lazy binding no longer checks at load, for
 * the plugin's own library: a function it imports that nothing loaded defines would end the
 * process on its first call. Part of the host, not of the plugin ABI.
 */
#ifndef PAGING_LAZY_BINDING_H
#define PAGING_LAZY_BINDING_H

/* The name of the first function the library `handle` (from dlopen) imports, not weakly, that
 * neither the library's dependencies nor the global scope define; NULL when there is none. The
 * name points into the library's string table: valid while the library stays loaded. */
const char *paging_unbound_function(void *handle);

#endif
