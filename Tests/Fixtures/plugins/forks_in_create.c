/* build: cc -std=c99 -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/forks_in_create.c -o libforks_in_create.so */
/*
 * Fixture: interceptor "forker", a pass-through whose create_interceptor forks a process that
 * sleeps for ever and is never ended (destroy() forgets it). The forked process creates a file
 * named by its pid in the config's "pid_folder" (when set), so a test can find it.
 */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "paging/paging.h"

static uint32_t fk_intercept(paging_interceptor_t *self, const paging_request_t *request, paging_intercept_out_t *out)
{
    (void)self; (void)request; (void)out;
    return PAGING_INTERCEPT_PROCEED;
}

static void fk_destroy(paging_interceptor_t *self) { free(self); }

static paging_interceptor_t *fk_create(const char *id, const paging_host_t *host, const paging_config_t *config)
{
    const char *folder = host->config_string(config, "pid_folder");
    paging_interceptor_t *self = (paging_interceptor_t *)calloc(1, sizeof *self);
    char path[600];
    (void)id;
    if (self == NULL) return NULL;
    if (fork() == 0) {
        struct timespec pause = { 3600, 0 };
        if (folder != NULL) {
            snprintf(path, sizeof path, "%s/%ld", folder, (long)getpid());
            close(open(path, O_WRONLY | O_CREAT, 0600));
        }
        for (;;) nanosleep(&pause, NULL);
    }
    self->struct_size = sizeof *self;
    self->intercept = fk_intercept;
    self->destroy = fk_destroy;
    return self;
}

static const paging_plugin_descriptor_t fk_descriptor = {
    PAGING_DESCRIPTOR_HEAD, "forker", "Forker (fixture)", "1.0.0", "Forks a process in create and forgets it.",
    PAGING_PLUGIN_INTERCEPTOR, 0, 0
};
static uint32_t fk_count(void) { return 1; }
static const paging_plugin_descriptor_t *fk_describe(uint32_t i) { return i == 0 ? &fk_descriptor : 0; }
static const paging_plugin_entry_t fk_entry = { PAGING_ENTRY_HEAD, fk_count, fk_describe, 0, fk_create, 0, 0 };

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &fk_entry; }
