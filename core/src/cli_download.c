/* cli_download.c — `tfcore download NAME... [--revision R]`: fetch models
 * by hub name into the Hugging Face cache (for a login node with internet;
 * compute nodes then run with HF_HUB_OFFLINE=1) and print each snapshot
 * folder, one per line. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "tfcore/hub.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: tfcore download NAME [NAME...] [--revision R]\n"
            "\n"
            "Download Hugging Face models (\"bert-base-cased\", \"org/name\") into the cache that\n"
            "huggingface_hub and transformers share, and print each snapshot folder.\n"
            "A config's model.pretrained = \"NAME\" then resolves from that cache, also offline.\n"
            "\n"
            "  --revision R   branch, tag or commit (default main), for every NAME\n"
            "\n"
            "environment: HF_HUB_CACHE, HF_HOME (cache: default ~/.cache/huggingface/hub),\n"
            "  HF_ENDPOINT (server), HF_TOKEN / HF_TOKEN_PATH (gated or private models),\n"
            "  TFCORE_HUB_TIMEOUT_S (connect / stall timeout, default 30),\n"
            "  TFCORE_HUB_RETRIES (retries on network errors and 5xx, default 4)\n"
            "exit codes: 0 all fetched, 1 network / disk, 2 usage, 3 bad name or environment,\n"
            "  5 no such model or file, access denied, bad checksum or server answer\n");
}

int tf_cli_download(int argc, char **argv)
{
    const char *revision = "main";
    const char *names[256];
    int nnames = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(a, "--revision") == 0) {
            if (i + 1 >= argc) return tf_cli_usage_error("download", "--revision needs a value");
            revision = argv[++i];
        } else if (strncmp(a, "--revision=", 11) == 0) {
            revision = a + 11;
        } else if (a[0] == '-') {
            return tf_cli_usage_error("download", "unknown option '%s'", a);
        } else {
            if (nnames == (int)(sizeof names / sizeof names[0]))
                return tf_cli_usage_error("download", "too many names (at most 256)");
            if (!tf_hub_is_repo_id(a))
                return tf_cli_usage_error("download", "'%s' is not a Hugging Face model name (org/name)", a);
            names[nnames++] = a;
        }
    }
    if (nnames == 0) return tf_cli_usage_error("download", "no model name given");
    if (!revision[0]) return tf_cli_usage_error("download", "--revision is empty");
    for (int i = 0; i < nnames; i++) {
        char folder[TF_HUB_PATH_MAX];
        tf_error err = {0};
        if (tf_hub_resolve_model(names[i], revision, folder, sizeof folder, &err) != TF_OK)
            return tf_cli_fail(&err);
        printf("%s\n", folder);
        fflush(stdout);
    }
    return 0;
}
