/* nccl_config.c — comm-nccl's own keys of the comm section, as one table
 * (tfcore/config_keys.h; README.md's key section is generated from it). The
 * core owns plugin, world_size, bucket_mb, zero_stage, mpirun_args and
 * timeout_s: they are not in the table, and this plugin never reads them
 * (timeout_s comes in tf_comm_init_args, comm_nccl.c). */
#include <string.h>

#include "nccl_internal.h"
#include "tfcore/config_keys.h"

static const char *const boots[] = {"auto", "launcher", "mpi", "file", NULL};

static const tf_cfg_key keys[] = {
    {"bootstrap", TF_CFG_KEY_CHOICE, .string_def = "auto", .choices = boots,
     .doc = "how ranks get rank 0's `ncclUniqueId` (see \"Bootstrap\"); mpi needs a comm-nccl built with Open MPI"},
    {"bootstrap_file", TF_CFG_KEY_STRING,
     .doc = "the file of the `file` bootstrap, on a filesystem every node shares; required with bootstrap = "
            "\"file\", used by `auto` when neither the launcher nor mpirun started the ranks"},
    {"bootstrap_token", TF_CFG_KEY_STRING, .default_text = "from the batch system",
     .doc = "this run's token in the bootstrap file: 1 to 128 printable characters, no spaces; with bootstrap "
            "\"file\" or \"auto\" only"},
    {"bootstrap_timeout_s", TF_CFG_KEY_FLOAT, .float_def = 300.0, .float_min = 0.1, .float_max = 604800.0,
     .doc = "how long a rank waits for the id, and for the other ranks to set up their GPU"},
    {"reduce_dtype", TF_CFG_KEY_STRING, .string_def = "f32",
     .doc = "the dtype gradients are reduced and averaged in: only \"f32\" (no bf16/fp16 gradient compression)"},
    {0},
};
TF_PLUGIN_KEYS(keys);

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
    const char *boot = NULL, *rdt = NULL;
    tf_status st;
    if ((st = tf_cfg_key_string(sec, keys, "bootstrap", &boot, err))) return st;
    if ((st = tf_cfg_key_string(sec, keys, "bootstrap_file", &o->bootstrap_file, err))) return st;
    if ((st = tf_cfg_key_string(sec, keys, "bootstrap_token", &o->bootstrap_token, err))) return st;
    if ((st = tf_cfg_key_float(sec, keys, "bootstrap_timeout_s", &o->bootstrap_timeout_s, err))) return st;
    if ((st = tf_cfg_key_string(sec, keys, "reduce_dtype", &rdt, err))) return st;

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
