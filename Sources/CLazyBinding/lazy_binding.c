#define _GNU_SOURCE
#include "lazy_binding.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stddef.h>

#if __ELF_NATIVE_CLASS == 64
#define RELOCATION_SYMBOL ELF64_R_SYM
#define SYMBOL_BINDING ELF64_ST_BIND
#else
#define RELOCATION_SYMBOL ELF32_R_SYM
#define SYMBOL_BINDING ELF32_ST_BIND
#endif

/* A pointer of the dynamic section. glibc rewrites them to addresses where the section is
 * writable (x86-64, AArch64) and leaves them offsets from the load address elsewhere. */
static const char *dynamic_address(const struct link_map *map, ElfW(Addr) value) {
    return (const char *)(value < map->l_addr ? map->l_addr + value : value);
}

/* Whether `name` is defined in the library's own scope (itself and its dependencies) or in the
 * global one: the two scopes lazy binding searches. */
static int is_defined(void *handle, const char *name) {
    dlerror();
    (void)dlsym(handle, name);
    if (dlerror() == NULL) return 1;
    (void)dlsym(RTLD_DEFAULT, name);
    return dlerror() == NULL;
}

const char *paging_unbound_function(void *handle) {
    struct link_map *map = NULL;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || map == NULL || map->l_ld == NULL) return NULL;
    ElfW(Addr) symbols = 0, strings = 0, relocations = 0;
    size_t relocations_size = 0, relocation_size = sizeof(ElfW(Rela));
    for (const ElfW(Dyn) *entry = map->l_ld; entry->d_tag != DT_NULL; entry++) {
        switch (entry->d_tag) {
        case DT_SYMTAB: symbols = entry->d_un.d_ptr; break;
        case DT_STRTAB: strings = entry->d_un.d_ptr; break;
        case DT_JMPREL: relocations = entry->d_un.d_ptr; break;
        case DT_PLTRELSZ: relocations_size = entry->d_un.d_val; break;
        case DT_PLTREL: relocation_size = entry->d_un.d_val == DT_REL ? sizeof(ElfW(Rel)) : sizeof(ElfW(Rela)); break;
        default: break;
        }
    }
    if (symbols == 0 || strings == 0 || relocations == 0) return NULL;
    const ElfW(Sym) *symbol_table = (const ElfW(Sym) *)dynamic_address(map, symbols);
    const char *string_table = dynamic_address(map, strings);
    const char *relocation = dynamic_address(map, relocations);
    /* Only the PLT's relocations are bound lazily; every other one was bound by dlopen. r_info
     * is at the same offset in Rel and Rela. */
    for (size_t offset = 0; offset + relocation_size <= relocations_size; offset += relocation_size) {
        const ElfW(Rel) *entry = (const ElfW(Rel) *)(relocation + offset);
        size_t index = RELOCATION_SYMBOL(entry->r_info);
        if (index == 0) continue; /* IRELATIVE: no symbol */
        const ElfW(Sym) *symbol = &symbol_table[index];
        if (symbol->st_shndx != SHN_UNDEF || SYMBOL_BINDING(symbol->st_info) == STB_WEAK) continue;
        const char *name = string_table + symbol->st_name;
        if (!is_defined(handle, name)) return name;
    }
    return NULL;
}
