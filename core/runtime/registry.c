/* registry.c — find plugins on the search path and check each one in
 * the order docs/PLUGINS.md lists: dlopen (RTLD_NOW) · entry symbol · magic · abi_major ·
 * abi_minor · struct_size · kind · name (valid, equal to the file name) ·
 * not a duplicate · vtable (present, large enough, required slots set) ·
 * probe. The first failed check rejects the file with one line. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "registry.h"
#include "host_blas.h"
#include "search_path.h"
#include "tfcore/backend.h"
#include "tfcore/comm.h"
#include "tfcore/config.h"
#include "tfcore/dataset.h"
#include "tfcore/file_read.h"
#include "tfcore/model.h"
#include "tfcore/precision.h"

/* --- the 1.0 layout of each kind's vtable -------------------------------- */

typedef struct slot_rule {
    size_t offset;
    const char *name;
} slot_rule;

#define SLOT(type, field) {offsetof(type, field), #field}

/* Every 1.0 slot is required except those listed as optional in the headers
 * (backend: mem_info, device_name). */
static const slot_rule backend_slots[] = {
    SLOT(tf_backend_vtable, check_config),  SLOT(tf_backend_vtable, open),
    SLOT(tf_backend_vtable, close),         SLOT(tf_backend_vtable, supports),
    SLOT(tf_backend_vtable, alloc),         SLOT(tf_backend_vtable, free),
    SLOT(tf_backend_vtable, memcpy),        SLOT(tf_backend_vtable, memset),
    SLOT(tf_backend_vtable, stream_create), SLOT(tf_backend_vtable, stream_destroy),
    SLOT(tf_backend_vtable, stream_sync),   SLOT(tf_backend_vtable, event_create),
    SLOT(tf_backend_vtable, event_destroy), SLOT(tf_backend_vtable, event_record),
    SLOT(tf_backend_vtable, stream_wait_event), SLOT(tf_backend_vtable, event_sync),
    SLOT(tf_backend_vtable, gemm),          SLOT(tf_backend_vtable, sum_rows),
    SLOT(tf_backend_vtable, layernorm_fwd), SLOT(tf_backend_vtable, layernorm_bwd),
    SLOT(tf_backend_vtable, attention_save_bytes), SLOT(tf_backend_vtable, attention_fwd),
    SLOT(tf_backend_vtable, attention_bwd), SLOT(tf_backend_vtable, gelu_fwd),
    SLOT(tf_backend_vtable, gelu_bwd),      SLOT(tf_backend_vtable, tanh_fwd),
    SLOT(tf_backend_vtable, tanh_bwd),      SLOT(tf_backend_vtable, dropout_fwd),
    SLOT(tf_backend_vtable, dropout_bwd),   SLOT(tf_backend_vtable, add),
    SLOT(tf_backend_vtable, scale),         SLOT(tf_backend_vtable, cast),
    SLOT(tf_backend_vtable, embedding_fwd), SLOT(tf_backend_vtable, embedding_bwd),
    SLOT(tf_backend_vtable, cross_entropy), SLOT(tf_backend_vtable, adamw),
    SLOT(tf_backend_vtable, sum_squares),   SLOT(tf_backend_vtable, finite_check),
};
static const slot_rule model_slots[] = {
    SLOT(tf_model_vtable, check_config), SLOT(tf_model_vtable, create),
    SLOT(tf_model_vtable, destroy),      SLOT(tf_model_vtable, info),
    SLOT(tf_model_vtable, params),       SLOT(tf_model_vtable, buffers),
    SLOT(tf_model_vtable, zero_grad),    SLOT(tf_model_vtable, forward),
    SLOT(tf_model_vtable, backward),     SLOT(tf_model_vtable, save),
    SLOT(tf_model_vtable, reserve),      SLOT(tf_model_vtable, set_step),
};
static const slot_rule dataset_slots[] = {
    SLOT(tf_dataset_vtable, check_config), SLOT(tf_dataset_vtable, open),
    SLOT(tf_dataset_vtable, close),        SLOT(tf_dataset_vtable, num_rows),
    SLOT(tf_dataset_vtable, seq_len),      SLOT(tf_dataset_vtable, fill_batch),
    SLOT(tf_dataset_vtable, evaluate),
};
static const slot_rule comm_slots[] = {
    SLOT(tf_comm_vtable, check_config), SLOT(tf_comm_vtable, launch_mode),
    SLOT(tf_comm_vtable, optimizer_on_root_only), SLOT(tf_comm_vtable, init),
    SLOT(tf_comm_vtable, finalize),     SLOT(tf_comm_vtable, allreduce_start),
    SLOT(tf_comm_vtable, wait),         SLOT(tf_comm_vtable, reduce),
    SLOT(tf_comm_vtable, broadcast),    SLOT(tf_comm_vtable, barrier),
};
static const slot_rule precision_slots[] = {
    SLOT(tf_precision_vtable, check_config), SLOT(tf_precision_vtable, create),
    SLOT(tf_precision_vtable, destroy),      SLOT(tf_precision_vtable, compute_dtype),
    SLOT(tf_precision_vtable, matmul_mode),  SLOT(tf_precision_vtable, loss_scale),
    SLOT(tf_precision_vtable, unscale_and_check), SLOT(tf_precision_vtable, update),
    SLOT(tf_precision_vtable, get_state),    SLOT(tf_precision_vtable, set_state),
};

/* Size of each vtable as ABI 1.0 defined it: the end of its last 1.0 slot.
 * These never change within major 1, however the structs grow. */
#define END_OF(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))
static const size_t vtable_1_0_size[TF_KIND_MAX + 1] = {
    [TF_KIND_BACKEND] = END_OF(tf_backend_vtable, finite_check),
    [TF_KIND_MODEL] = END_OF(tf_model_vtable, set_step),
    [TF_KIND_DATASET] = END_OF(tf_dataset_vtable, evaluate),
    [TF_KIND_COMM] = END_OF(tf_comm_vtable, barrier),
    [TF_KIND_PRECISION] = END_OF(tf_precision_vtable, set_state),
};

static void kind_slots(uint32_t kind, const slot_rule **rules, size_t *n)
{
#define CASE(k, arr)                                                                       \
    case k:                                                                                \
        *rules = arr;                                                                      \
        *n = sizeof arr / sizeof arr[0];                                                   \
        return;
    switch (kind) {
        CASE(TF_KIND_BACKEND, backend_slots)
        CASE(TF_KIND_MODEL, model_slots)
        CASE(TF_KIND_DATASET, dataset_slots)
        CASE(TF_KIND_COMM, comm_slots)
        CASE(TF_KIND_PRECISION, precision_slots)
    }
#undef CASE
    *rules = NULL;
    *n = 0;
}

size_t tf_vtable_min_size(uint32_t kind)
{
    return kind >= TF_KIND_MIN && kind <= TF_KIND_MAX ? vtable_1_0_size[kind] : 0;
}

bool tf_vtable_check(uint32_t kind, const void *vtable, char *why, size_t n)
{
    const char *kname = tf_kind_name(kind);
    if (!vtable) {
        snprintf(why, n, "the descriptor's vtable is NULL");
        return false;
    }
    uint32_t size;
    memcpy(&size, vtable, sizeof size); /* every vtable starts with uint32_t size */
    if (size < tf_vtable_min_size(kind)) {
        snprintf(why, n, "%s vtable is %u bytes, ABI 1.0 needs at least %zu", kname, size,
                 tf_vtable_min_size(kind));
        return false;
    }
    const slot_rule *rules;
    size_t nrules;
    kind_slots(kind, &rules, &nrules);
    for (size_t i = 0; i < nrules; i++) {
        void *slot;
        memcpy(&slot, (const char *)vtable + rules[i].offset, sizeof slot);
        if (!slot) {
            snprintf(why, n, "required %s vtable slot '%s' is NULL", kname, rules[i].name);
            return false;
        }
    }
    return true;
}

bool tf_plugin_name_valid(const char *name)
{
    if (!name) return false;
    size_t len = strlen(name);
    if (len < 1 || len > TF_PLUGIN_NAME_MAX) return false;
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
    }
    return true;
}

/* --- scanning ------------------------------------------------------------- */

static bool push_rejected(tf_registry *reg, const char *path, const char *why)
{
    tf_rejected_plugin *r = realloc(reg->rejected, (reg->nrejected + 1) * sizeof *r);
    if (!r) return false;
    reg->rejected = r;
    char *p = strdup(path), *w = malloc(strlen(path) + strlen(why) + 3);
    if (!p || !w) {
        free(p);
        free(w);
        return false;
    }
    sprintf(w, "%s: %s", path, why);
    r[reg->nrejected].path = p;
    r[reg->nrejected].why = w;
    reg->nrejected++;
    return true;
}

/* Check one file. Returns false only when out of memory. */
static bool consider_file(tf_registry *reg, const char *path, const char *base)
{
    char why[768];
    tf_error ferr = {0};
    /* dlopen of a FIFO blocks forever; of a folder it fails obscurely */
    if (tf_file_check_regular(path, "plugin", TF_ERR_PLUGIN, &ferr) != TF_OK) {
        const char *colon = strstr(ferr.msg, ": ");
        return push_rejected(reg, path, colon ? colon + 2 : ferr.msg);
    }
    tf_host_blas_prepare(); /* before a plugin loads OpenBLAS, which picks its kernels then */
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(why, sizeof why, "cannot load: %s", e ? e : "unknown dlopen error");
        return push_rejected(reg, path, why);
    }
    dlerror();
    void *sym = dlsym(h, TF_PLUGIN_ENTRY_SYMBOL);
    if (!sym) {
        dlclose(h);
        return push_rejected(reg, path,
                             "no '" TF_PLUGIN_ENTRY_SYMBOL "' symbol (not a tfcore plugin, or "
                             "built without TF_PLUGIN_DEFINE)");
    }
    tf_plugin_entry_fn entry;
    memcpy(&entry, &sym, sizeof entry); /* object pointer -> function pointer, as POSIX allows */
    const tf_plugin *d = entry();
#define REJECT(...)                                                                        \
    do {                                                                                   \
        snprintf(why, sizeof why, __VA_ARGS__);                                            \
        dlclose(h);                                                                        \
        return push_rejected(reg, path, why);                                              \
    } while (0)
    if (!d) REJECT("%s() returned NULL", TF_PLUGIN_ENTRY_SYMBOL);
    if (d->magic != TF_PLUGIN_MAGIC)
        REJECT("bad magic 0x%08x, expected 0x%08x ('TFP1')", d->magic, TF_PLUGIN_MAGIC);
    if (d->abi_major != TF_ABI_MAJOR)
        REJECT("built for plugin ABI %u.%u, this tfcore has ABI %d.%d (majors differ: rebuild "
               "the plugin against this tfcore's headers)",
               d->abi_major, d->abi_minor, TF_ABI_MAJOR, TF_ABI_MINOR);
    if (d->abi_minor > TF_ABI_MINOR)
        REJECT("built for plugin ABI %u.%u, newer than this tfcore's %d.%d (upgrade tfcore or "
               "rebuild the plugin)",
               d->abi_major, d->abi_minor, TF_ABI_MAJOR, TF_ABI_MINOR);
    if (d->struct_size < sizeof(tf_plugin))
        REJECT("descriptor struct_size is %u bytes, ABI %d.0 needs at least %zu", d->struct_size,
               TF_ABI_MAJOR, sizeof(tf_plugin)); /* the descriptor is frozen at its x.0 size */
    const char *kname = tf_kind_name(d->kind);
    if (!kname)
        REJECT("unknown kind %u, expected %d..%d (backend, model, dataset, comm, precision)",
               d->kind, TF_KIND_MIN, TF_KIND_MAX);
    if (!tf_plugin_name_valid(d->name))
        REJECT("invalid plugin name '%s' (must match [a-z0-9-]{1,%d})", d->name ? d->name : "(null)",
               TF_PLUGIN_NAME_MAX);
    char expected[128];
    snprintf(expected, sizeof expected, "tfcore-%s-%s.so", kname, d->name);
    if (strcmp(expected, base) != 0)
        REJECT("file name does not match the plugin: it says it is %s '%s', so its file must be "
               "named %s",
               kname, d->name, expected);
    const tf_loaded_plugin *dup = tf_registry_find(reg, d->kind, d->name);
    if (dup) REJECT("duplicate %s '%s': already found at %s (first match wins)", kname, d->name, dup->path);
    if (!tf_vtable_check(d->kind, d->vtable, why, sizeof why)) {
        dlclose(h);
        return push_rejected(reg, path, why);
    }
#undef REJECT
    if (!reg->found) { /* try_in_child's registry: the index allocates it */
        if (!(reg->found = calloc(1, sizeof *reg->found))) {
            dlclose(h);
            return false;
        }
    }
    tf_loaded_plugin *p = &reg->found[reg->nfound];
    memset(p, 0, sizeof *p);
    p->path = strdup(path);
    if (!p->path) {
        dlclose(h);
        return false;
    }
    p->handle = h;
    p->desc = d;
    p->usable = true;
    if (d->probe) {
        char pw[sizeof p->why] = "";
        if (!d->probe(pw, sizeof pw)) {
            p->usable = false;
            snprintf(p->why, sizeof p->why, "%s", pw[0] ? pw : "its probe says it cannot run here");
        }
    }
    reg->nfound++;
    return true;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_plugin_file_name(const char *n)
{
    size_t len = strlen(n);
    return strncmp(n, "tfcore-", 7) == 0 && len > 10 && strcmp(n + len - 3, ".so") == 0;
}

static bool push_pending(tf_registry *reg, const char *path)
{
    char **p = realloc(reg->pending, (reg->npending + 1) * sizeof *p);
    if (!p) return false;
    reg->pending = p;
    if (!(p[reg->npending] = strdup(path))) return false;
    reg->npending++;
    return true;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* Load pending candidate i (removing it from the pending list). */
static bool consider_pending(tf_registry *reg, size_t i)
{
    char *path = reg->pending[i];
    memmove(&reg->pending[i], &reg->pending[i + 1], (reg->npending - i - 1) * sizeof *reg->pending);
    reg->npending--;
    bool ok = consider_file(reg, path, base_name(path));
    free(path);
    return ok;
}

/* List every tfcore-*.so in dir as pending, in name order. False when out of memory. */
static bool scan_dir(tf_registry *reg, const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return true;
    char **names = NULL;
    size_t n = 0;
    bool ok = true;
    struct dirent *e;
    while (ok && (e = readdir(d))) {
        if (!is_plugin_file_name(e->d_name)) continue;
        char **nn = realloc(names, (n + 1) * sizeof *nn);
        if (!nn || !(nn[n] = strdup(e->d_name))) {
            if (nn) names = nn;
            ok = false;
            break;
        }
        names = nn;
        n++;
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n; i++) {
        if (ok) {
            size_t len = strlen(dir) + strlen(names[i]) + 2;
            char *path = malloc(len);
            if (!path) {
                ok = false;
            } else {
                snprintf(path, len, "%s/%s", dir, names[i]);
                ok = push_pending(reg, path);
                free(path);
            }
        }
        free(names[i]);
    }
    free(names);
    return ok;
}

tf_status tf_registry_scan(tf_registry **out, const char *const *dirs, size_t ndirs, tf_error *err)
{
    tf_status st = tf_registry_index(out, dirs, ndirs, err);
    if (st == TF_OK && (st = tf_registry_load_all(*out, false, err)) != TF_OK) {
        tf_registry_free(*out);
        *out = NULL;
    }
    return st;
}

/* In a child: load and check path as consider_file does, report success
 * with one byte on fd, and end without running atexit handlers. */
static _Noreturn void try_in_child(const char *path, int fd)
{
    tf_registry *r = calloc(1, sizeof *r);
    bool loaded = r && consider_file(r, path, base_name(path));
    char ok = 1;
    if (loaded && write(fd, &ok, 1) != 1) _exit(1);
    _exit(0);
}

/* Load path in a child first; false with why filled when the child died. */
static bool survives_loading(const char *path, char *why, size_t n)
{
    int fds[2];
    if (pipe(fds) != 0) return true; /* cannot isolate: load it here as before */
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return true;
    }
    if (pid == 0) {
        close(fds[0]);
        /* the plugin's own fate, not a handler's: a sanitizer's SIGSEGV handler
         * would turn the crash into an exit status */
        static const int fatal[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
        for (size_t i = 0; i < sizeof fatal / sizeof fatal[0]; i++) signal(fatal[i], SIG_DFL);
        try_in_child(path, fds[1]);
    }
    close(fds[1]);
    char b = 0;
    ssize_t got;
    do got = read(fds[0], &b, 1);
    while (got < 0 && errno == EINTR);
    close(fds[0]);
    int ws = 0;
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {}
    if (got == 1) return true;
    if (WIFSIGNALED(ws))
        snprintf(why, n, "crashed while loading (signal %d, %s)", WTERMSIG(ws), strsignal(WTERMSIG(ws)));
    else
        snprintf(why, n, "ended the process while loading (exit status %d, from a constructor or its "
                         "entry)", WIFEXITED(ws) ? WEXITSTATUS(ws) : -1);
    return false;
}

tf_status tf_registry_load_all(tf_registry *reg, bool isolate, tf_error *err)
{
    /* Isolation forks: every child is forked before anything is loaded
     * here, so the parent has no plugin threads (OpenMP, BLAS) at fork time. */
    bool ok = true;
    if (isolate) {
        for (size_t i = 0; ok && i < reg->npending;) {
            char why[256];
            if (survives_loading(reg->pending[i], why, sizeof why)) {
                i++;
                continue;
            }
            ok = push_rejected(reg, reg->pending[i], why);
            free(reg->pending[i]);
            memmove(&reg->pending[i], &reg->pending[i + 1], (reg->npending - i - 1) * sizeof *reg->pending);
            reg->npending--;
        }
    }
    while (ok && reg->npending) ok = consider_pending(reg, 0);
    return ok ? TF_OK : tf_error_set(err, TF_ERR_RUNTIME, "out of memory loading plugins");
}

tf_status tf_registry_index(tf_registry **out, const char *const *dirs, size_t ndirs, tf_error *err)
{
    *out = NULL;
    tf_registry *reg = calloc(1, sizeof *reg);
    if (!reg) return tf_error_set(err, TF_ERR_RUNTIME, "out of memory scanning for plugins");
    reg->searched = calloc(ndirs ? ndirs : 1, sizeof *reg->searched);
    if (!reg->searched) goto oom;
    for (size_t i = 0; i < ndirs; i++) {
        if (!(reg->searched[i] = strdup(dirs[i]))) goto oom;
        reg->nsearched++;
        if (!scan_dir(reg, dirs[i])) goto oom;
    }
    /* one slot per candidate: found plugins never move (callers keep pointers) */
    if (!(reg->found = calloc(reg->npending ? reg->npending : 1, sizeof *reg->found))) goto oom;
    *out = reg;
    return TF_OK;
oom:
    tf_registry_free(reg);
    return tf_error_set(err, TF_ERR_RUNTIME, "out of memory scanning for plugins");
}

void tf_registry_free(tf_registry *reg)
{
    if (!reg) return;
    for (size_t i = 0; i < reg->nfound; i++) {
        free(reg->found[i].path);
        /* Plugins stay mapped until exit: objects they created (and their
         * atexit/TLS destructors) may outlive the registry. */
    }
    for (size_t i = 0; i < reg->nrejected; i++) {
        free(reg->rejected[i].path);
        free(reg->rejected[i].why);
    }
    for (size_t i = 0; i < reg->nsearched; i++) free(reg->searched[i]);
    for (size_t i = 0; i < reg->npending; i++) free(reg->pending[i]);
    free(reg->pending);
    free(reg->found);
    free(reg->rejected);
    free(reg->searched);
    free(reg);
}

const tf_loaded_plugin *tf_registry_find(const tf_registry *reg, uint32_t kind, const char *name)
{
    for (size_t i = 0; reg && name && i < reg->nfound; i++)
        if (reg->found[i].desc->kind == kind && strcmp(reg->found[i].desc->name, name) == 0)
            return &reg->found[i];
    return NULL;
}

/* Append s to buf[n] at *len, truncating safely. */
static void append(char *buf, size_t n, size_t *len, const char *s)
{
    if (*len >= n - 1) return;
    int w = snprintf(buf + *len, n - *len, "%s", s);
    if (w > 0) *len += (size_t)w < n - *len ? (size_t)w : n - *len - 1;
}

tf_status tf_registry_require(tf_registry *reg, uint32_t kind, const char *name,
                              const char *asked_by, const tf_loaded_plugin **out, tf_error *err)
{
    const char *kname = tf_kind_name(kind);
    const char *by = asked_by ? asked_by : "tfcore";
    *out = NULL;
    char file[128];
    snprintf(file, sizeof file, "tfcore-%s-%s.so", kname ? kname : "?", name ? name : "");
    /* load the candidates with this file name, in search order, until one is found */
    for (size_t i = 0; !tf_registry_find(reg, kind, name) && i < reg->npending;) {
        if (strcmp(base_name(reg->pending[i]), file) != 0) {
            i++;
            continue;
        }
        if (!consider_pending(reg, i)) return tf_error_set(err, TF_ERR_RUNTIME, "out of memory loading plugins");
    }
    const tf_loaded_plugin *p = tf_registry_find(reg, kind, name);
    if (p && p->usable) {
        *out = p;
        return TF_OK;
    }
    if (p)
        return tf_error_set(err, TF_ERR_PLUGIN, "%s: %s plugin '%s' cannot run here: %s (%s)", by,
                            kname, name, p->why, p->path);
    for (size_t i = 0; i < reg->nrejected; i++) {
        const char *slash = strrchr(reg->rejected[i].path, '/');
        const char *base = slash ? slash + 1 : reg->rejected[i].path;
        if (strcmp(base, file) == 0)
            return tf_error_set(err, TF_ERR_PLUGIN, "%s: %s plugin '%s' was rejected: %s", by, kname,
                                name, reg->rejected[i].why);
    }
    /* Not seen at all: say what exists and where we looked. */
    char have[512] = "", where[512] = "";
    size_t hl = 0, wl = 0;
    const char *names[64];
    size_t nnames = 0;
    for (size_t i = 0; i < reg->nfound; i++) {
        if (reg->found[i].desc->kind != kind) continue;
        if (nnames < 64) names[nnames++] = reg->found[i].desc->name;
        append(have, sizeof have, &hl, hl ? ", " : "");
        append(have, sizeof have, &hl, reg->found[i].desc->name);
    }
    /* the candidates not loaded, by their file names: tfcore-<kind>-<name>.so */
    char prefix[64];
    snprintf(prefix, sizeof prefix, "tfcore-%s-", kname);
    char pend_names[64][TF_PLUGIN_NAME_MAX + 1];
    for (size_t i = 0; i < reg->npending && nnames < 64; i++) {
        const char *b = base_name(reg->pending[i]);
        size_t pl = strlen(prefix), bl = strlen(b);
        if (strncmp(b, prefix, pl) != 0 || bl - pl - 3 > TF_PLUGIN_NAME_MAX) continue;
        char *nm = pend_names[nnames];
        snprintf(nm, TF_PLUGIN_NAME_MAX + 1, "%.*s", (int)(bl - pl - 3), b + pl);
        if (!tf_plugin_name_valid(nm)) continue;
        names[nnames++] = nm;
        append(have, sizeof have, &hl, hl ? ", " : "");
        append(have, sizeof have, &hl, nm);
    }
    for (size_t i = 0; i < reg->nsearched; i++) {
        append(where, sizeof where, &wl, i ? ":" : "");
        append(where, sizeof where, &wl, reg->searched[i]);
    }
    const char *close = tf_closest(name, names, nnames);
    char hint[96] = "";
    if (close) snprintf(hint, sizeof hint, " (did you mean '%s'?)", close);
    return tf_error_set(err, TF_ERR_PLUGIN,
                        "%s: no %s plugin named '%s'%s; %s plugins found: %s; searched %s", by, kname,
                        name, hint, kname, hl ? have : "none", wl ? where : "nothing");
}

tf_status tf_registry_index_default(tf_registry **out, const char *config_path, tf_error *err)
{
    char lib_dir[PATH_MAX];
    tf_search_path sp;
    tf_status st = tf_search_path_build(&sp, config_path,
                                        tf_libtfcore_dir(lib_dir, sizeof lib_dir) ? lib_dir : NULL, err);
    if (st) return st;
    st = tf_registry_index(out, (const char *const *)sp.dirs, sp.n, err);
    tf_search_path_free(&sp);
    return st;
}
