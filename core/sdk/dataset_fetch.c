/* dataset_fetch.c — datasets by name in tfcore's cache (layout and contract
 * in tfcore/dataset_fetch.h): the known sources, the offline check, the lock,
 * and putting a fetched dataset in place complete and once. The bytes come
 * through the hub client's downloader (hub_download_url: libcurl, retries,
 * resume, sha256 before the rename); archives are unpacked by
 * archive_extract.c. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "archive_extract.h"
#include "hub_internal.h"
#include "tfcore/dataset_fetch.h"
#include "tfcore/file.h"
#include "tfcore/log.h"

#define MARKER ".tfcore-dataset"

typedef struct known_dataset {
    const char *name;
    const char *url;       /* imdb: the archive; squad: the folder of files[] */
    const char *sha256[2]; /* documented checksums, NULL where none is published */
    const char *files[2];  /* what is downloaded */
    const char *root;      /* for an archive: the folder it unpacks to; NULL: no archive */
} known_dataset;

static const known_dataset known[] = {
    {"imdb",
     "https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz",
     {"c40f74a18d3b61f90feba1e17730e0d38e8b97c05fde7008942e91923d1658fe", NULL},
     {"aclImdb_v1.tar.gz", NULL},
     "aclImdb"},
    {"squad", "https://rajpurkar.github.io/SQuAD-explorer/dataset/", {NULL, NULL},
     {"train-v1.1.json", "dev-v1.1.json"}, NULL},
    {"squad_v2", "https://rajpurkar.github.io/SQuAD-explorer/dataset/", {NULL, NULL},
     {"train-v2.0.json", "dev-v2.0.json"}, NULL},
};
#define N_KNOWN (sizeof known / sizeof known[0])

static const known_dataset *find(const char *name)
{
    for (size_t i = 0; name && i < N_KNOWN; i++)
        if (strcmp(known[i].name, name) == 0) return &known[i];
    return NULL;
}

bool tf_dataset_is_name(const char *s) { return find(s) != NULL; }

static bool env_true(const char *name)
{
    const char *v = getenv(name);
    return v && (strcasecmp(v, "1") == 0 || strcasecmp(v, "on") == 0 || strcasecmp(v, "yes") == 0 ||
                 strcasecmp(v, "true") == 0);
}

static const char *offline_reason(void)
{
    static const char *const vars[] = {"TFCORE_OFFLINE", "HF_DATASETS_OFFLINE", "HF_HUB_OFFLINE",
                                       "TRANSFORMERS_OFFLINE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (env_true(vars[i])) return vars[i];
    return NULL;
}

tf_status tf_dataset_cache_dir(char *folder, size_t n, tf_error *err)
{
    const char *v = getenv("TFCORE_CACHE"), *home = getenv("HOME");
    int w;
    if (v && v[0]) w = snprintf(folder, n, "%s/datasets", v);
    else if ((v = getenv("XDG_CACHE_HOME")) && v[0]) w = snprintf(folder, n, "%s/tfcore/datasets", v);
    else w = snprintf(folder, n, "%s/.cache/tfcore/datasets", home && home[0] ? home : "");
    if (w < 0 || (size_t)w >= n)
        return tf_error_set(err, TF_ERR_CONFIG, "the tfcore dataset cache path is too long (TFCORE_CACHE)");
    return TF_OK;
}

static bool is_sha256(const char *s)
{
    return s && strlen(s) == 64 && strspn(s, "0123456789abcdefABCDEF") == 64;
}

/* The marker's text (at most 64 kB), "" when there is none. */
static void read_marker(const char *dir, char *buf, size_t n)
{
    char path[TF_HUB_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/" MARKER, dir);
    buf[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f) return;
    size_t got = fread(buf, 1, n - 1, f);
    buf[got] = '\0';
    fclose(f);
}

/* What the request asks for, resolved against the defaults. */
typedef struct request {
    const known_dataset *d;
    char url[2][2200];
    const char *sha[2];
    bool explicit_url, explicit_sha[2]; /* given, not defaults: a cached copy must match them */
    int nfiles;
} request;

static tf_status make_request(const char *name, const tf_dataset_source *src, request *r, tf_error *err)
{
    memset(r, 0, sizeof *r);
    if (!(r->d = find(name)))
        return tf_error_set(err, TF_ERR_CONFIG, "'%s' is not a dataset tfcore can fetch (imdb, squad, squad_v2)",
                            name ? name : "");
    const char *url = src && src->url ? src->url : r->d->url;
    if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)
        return tf_error_set(err, TF_ERR_CONFIG, "dataset %s: url '%s' is not an http:// or https:// URL", name, url);
    for (int i = 0; i < 2 && r->d->files[i]; i++) {
        r->nfiles++;
        int w = r->d->root ? snprintf(r->url[i], sizeof r->url[i], "%s", url)
                           : snprintf(r->url[i], sizeof r->url[i], "%s%s%s", url,
                                      url[strlen(url) - 1] == '/' ? "" : "/", r->d->files[i]);
        if (w < 0 || (size_t)w >= sizeof r->url[i])
            return tf_error_set(err, TF_ERR_CONFIG, "dataset %s: url '%.100s...' is too long", name, url);
        const char *sha = src && src->sha256[i] ? src->sha256[i] : NULL;
        /* the documented checksum belongs to the documented URL only */
        if (!sha && !(src && src->url)) sha = r->d->sha256[i];
        if (sha && !is_sha256(sha))
            return tf_error_set(err, TF_ERR_CONFIG, "dataset %s: sha256 '%s' is not 64 hex digits", name, sha);
        r->sha[i] = sha;
        r->explicit_sha[i] = src && src->sha256[i];
    }
    r->explicit_url = src && src->url;
    return TF_OK;
}

/* The cached copy: TF_OK with *have = true when dir holds it complete, a
 * TF_ERR_CONFIG line when it came from another URL or checksum than the ones
 * the request gives (a request with the defaults takes any cached copy: a
 * mirror fetched with data.url serves later runs that name only the
 * dataset). */
static tf_status cached(const request *r, const char *dir, bool *have, tf_error *err)
{
    static _Thread_local char text[1 << 16];
    *have = false;
    read_marker(dir, text, sizeof text);
    if (!text[0]) return TF_OK;
    char line[2400];
    for (int i = 0; i < r->nfiles; i++) {
        snprintf(line, sizeof line, "\nurl %s\n", r->url[i]);
        if (r->explicit_url && !strstr(text, line))
            return tf_error_set(err, TF_ERR_CONFIG,
                                "dataset %s in %s was fetched from another URL than %s; remove that folder to "
                                "fetch it again",
                                r->d->name, dir, r->url[i]);
        if (r->explicit_sha[i]) {
            snprintf(line, sizeof line, " sha256 %s\n", r->sha[i]);
            if (!strcasestr(text, line))
                return tf_error_set(err, TF_ERR_CONFIG,
                                    "dataset %s in %s does not have sha256 %s; remove that folder to fetch it "
                                    "again",
                                    r->d->name, dir, r->sha[i]);
        }
    }
    *have = true;
    return TF_OK;
}

static tf_status result_folder(const request *r, const char *dir, char *folder, size_t n, tf_error *err)
{
    int w = r->d->root ? snprintf(folder, n, "%s/%s", dir, r->d->root) : snprintf(folder, n, "%s", dir);
    if (w < 0 || (size_t)w >= n) return tf_error_set(err, TF_ERR_CONFIG, "the path %s is too long", dir);
    return TF_OK;
}

/* Remove what an interrupted fetch of `name` left unpacked (we hold its lock). */
static void tidy_tmp(const char *cache, const char *name)
{
    char prefix[256];
    snprintf(prefix, sizeof prefix, ".tmp-%s-", name);
    DIR *d = opendir(cache);
    if (!d) return;
    struct dirent *e;
    char path[TF_HUB_PATH_MAX + 300];
    while ((e = readdir(d)))
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0 &&
            strspn(e->d_name + strlen(prefix), "0123456789") == strlen(e->d_name + strlen(prefix))) {
            snprintf(path, sizeof path, "%s/%s", cache, e->d_name);
            tf_error ignored = {0};
            tf_file_remove_tree(path, &ignored);
        }
    closedir(d);
}

/* Fetch every file into .downloads/<name>/ and put the dataset together in
 * tmp; the caller renames it into place. shas[i] receives each file's sha256. */
static tf_status fetch_into(const request *r, const hub_env *env, const char *downloads, const char *tmp,
                            char shas[2][65], long long sizes[2], tf_error *err)
{
    tf_status st = hub_mkdirs(downloads, err);
    if (st) return st;
    char path[2 * TF_HUB_PATH_MAX];
    for (int i = 0; i < r->nfiles; i++) {
        snprintf(path, sizeof path, "%s/%s", downloads, r->d->files[i]);
        /* a whole file from an interrupted run was verified against what that
         * run asked for; download again to check it against this request */
        unlink(path);
        if ((st = hub_download_url(env, r->url[i], path, r->sha[i], shas[i], err))) return st;
        struct stat sb;
        sizes[i] = stat(path, &sb) == 0 ? (long long)sb.st_size : -1;
    }
    if (mkdir(tmp, 0755) != 0)
        return tf_error_set(err, TF_ERR_RUNTIME, "cannot create the folder %s: %s", tmp, strerror(errno));
    if (r->d->root) {
        archive_limits lim;
        if ((st = archive_limits_from_env(&lim, err))) return st;
        snprintf(path, sizeof path, "%s/%s", downloads, r->d->files[0]);
        tf_info("unpacking %s", path);
        if ((st = archive_extract(path, r->url[0], tmp, &lim, err))) return st;
        char root[2 * TF_HUB_PATH_MAX];
        snprintf(root, sizeof root, "%s/%s", tmp, r->d->root);
        struct stat sb;
        if (lstat(root, &sb) != 0 || !S_ISDIR(sb.st_mode))
            return tf_error_set(err, TF_ERR_DATA, "%s: the archive has no folder %s/ (is it the %s dataset?)",
                                r->url[0], r->d->root, r->d->name);
        unlink(path); /* unpacked: the archive is not needed any more */
    } else {
        char to[2 * TF_HUB_PATH_MAX];
        for (int i = 0; i < r->nfiles; i++) {
            snprintf(path, sizeof path, "%s/%s", downloads, r->d->files[i]);
            snprintf(to, sizeof to, "%s/%s", tmp, r->d->files[i]);
            if (rename(path, to) != 0)
                return tf_error_set(err, TF_ERR_RUNTIME, "cannot move %s to %s: %s", path, to, strerror(errno));
        }
    }
    /* the marker: what was fetched from where, as text; it is written last */
    char text[8192];
    size_t o = (size_t)snprintf(text, sizeof text, "tfcore dataset %s\n", r->d->name);
    for (int i = 0; i < r->nfiles && o < sizeof text; i++)
        o += (size_t)snprintf(text + o, sizeof text - o, "url %s\nfile %s bytes %lld sha256 %s\n", r->url[i],
                              r->d->files[i], sizes[i], shas[i]);
    if (o >= sizeof text) return tf_error_set(err, TF_ERR_CONFIG, "dataset %s: the URL is too long", r->d->name);
    snprintf(path, sizeof path, "%s/" MARKER, tmp);
    return tf_file_write_text_atomic(path, text, err);
}

/* The cache check both calls start with: *have when dir holds the dataset;
 * otherwise, when it cannot be fetched here (offline, or built without
 * libcurl / libarchive), the one line naming the command that fetches it. */
static tf_status lookup(const request *r, const char *name, const char *cache, const char *dir, bool *have,
                        tf_error *err)
{
    tf_status st = cached(r, dir, have, err);
    if (st || *have) return st;
    const char *off = offline_reason();
    if (off || !tf_hub_can_download() || (r->d->root && !archive_can_extract())) {
        char why[128];
        if (off) snprintf(why, sizeof why, "offline: %s is set", off);
        else snprintf(why, sizeof why, "this tfcore was built without %s",
                      tf_hub_can_download() ? "libarchive" : "libcurl");
        return tf_error_set(err, TF_ERR_DATA,
                            "dataset '%s' is not in the tfcore cache %s (%s); fetch it with `tfcore download %s` "
                            "on a machine with internet%s (same TFCORE_CACHE)",
                            name, cache, why, name, off ? "" : " and a tfcore built with libcurl and libarchive");
    }
    return TF_OK;
}

tf_status tf_dataset_check(const char *name, const tf_dataset_source *src, tf_error *err)
{
    request r;
    tf_status st = make_request(name, src, &r, err);
    if (st) return st;
    char cache[TF_HUB_PATH_MAX], dir[TF_HUB_PATH_MAX + 64];
    if ((st = tf_dataset_cache_dir(cache, sizeof cache, err))) return st;
    snprintf(dir, sizeof dir, "%s/%s", cache, name);
    bool have;
    return lookup(&r, name, cache, dir, &have, err);
}

tf_status tf_dataset_fetch(const char *name, const tf_dataset_source *src, char *folder, size_t n, tf_error *err)
{
    request r;
    tf_status st = make_request(name, src, &r, err);
    if (st) return st;
    char cache[TF_HUB_PATH_MAX], dir[TF_HUB_PATH_MAX + 64];
    if ((st = tf_dataset_cache_dir(cache, sizeof cache, err))) return st;
    snprintf(dir, sizeof dir, "%s/%s", cache, name);
    bool have;
    if ((st = lookup(&r, name, cache, dir, &have, err))) return st;
    if (have) return result_folder(&r, dir, folder, n, err);
    hub_env env;
    if ((st = hub_env_read(&env, err))) return st;

    char locks[TF_HUB_PATH_MAX + 16], lock[TF_HUB_PATH_MAX + 300];
    snprintf(locks, sizeof locks, "%s/.locks", cache);
    snprintf(lock, sizeof lock, "%s/%s.lock", locks, name);
    if ((st = hub_mkdirs(locks, err))) return st;
    int lfd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (lfd < 0) return tf_error_set(err, TF_ERR_RUNTIME, "cannot open the lock %s: %s", lock, strerror(errno));
    if (flock(lfd, LOCK_EX | LOCK_NB) != 0) {
        tf_info("waiting for another process fetching dataset %s (%s)", name, lock);
        while (flock(lfd, LOCK_EX) != 0)
            if (errno != EINTR) {
                int e = errno;
                close(lfd);
                return tf_error_set(err, TF_ERR_RUNTIME, "cannot lock %s: %s", lock, strerror(e));
            }
    }
    /* another process may have finished while we waited */
    if ((st = cached(&r, dir, &have, err)) || have) {
        close(lfd);
        return st ? st : result_folder(&r, dir, folder, n, err);
    }
    tidy_tmp(cache, name);
    char downloads[TF_HUB_PATH_MAX + 300], tmp[TF_HUB_PATH_MAX + 300];
    snprintf(downloads, sizeof downloads, "%s/.downloads/%s", cache, name);
    snprintf(tmp, sizeof tmp, "%s/.tmp-%s-%ld", cache, name, (long)getpid());
    char shas[2][65] = {"", ""};
    long long sizes[2] = {-1, -1};
    st = fetch_into(&r, &env, downloads, tmp, shas, sizes, err);
    if (st == TF_OK) {
        struct stat sb;
        /* a folder of that name without a marker (copied by hand, or older)
         * is replaced; tf_file_replace_dir never leaves the name missing */
        if (lstat(dir, &sb) == 0) st = tf_file_replace_dir(tmp, dir, err);
        else if (rename(tmp, dir) != 0)
            st = tf_error_set(err, TF_ERR_RUNTIME, "cannot rename %s to %s: %s", tmp, dir, strerror(errno));
    }
    if (st) {
        /* nothing half-made stays: the unpacked tree, the whole downloads (a
         * refused archive; the next try downloads every file again anyway);
         * a partial .incomplete download stays, to resume */
        tf_error ignored = {0};
        tf_file_remove_tree(tmp, &ignored);
        char path[2 * TF_HUB_PATH_MAX];
        struct stat sb;
        for (int i = 0; i < r.nfiles; i++) {
            snprintf(path, sizeof path, "%s/%s", downloads, r.d->files[i]);
            unlink(path);
            /* an empty partial file (the server said no at once) is no help */
            snprintf(path, sizeof path, "%s/%s.incomplete", downloads, r.d->files[i]);
            if (stat(path, &sb) == 0 && sb.st_size == 0) unlink(path);
        }
    }
    rmdir(downloads); /* only when empty: a partial download is kept */
    snprintf(tmp, sizeof tmp, "%s/.downloads", cache);
    rmdir(tmp);
    close(lfd);
    if (st) return st;
    tf_info("dataset %s is in %s", name, dir);
    return result_folder(&r, dir, folder, n, err);
}
