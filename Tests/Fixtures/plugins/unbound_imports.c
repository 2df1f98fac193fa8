/*
 * Fixture: linked into a plugin (pass_through.c) to give it one import nothing defines, chosen
 * with -D: IMPORT_FUNCTION (a function, bound lazily, on its first call), IMPORT_DATA (a
 * variable, bound at load) or IMPORT_WEAK_FUNCTION (a weak function, allowed to be missing).
 * The host must refuse the first two at load, naming the symbol, and load the third.
 */
int unbound_imports_use(void);

#if defined(IMPORT_FUNCTION)
int paging_fixture_absent_function(void);
int unbound_imports_use(void) { return paging_fixture_absent_function(); }
#elif defined(IMPORT_DATA)
extern int paging_fixture_absent_variable;
int unbound_imports_use(void) { return paging_fixture_absent_variable; }
#elif defined(IMPORT_WEAK_FUNCTION)
int paging_fixture_absent_weak_function(void) __attribute__((weak));
int unbound_imports_use(void) { return paging_fixture_absent_weak_function ? paging_fixture_absent_weak_function() : 0; }
#else
#error "define IMPORT_FUNCTION, IMPORT_DATA or IMPORT_WEAK_FUNCTION"
#endif
