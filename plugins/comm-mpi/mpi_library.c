/* mpi_library.c — the MPI library as a loaded object: where it is, making its
 * symbols global, its version, and whether it takes device pointers.
 *
 * Why the promotion: tfcore dlopen()s plugins with RTLD_LOCAL, so libmpi (a
 * dependency of this plugin) is loaded into the plugin's private scope. Open
 * MPI 4 then dlopen()s its own components (mca_*.so), which are not linked
 * against libmpi / libopen-pal and expect those symbols in the global scope;
 * they fail with "undefined symbol" and MPI_Init aborts. dlopen() of the
 * already-loaded library with RTLD_NOLOAD | RTLD_GLOBAL moves it (and the
 * libraries it depends on) into the global scope without loading anything;
 * RTLD_NODELETE keeps it mapped after the registry dlclose()s the plugin,
 * since Open MPI leaves exit handlers behind. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "comm_mpi.h" /* mpi.h first: mpi-ext.h builds on it */

#if defined(__has_include)
#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif
#endif

/* dladdr on a function MPI defines names the object it came from. */
tf_status cm_library_path(char *out, size_t n, tf_error *err)
{
    Dl_info info;
    void *addr = (void *)MPI_Init;
    if (!dladdr(addr, &info) || !info.dli_fname || !info.dli_fname[0])
        return tf_error_set(err, TF_ERR_PLUGIN,
                            "comm-mpi: cannot tell which shared object defines MPI_Init "
                            "(dladdr failed), so libmpi cannot be made global");
    snprintf(out, n, "%s", info.dli_fname);
    return TF_OK;
}

static tf_status promote_status = TF_OK;
static char promote_msg[TF_ERROR_MSG_MAX];
static pthread_once_t promote_once = PTHREAD_ONCE_INIT;

static void promote(void)
{
    char path[4096];
    tf_error e = {0};
    if ((promote_status = cm_library_path(path, sizeof path, &e))) {
        snprintf(promote_msg, sizeof promote_msg, "%s", e.msg);
        return;
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD | RTLD_NODELETE);
    if (!h) {
        const char *why = dlerror();
        promote_status = TF_ERR_PLUGIN;
        snprintf(promote_msg, sizeof promote_msg,
                 "comm-mpi: cannot make %.600s global (needed by Open MPI's components): %.300s", path,
                 why ? why : "unknown dlopen error");
        return;
    }
    /* The handle stays open for the life of the process: libmpi is never unloaded. */
}

tf_status cm_library_promote(tf_error *err)
{
    pthread_once(&promote_once, promote);
    if (promote_status) return tf_error_set(err, promote_status, "%s", promote_msg);
    return TF_OK;
}

void cm_library_version(char *out, size_t n)
{
    char v[MPI_MAX_LIBRARY_VERSION_STRING];
    int len = 0;
    if (MPI_Get_library_version(v, &len) != MPI_SUCCESS || len <= 0) {
        snprintf(out, n, "an MPI %d.%d library", MPI_VERSION, MPI_SUBVERSION);
        return;
    }
    v[len < MPI_MAX_LIBRARY_VERSION_STRING ? len : MPI_MAX_LIBRARY_VERSION_STRING - 1] = '\0';
    /* "Open MPI v4.1.4, package: Debian OpenMPI, ident: ..." -> "Open MPI v4.1.4" */
    v[strcspn(v, ",\n")] = '\0';
    snprintf(out, n, "%s", v);
}

/* Open MPI reports CUDA support at run time through its "cuda" extension;
 * the header's MPIX_CUDA_AWARE_SUPPORT only says how the headers were built,
 * so the run-time answer wins whenever the extension is there. */
bool cm_library_cuda_aware(void)
{
#if defined(OMPI_HAVE_MPI_EXT_CUDA) && OMPI_HAVE_MPI_EXT_CUDA
    return MPIX_Query_cuda_support() == 1;
#elif defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
    return true;
#else
    return false;
#endif
}
