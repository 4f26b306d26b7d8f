/* cli_launch.c — what the tfcore command tells the launcher (launch.h) when a
 * verb runs a job: each worker process re-executes this program with the
 * verb's own command line (as torchrun re-runs its script), and a job that
 * needs more devices than this machine has, or a plugin that cannot run here,
 * gets a config of the same folder that runs on the CPU as advice. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli_launch.h"

/* Path of this executable, to re-execute. */
static tf_status self_exe(char *out, size_t n, tf_error *err)
{
    ssize_t len = readlink("/proc/self/exe", out, n - 1);
    if (len <= 0 || (size_t)len >= n - 1)
        return tf_error_set(err, TF_ERR_RUNTIME, "cannot find the tfcore executable (/proc/self/exe): %s",
                            strerror(errno));
    out[len] = '\0';
    return TF_OK;
}

/* A config in the same folder as config_file that runs on the CPU (the
 * comparison's cpu_*.cfg, else quickstart.cfg), into out[n]; "" for none. */
static void suggest_cpu_config(const char *config_file, char *out, size_t n)
{
    out[0] = '\0';
    if (!config_file) return;
    char dir[PATH_MAX];
    const char *slash = strrchr(config_file, '/');
    if (slash)
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - config_file), config_file);
    else
        snprintf(dir, sizeof dir, ".");
    DIR *d = opendir(dir[0] ? dir : "/");
    if (!d) return;
    char best[256] = "";
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *name = de->d_name;
        size_t len = strlen(name);
        if (len < 5 || strcmp(name + len - 4, ".cfg") != 0) continue;
        bool cpu = strncmp(name, "cpu_", 4) == 0, quick = strcmp(name, "quickstart.cfg") == 0;
        if (!cpu && !quick) continue;
        if (!best[0] || (cpu && (strncmp(best, "cpu_", 4) != 0 || strcmp(name, best) < 0)))
            snprintf(best, sizeof best, "%s", name);
    }
    closedir(d);
    if (best[0]) snprintf(out, n, "%s/%s", slash ? dir : ".", best);
}

void tf_cli_hint_cpu_config(const char *config_file, tf_error *err)
{
    char cpu[PATH_MAX + 260]; /* a folder and a file name */
    suggest_cpu_config(config_file, cpu, sizeof cpu);
    if (!err || !cpu[0] || (config_file && strcmp(cpu, config_file) == 0)) return;
    size_t len = strlen(err->msg);
    snprintf(err->msg + len, sizeof err->msg - len, "; on this machine run %.300s instead", cpu);
}

tf_launch_cmd tf_cli_launch_cmd(int argc, char **argv)
{
    return (tf_launch_cmd){.program = self_exe, .argc = argc, .argv = argv, .short_of_devices = tf_cli_hint_cpu_config};
}
