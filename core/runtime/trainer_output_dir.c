/* trainer_output_dir.c — what a run does to its output_dir besides
 * checkpoints: refusing to train over a previous run (overwrite_output_dir),
 * tidying what an interrupted run left, choosing the live log, and putting
 * the final model and results.json in place as one set.
 *
 * The final set is written into .final-set.tmp-<pid>/, renamed to
 * .final-set.ready-<pid>/ once complete, and then moved in: first every
 * file it replaces is moved into .final-set.old-<pid>/, then every new file
 * into output_dir, then the old ones are removed. A run that finds a
 * .final-set.ready-* folder finishes moving it in (the set was complete),
 * so output_dir ends with all of one set, never a mix. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tfcore/file.h"
#include "tfcore/log.h"
#include "trainer_internal.h"

#define LOG_NAME "log.jsonl"
#define LOG_NEW "log.jsonl.new" /* this run's log while the previous run's is kept */

/* checkpoint-<digits> */
static bool is_checkpoint_name(const char *name)
{
    return strncmp(name, "checkpoint-", 11) == 0 && name[11] && strspn(name + 11, "0123456789") == strlen(name + 11);
}

tf_status tf_output_dir_check(const tf_training_args *a, tf_error *err)
{
    if (a->overwrite_output_dir || a->resume_from_checkpoint) return TF_OK;
    DIR *d = opendir(a->output_dir);
    if (!d) return TF_OK; /* nothing there yet (or not a folder: creating it will say) */
    static const char *const run_files[] = {"results.json", LOG_NAME, LOG_NEW, "model.safetensors"};
    char found[256] = "";
    struct dirent *e;
    while (!found[0] && (e = readdir(d))) {
        for (size_t i = 0; i < sizeof run_files / sizeof run_files[0]; i++)
            if (strcmp(e->d_name, run_files[i]) == 0) snprintf(found, sizeof found, "%s", e->d_name);
        if (is_checkpoint_name(e->d_name)) snprintf(found, sizeof found, "%s", e->d_name);
    }
    closedir(d);
    if (!found[0]) return TF_OK;
    if (!a->do_train) /* evaluation only (tfcore eval): its results.json would replace the run's */
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s already holds a previous run (%s) whose results.json an evaluation would replace; "
                            "choose another training.output_dir (-o training.output_dir=DIR) or set "
                            "training.overwrite_output_dir = true",
                            a->output_dir, found);
    return tf_error_set(err, TF_ERR_CONFIG,
                        "%s already holds a previous run (%s); set training.overwrite_output_dir = true to train "
                        "over it, training.resume_from_checkpoint = \"last\" to continue it, or choose another "
                        "training.output_dir",
                        a->output_dir, found);
}

/* ".final-set.<what>-<digits>" */
static bool is_set_folder(const char *name, const char *what)
{
    char prefix[64];
    int n = snprintf(prefix, sizeof prefix, ".final-set.%s-", what);
    return strncmp(name, prefix, (size_t)n) == 0 && name[n] && strspn(name + n, "0123456789") == strlen(name + n);
}

/* Move every entry of folder `from` (open as ffd) into dfd under the same name. */
static tf_status move_all_in(int ffd, const char *from, int dfd, const char *to, tf_error *err)
{
    int lfd = dup(ffd);
    DIR *d = lfd >= 0 ? fdopendir(lfd) : NULL;
    if (!d) {
        if (lfd >= 0) close(lfd);
        return tf_error_set(err, TF_ERR_RUNTIME, "cannot list %s: %s", from, strerror(errno));
    }
    tf_status st = TF_OK;
    struct dirent *e;
    while (!st && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (renameat(ffd, e->d_name, dfd, e->d_name) != 0)
            st = tf_error_set(err, TF_ERR_RUNTIME, "cannot move %s/%s into %s: %s", from, e->d_name, to,
                              strerror(errno));
    }
    closedir(d);
    return st;
}

/* What an interrupted run left: aside folders (tf_file_tidy_dir), partial
 * checkpoint-N.tmp folders, and a final set caught half-way in. */
static tf_status tidy(tf_trainer *t, tf_error *err)
{
    const char *out = t->output_dir;
    int n = 0;
    tf_status st = tf_file_tidy_dir(out, &n, err);
    if (st) return st;
    int dfd = open(out, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return tf_error_set(err, TF_ERR_RUNTIME, "cannot open %s: %s", out, strerror(errno));
    int lfd = dup(dfd);
    DIR *d = lfd >= 0 ? fdopendir(lfd) : NULL;
    if (!d) {
        if (lfd >= 0) close(lfd);
        close(dfd);
        return tf_error_set(err, TF_ERR_RUNTIME, "cannot list %s: %s", out, strerror(errno));
    }
    char **names = NULL;
    size_t count = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        bool partial = strncmp(e->d_name, "checkpoint-", 11) == 0 && len > 4 && !strcmp(e->d_name + len - 4, ".tmp");
        if (!partial && !is_set_folder(e->d_name, "tmp") && !is_set_folder(e->d_name, "ready") &&
            !is_set_folder(e->d_name, "old"))
            continue;
        char **g = realloc(names, (count + 1) * sizeof *g);
        if (!g || !(g[count] = strdup(e->d_name))) {
            names = g ? g : names;
            st = tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", out);
            break;
        }
        names = g;
        count++;
    }
    closedir(d);
    char path[8400];
    /* a complete set that was being moved in goes in first, then the rest is removed */
    for (size_t i = 0; !st && i < count; i++) {
        if (!is_set_folder(names[i], "ready")) continue;
        snprintf(path, sizeof path, "%s/%s", out, names[i]);
        int rfd = openat(dfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (rfd < 0) continue; /* not a folder: removed below as a stray entry */
        st = move_all_in(rfd, path, dfd, out, err);
        close(rfd);
        if (!st && faccessat(dfd, LOG_NEW, F_OK, AT_SYMLINK_NOFOLLOW) == 0 && renameat(dfd, LOG_NEW, dfd, LOG_NAME) != 0)
            st = tf_error_set(err, TF_ERR_RUNTIME, "cannot rename %s/%s to %s: %s", out, LOG_NEW, LOG_NAME,
                              strerror(errno));
        if (!st) tf_warn("%s: finished putting in the final model and results of an interrupted run", out);
    }
    for (size_t i = 0; !st && i < count; i++) {
        snprintf(path, sizeof path, "%s/%s", out, names[i]);
        st = tf_file_remove_tree(path, err);
        n++;
    }
    for (size_t i = 0; i < count; i++) free(names[i]);
    free(names);
    close(dfd);
    if (!st && n) tf_info("%s: tidied %d folder%s an interrupted run left", out, n, n == 1 ? "" : "s");
    return st;
}

tf_status tf_output_dir_prepare(tf_trainer *t, tf_error *err)
{
    tf_status st = tf_mkdirs(t->output_dir, err);
    if (!st) st = tidy(t, err);
    if (st) return st;
    /* The previous run's log stays until this run's final set replaces it;
     * a resumed run appends to the log of the run it continues. */
    char path[4096], newer[4096];
    snprintf(path, sizeof path, "%s/%s", t->output_dir, LOG_NAME);
    snprintf(newer, sizeof newer, "%s/%s", t->output_dir, LOG_NEW);
    struct stat sb;
    const char *use = path;
    if (t->args->resume_from_checkpoint ? lstat(newer, &sb) == 0 : lstat(path, &sb) == 0) use = newer;
    if (!(t->log_path = strdup(use))) return tf_error_set(err, TF_ERR_RUNTIME, "out of memory");
    if (use == newer && !t->args->resume_from_checkpoint)
        tf_info("%s is the previous run's and stays until this run's final save; logging to %s", path, newer);
    return TF_OK;
}

/* Move the complete set in folder `ready` (open as rfd) into output_dir
 * (dfd): replaced files into `old` first, then the new ones, then the old
 * ones are removed. On failure everything moved is moved back. */
static tf_status move_set_in(tf_trainer *t, int dfd, int rfd, const char *ready, const char *old, tf_error *err)
{
    const char *out = t->output_dir;
    bool log_new = t->log_path && strcmp(strrchr(t->log_path, '/') + 1, LOG_NEW) == 0;
    int lfd = dup(rfd);
    DIR *d = lfd >= 0 ? fdopendir(lfd) : NULL;
    if (!d) {
        if (lfd >= 0) close(lfd);
        return tf_error_set(err, TF_ERR_RUNTIME, "cannot list %s: %s", ready, strerror(errno));
    }
    char **names = NULL;
    size_t n = 0;
    tf_status st = TF_OK;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char **g = realloc(names, (n + 2) * sizeof *g);
        if (!g || !(g[n] = strdup(e->d_name))) {
            names = g ? g : names;
            st = tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", ready);
            break;
        }
        names = g;
        n++;
    }
    closedir(d);
    if (!st && log_new) { /* this run's log joins the set under its own name */
        char **g = realloc(names, (n + 1) * sizeof *g);
        if (g) names = g;
        if (!g || !(names[n] = strdup(LOG_NAME))) st = tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", ready);
        else n++;
    }
    int ofd = -1;
    if (!st && mkdirat(dfd, strrchr(old, '/') + 1, 0777) != 0)
        st = tf_error_set(err, TF_ERR_RUNTIME, "cannot create %s: %s", old, strerror(errno));
    if (!st) ofd = openat(dfd, strrchr(old, '/') + 1, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (!st && ofd < 0) st = tf_error_set(err, TF_ERR_RUNTIME, "cannot open %s: %s", old, strerror(errno));
    size_t aside = 0, moved = 0; /* names[0..aside) were moved into old, names[0..moved) in */
    bool *had = calloc(n ? n : 1, sizeof *had);
    if (!st && !had) st = tf_error_set(err, TF_ERR_RUNTIME, "%s: out of memory", ready);
    for (; !st && aside < n; aside++) {
        struct stat sb;
        had[aside] = fstatat(dfd, names[aside], &sb, AT_SYMLINK_NOFOLLOW) == 0;
        if (had[aside] && renameat(dfd, names[aside], ofd, names[aside]) != 0)
            st = tf_error_set(err, TF_ERR_RUNTIME, "cannot move %s/%s aside: %s", out, names[aside], strerror(errno));
    }
    for (; !st && moved < n; moved++) {
        bool is_log = log_new && moved == n - 1;
        int from = is_log ? dfd : rfd;
        const char *src = is_log ? LOG_NEW : names[moved];
        if (renameat(from, src, dfd, names[moved]) != 0)
            st = tf_error_set(err, TF_ERR_RUNTIME, "cannot move %s into %s: %s", names[moved], out, strerror(errno));
    }
    if (st) { /* undo: the new ones back, the old ones back in place */
        for (size_t i = 0; i < moved; i++) {
            bool is_log = log_new && i == n - 1;
            renameat(dfd, names[i], is_log ? dfd : rfd, is_log ? LOG_NEW : names[i]);
        }
        for (size_t i = 0; i < aside && ofd >= 0; i++)
            if (had[i]) renameat(ofd, names[i], dfd, names[i]);
    } else if (fsync(dfd) != 0) {
        st = tf_error_set(err, TF_ERR_RUNTIME, "%s: the final set is in place, but flushing the folder failed: %s", out,
                          strerror(errno));
    }
    if (!st && log_new) {
        free(t->log_path);
        size_t len = strlen(out) + sizeof LOG_NAME + 1;
        if ((t->log_path = malloc(len))) snprintf(t->log_path, len, "%s/%s", out, LOG_NAME);
    }
    if (ofd >= 0) close(ofd);
    free(had);
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return st;
}

tf_status tf_output_dir_final_begin(tf_trainer *t, char *set_dir, size_t cap, tf_error *err)
{
    if ((size_t)snprintf(set_dir, cap, "%s/.final-set.tmp-%ld", t->output_dir, (long)getpid()) >= cap)
        return tf_error_set(err, TF_ERR_RUNTIME, "output_dir name too long: %s", t->output_dir);
    tf_status st = tf_file_remove_tree(set_dir, err);
    if (!st) st = tf_mkdirs(set_dir, err);
    return st;
}

tf_status tf_output_dir_final_commit(tf_trainer *t, const char *set_dir, tf_error *err)
{
    char ready[4200], old[4200];
    snprintf(ready, sizeof ready, "%s/.final-set.ready-%ld", t->output_dir, (long)getpid());
    snprintf(old, sizeof old, "%s/.final-set.old-%ld", t->output_dir, (long)getpid());
    tf_status st = tf_file_remove_tree(ready, err);
    if (!st) st = tf_file_remove_tree(old, err);
    if (st) return st;
    if (rename(set_dir, ready) != 0)
        return tf_error_set(err, TF_ERR_RUNTIME, "cannot rename %s to %s: %s", set_dir, ready, strerror(errno));
    int dfd = open(t->output_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rfd = open(ready, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0 || rfd < 0) {
        st = tf_error_set(err, TF_ERR_RUNTIME, "cannot open %s: %s", dfd < 0 ? t->output_dir : ready, strerror(errno));
    } else {
        st = move_set_in(t, dfd, rfd, ready, old, err);
    }
    if (rfd >= 0) close(rfd);
    if (dfd >= 0) close(dfd);
    if (st) { /* the complete new set stays in its folder (the next run moves it in); the old one is back */
        tf_error_prefix(err, "the final model stays in %s", ready);
        return st;
    }
    st = tf_file_remove_tree(ready, err); /* empty now */
    if (!st) st = tf_file_remove_tree(old, err);
    return st;
}
