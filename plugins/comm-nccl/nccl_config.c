/* nccl_config.c — comm-nccl's own keys of the comm section. The core owns
 * plugin, world_size, bucket_mb and mpirun_args: they are neither read nor
 * judged here. */
#include <string.h>

#include "nccl_internal.h"

const char *nccl_boot_name(nccl_boot_kind k)
{
    switch (k) {
    case NCCL_BOOT_AUTO: return "auto";
    case NCCL_BOOT_LAUNCHER: return "launcher";
    case NCCL_BOOT_MPI: return "mpi";
    case NCCL_BOOT_FILE: return "file";
    }
    return "?";
}

/* A token is written on one line of the bootstrap file and compared byte for
 * byte: printable ASCII without spaces. */
bool nccl_token_valid(const char *t)
{
    size_t n = strlen(t);
    if (n == 0 || n > NCCL_TOKEN_MAX) return false;
    for (size_t i = 0; i < n; i++)
        if (t[i] <= ' ' || t[i] > '~') return false;
    return true;
}

tf_status nccl_read_options(tf_section *sec, nccl_options *o, tf_error *err)
{
    memset(o, 0, sizeof *o);
    o->bootstrap = NCCL_BOOT_AUTO;
    o->bootstrap_timeout_s = 300.0;
    o->timeout_s = TF_COMM_TIMEOUT_DEFAULT;
    if (!sec) return TF_OK;

    const char *sname = tf_section_name(sec);
    static const char *const boots[] = {"auto", "launcher", "mpi", "file", NULL};
    const char *boot = NULL, *rdt = NULL;
    tf_status st;
    if ((st = tf_cfg_choice(sec, "bootstrap", "auto", boots, &boot, err))) return st;
    if ((st = tf_cfg_string(sec, "bootstrap_file", NULL, &o->bootstrap_file, err))) return st;
    if ((st = tf_cfg_string(sec, "bootstrap_token", NULL, &o->bootstrap_token, err))) return st;
    if ((st = tf_cfg_float(sec, "bootstrap_timeout_s", 300.0, 0.1, 604800.0,
                           &o->bootstrap_timeout_s, err)))
        return st;
    /* the core's key (tfcore/comm.h), read with its bounds: this plugin waits in its own loops */
    if ((st = tf_cfg_float(sec, "timeout_s", TF_COMM_TIMEOUT_DEFAULT, TF_COMM_TIMEOUT_MIN,
                           TF_COMM_TIMEOUT_MAX, &o->timeout_s, err)))
        return st;
    if ((st = tf_cfg_string(sec, "reduce_dtype", "f32", &rdt, err))) return st;

    for (int k = NCCL_BOOT_AUTO; k <= NCCL_BOOT_FILE; k++)
        if (strcmp(boot, nccl_boot_name((nccl_boot_kind)k)) == 0) o->bootstrap = (nccl_boot_kind)k;

    if (strcmp(rdt, "f32") != 0)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: %s.reduce_dtype must be \"f32\", got \"%s\" (comm-nccl reduces "
                            "and averages gradients in fp32 only)",
                            tf_cfg_where(sec, "reduce_dtype"), sname, rdt);
    if (o->bootstrap == NCCL_BOOT_MPI && !nccl_mpi_built())
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: %s.bootstrap = \"mpi\" but this comm-nccl was built without "
                            "Open MPI (configure found no mpicc/mpi.h)",
                            tf_cfg_where(sec, "bootstrap"), sname);
    if (o->bootstrap_file && o->bootstrap_file[0] == '\0')
        return tf_error_set(err, TF_ERR_CONFIG, "%s: %s.bootstrap_file is empty",
                            tf_cfg_where(sec, "bootstrap_file"), sname);
    if (o->bootstrap == NCCL_BOOT_FILE && !o->bootstrap_file)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: %s.bootstrap = \"file\" needs %s.bootstrap_file (a path on a "
                            "filesystem every node shares)",
                            tf_cfg_where(sec, "bootstrap"), sname, sname);
    bool file_possible = o->bootstrap == NCCL_BOOT_FILE || o->bootstrap == NCCL_BOOT_AUTO;
    if (o->bootstrap_file && !file_possible)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: %s.bootstrap_file is only used with bootstrap = \"file\" or "
                            "\"auto\", not \"%s\"",
                            tf_cfg_where(sec, "bootstrap_file"), sname, boot);
    if (o->bootstrap_token && !file_possible)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: %s.bootstrap_token is only used with bootstrap = \"file\" or "
                            "\"auto\", not \"%s\"",
                            tf_cfg_where(sec, "bootstrap_token"), sname, boot);
    if (o->bootstrap_token && !nccl_token_valid(o->bootstrap_token))
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: %s.bootstrap_token must be 1 to %d printable characters "
                            "without spaces (got %zu bytes)",
                            tf_cfg_where(sec, "bootstrap_token"), sname, NCCL_TOKEN_MAX,
                            strlen(o->bootstrap_token));
    return TF_OK;
}
