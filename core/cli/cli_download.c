/* cli_download.c — `tfcore download NAME... [--revision R]` and
 * `tfcore download -c FILE [-o k=v]...`: fetch models by hub name (given, or
 * the config's model.pretrained / model.revision) into the Hugging Face cache,
 * and datasets by name ("imdb", "squad", "squad_v2", given or the config's
 * data.path) into tfcore's cache (for a login node with internet; compute
 * nodes then run with HF_HUB_OFFLINE=1), and print each folder, one per line. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "tfcore/config.h"
#include "tfcore/dataset_fetch.h"
#include "tfcore/hub.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: tfcore download NAME [NAME...] [--revision R]\n"
            "       tfcore download -c FILE [-o section.key=value]...\n"
            "\n"
            "Download Hugging Face models (\"bert-base-cased\", \"org/name\") into the cache that\n"
            "huggingface_hub and transformers share, and the datasets imdb, squad and squad_v2\n"
            "into tfcore's cache; print each folder. A config's model.pretrained = \"NAME\" and\n"
            "data.path = \"imdb\" (\"squad\", \"squad_v2\") then resolve from the caches, also offline.\n"
            "\n"
            "  --revision R   branch, tag or commit (default main), for every model NAME\n"
            "  -c FILE        fetch what the config names: model.pretrained (when it is a hub\n"
            "                 name, not a folder) at model.revision, and data.path when it is a\n"
            "                 dataset name (with data.url / data.sha256, train_sha256 and\n"
            "                 validation_sha256); -o overrides as for a run\n"
            "\n"
            "environment: HF_HUB_CACHE, HF_HOME (cache: default ~/.cache/huggingface/hub),\n"
            "  TFCORE_CACHE (datasets in $TFCORE_CACHE/datasets, default ~/.cache/tfcore/datasets),\n"
            "  HF_ENDPOINT (server), HF_TOKEN / HF_TOKEN_PATH (gated or private models),\n"
            "  TFCORE_HUB_TIMEOUT_S (connect / stall timeout, default 30),\n"
            "  TFCORE_HUB_RETRIES (retries on network errors and 5xx, default 4)\n"
            "exit codes: 0 all fetched, 1 network / disk, 2 usage, 3 bad name or environment,\n"
            "  5 no such model or file, access denied, bad checksum or server answer\n");
}

static int fetch(const char *name, const char *revision)
{
    char folder[TF_HUB_PATH_MAX];
    tf_error err = {0};
    tf_status st = tf_dataset_is_name(name) ? tf_dataset_fetch(name, NULL, folder, sizeof folder, &err)
                                            : tf_hub_resolve_model(name, revision, folder, sizeof folder, &err);
    if (st != TF_OK) return tf_cli_fail(&err);
    printf("%s\n", folder);
    fflush(stdout);
    return 0;
}

/* data.path when it is a dataset name and no local file has that name. */
static const char *config_dataset(tf_config *cfg)
{
    const char *name = NULL;
    tf_error err = {0};
    struct stat sb;
    if (!tf_config_has_section(cfg, "data") ||
        tf_cfg_string(tf_config_section(cfg, "data"), "path", NULL, &name, &err) != TF_OK || !name ||
        !tf_dataset_is_name(name) || stat(name, &sb) == 0)
        return NULL;
    return name;
}

/* The config's data.path when it names a dataset (and no local file of that
 * name exists), with the source keys the data plugins read. 0 when there is
 * nothing to fetch, else the exit code. */
static int fetch_config_data(tf_config *cfg)
{
    tf_error err = {0};
    if (!tf_config_has_section(cfg, "data")) return 0;
    tf_section *data = tf_config_section(cfg, "data");
    const char *name = NULL, *url = NULL, *sha[3] = {NULL, NULL, NULL};
    static const char *const sha_keys[] = {"sha256", "train_sha256", "validation_sha256"};
    if (tf_cfg_string(data, "path", NULL, &name, &err) != TF_OK ||
        tf_cfg_string(data, "url", NULL, &url, &err) != TF_OK)
        return tf_cli_fail(&err);
    for (int i = 0; i < 3; i++)
        if (tf_cfg_string(data, sha_keys[i], NULL, &sha[i], &err) != TF_OK) return tf_cli_fail(&err);
    if (!config_dataset(cfg)) return 0;
    tf_dataset_source src = {.size = sizeof src, .url = url,
                             .sha256 = {sha[0] ? sha[0] : sha[1], sha[0] ? NULL : sha[2]}};
    char folder[TF_HUB_PATH_MAX];
    if (tf_dataset_fetch(name, &src, folder, sizeof folder, &err) != TF_OK) {
        tf_error_prefix(&err, "%s: data.path '%s'", tf_cfg_where(data, "path"), name);
        return tf_cli_fail(&err);
    }
    printf("%s\n", folder);
    fflush(stdout);
    return 0;
}

/* What the config names: model.pretrained when it is a hub name. A folder or
 * a preset needs nothing; that is said on stderr and is not an error. */
static int fetch_config(const char *path, const char **overrides, int noverrides)
{
    tf_error err = {0};
    tf_config *cfg = NULL;
    if (tf_config_load(&cfg, path, &err) != TF_OK) return tf_cli_fail(&err);
    for (int i = 0; i < noverrides; i++)
        if (tf_config_override(cfg, overrides[i], &err) != TF_OK) {
            tf_config_free(cfg);
            return tf_cli_fail(&err);
        }
    int rc = 0;
    const char *pretrained = NULL, *revision = "main";
    tf_section *model = tf_config_has_section(cfg, "model") ? tf_config_section(cfg, "model") : NULL;
    if (model && tf_cfg_has(model, "pretrained") &&
        (tf_cfg_string(model, "pretrained", NULL, &pretrained, &err) != TF_OK ||
         tf_cfg_string(model, "revision", "main", &revision, &err) != TF_OK)) {
        rc = tf_cli_fail(&err);
    } else if (!pretrained) {
        if (!config_dataset(cfg))
            fprintf(stderr, "tfcore download: %s names no model.pretrained and no dataset: nothing to fetch\n",
                    path);
    } else {
        struct stat sb;
        if (stat(pretrained, &sb) == 0) {
            fprintf(stderr, "tfcore download: %s: model.pretrained '%s' is a local path: nothing to fetch\n",
                    tf_cfg_where(model, "pretrained"), pretrained);
        } else if (!tf_hub_is_repo_id(pretrained)) {
            tf_error_set(&err, TF_ERR_CONFIG, "%s: model.pretrained '%s': %s, and not a Hugging Face name",
                         tf_cfg_where(model, "pretrained"), pretrained, strerror(errno));
            rc = tf_cli_fail(&err);
        } else {
            char folder[TF_HUB_PATH_MAX];
            if (tf_hub_resolve_model(pretrained, revision, folder, sizeof folder, &err) != TF_OK) {
                tf_error_prefix(&err, "%s: model.pretrained '%s'", tf_cfg_where(model, "pretrained"),
                                pretrained);
                rc = tf_cli_fail(&err);
            } else {
                printf("%s\n", folder);
            }
        }
    }
    if (rc == 0) rc = fetch_config_data(cfg);
    tf_config_free(cfg);
    return rc;
}

int tf_cli_download(int argc, char **argv)
{
    const char *revision = "main";
    const char *names[256];
    const char *config = NULL;
    const char *overrides[256];
    int nnames = 0, noverrides = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(a, "-c") == 0 || strcmp(a, "--config") == 0) {
            if (i + 1 >= argc) return tf_cli_usage_error("download", "%s needs a file", a);
            if (config) return tf_cli_usage_error("download", "-c given twice");
            config = argv[++i];
        } else if (strcmp(a, "-o") == 0) {
            if (i + 1 >= argc) return tf_cli_usage_error("download", "-o needs section.key=value");
            if (noverrides == (int)(sizeof overrides / sizeof overrides[0]))
                return tf_cli_usage_error("download", "too many -o (at most 256)");
            overrides[noverrides++] = argv[++i];
        } else if (strcmp(a, "--revision") == 0) {
            if (i + 1 >= argc) return tf_cli_usage_error("download", "--revision needs a value");
            revision = argv[++i];
        } else if (strncmp(a, "--revision=", 11) == 0) {
            revision = a + 11;
        } else if (a[0] == '-') {
            return tf_cli_usage_error("download", "unknown option '%s'", a);
        } else {
            if (nnames == (int)(sizeof names / sizeof names[0]))
                return tf_cli_usage_error("download", "too many names (at most 256)");
            if (!tf_dataset_is_name(a) && !tf_hub_is_repo_id(a))
                return tf_cli_usage_error("download",
                                          "'%s' is neither a Hugging Face model name (org/name) nor a dataset "
                                          "(imdb, squad, squad_v2)",
                                          a);
            names[nnames++] = a;
        }
    }
    if (config && nnames) return tf_cli_usage_error("download", "give -c FILE or names, not both");
    if (noverrides && !config) return tf_cli_usage_error("download", "-o needs -c FILE");
    if (config) return fetch_config(config, overrides, noverrides);
    if (nnames == 0) return tf_cli_usage_error("download", "no model or dataset name given");
    if (!revision[0]) return tf_cli_usage_error("download", "--revision is empty");
    for (int i = 0; i < nnames; i++) {
        int rc = fetch(names[i], revision);
        if (rc) return rc;
    }
    return 0;
}
