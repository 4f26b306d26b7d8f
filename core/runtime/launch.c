/* launch.c — starting a job's workers and stopping them together (launch.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifdef HAVE_CONFIG_H
#include "config.h" /* TF_MPIRUN: the mpirun configure found */
#endif
#ifndef TF_MPIRUN
#define TF_MPIRUN "mpirun" /* compiled outside the configured tree (scripts/fuzz.sh) */
#endif
#include "comm_peers.h"
#include "comm_recorder.h"
#include "launch.h"
#include "stop_signal.h"
#include "trainer.h"
#include "trainer_internal.h"
#include "tfcore/log.h"

/* Environment our own process launcher gives each worker it starts. */
#define ENV_RANK "TFCORE_WORKER_RANK"
#define ENV_WORLD "TFCORE_WORKER_WORLD"
#define ENV_SHM_FD "TFCORE_WORKER_SHM_FD"
#define ENV_REC_FD "TFCORE_WORKER_RECORDER_FD" /* the flight recorder's memfd */
/* For a job mpirun starts on this machine: the flight recorder's file in
 * /dev/shm, that every rank maps and the launching tfcore watches. */
#define ENV_RECORDER_FILE "TFCORE_COMM_RECORDER"
/* Set in the job tfcore starts under mpirun, so it never re-executes twice. */
#define ENV_RELAUNCHED "TFCORE_MPI_RELAUNCHED"
/* For a job mpirun starts on this machine: the file each rank appends one
 * byte to when it starts, and the tfcore that launched the job (ranks stop
 * when it is gone, even if mpirun is wedged and does not stop them). */
#define ENV_READY_FILE "TFCORE_MPI_READY_FILE"
#define ENV_LAUNCHER_PID "TFCORE_LAUNCHER_PID"
/* The machine (boot id and PID namespace) of the launching tfcore: a rank
 * watches ENV_LAUNCHER_PID only where that pid means the same process. */
#define ENV_LAUNCHER_MACHINE "TFCORE_LAUNCHER_MACHINE"
/* For every job tfcore starts under mpirun: a file on the launcher's machine
 * that a rank there appends its report to when its collective ran past
 * comm.timeout_s; the launcher then stops mpirun (which would otherwise wait
 * for a lost machine's daemon until TCP gives up). Ranks elsewhere find no
 * such file and report through their own lines. */
#define ENV_REPORT_FILE "TFCORE_MPI_REPORT_FILE"

/* Open MPI's keepalive on mpirun's channel to the daemons of other machines,
 * given by default when ranks run elsewhere (the user's mpirun_args or
 * OMPI_MCA_oob_tcp_keepalive_* win): a daemon whose machine drops off the
 * network is lost after about 10 s idle + 3 probes 5 s apart, not Linux's
 * 300 s + 9 x 20 s. */
#define KEEPALIVE_TIME_S "10"
#define KEEPALIVE_INTVL_S "5"
#define KEEPALIVE_PROBES "3"

/* How many ranks mpirun may start on this machine alone: a rank is a process
 * with its own model and a team of threads, and mpirun keeps pipes and
 * sockets per rank (world_size 1000 on 2 cores ran out of pipes and crashed
 * mpirun, leaving ranks behind). */
#define LOCAL_RANKS_PER_CORE 8
#define LOCAL_RANKS_MAX 256
#define LOCAL_FDS_PER_RANK 8 /* stdin/stdout/stderr pipes, PMIx socket, spare */

/* Seconds a stopping job's workers get between SIGTERM and SIGKILL. */
#define STOP_GRACE_SECONDS 5.0
/* Seconds workers get to finish their step and save a checkpoint after the
 * launcher passed them a stop signal (stop_signal.h), before SIGKILL. */
#define SIGNAL_GRACE_SECONDS 120.0
/* How often a launcher looks at the flight recorder for an overdue collective. */
#define WATCH_INTERVAL_NS (50 * 1000 * 1000)
/* The report of an overdue collective: a headline and one line per rank. */
#define REPORT_BYTES 65536

static bool env_int(const char *name, int *out)
{
    const char *v = getenv(name);
    if (!v || !*v) return false;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || x < 0 || x > INT_MAX) return false;
    *out = (int)x;
    return true;
}

/* --- who started us ---------------------------------------------------------- */

typedef struct external_env {
    bool found;
    int rank, size, local_rank, local_size;
    const char *source; /* which variables said so */
    bool slurm_only;    /* an srun step that gave its tasks no PMI or PMIx wiring */
} external_env;

static void read_external_env(external_env *e)
{
    memset(e, 0, sizeof *e);
    if (env_int("OMPI_COMM_WORLD_RANK", &e->rank) && env_int("OMPI_COMM_WORLD_SIZE", &e->size)) {
        e->source = "Open MPI (OMPI_COMM_WORLD_*)";
        if (!env_int("OMPI_COMM_WORLD_LOCAL_RANK", &e->local_rank)) e->local_rank = e->rank;
        if (!env_int("OMPI_COMM_WORLD_LOCAL_SIZE", &e->local_size)) e->local_size = e->size;
    } else if (env_int("PMI_RANK", &e->rank) && env_int("PMI_SIZE", &e->size)) {
        e->source = "PMI (PMI_RANK, PMI_SIZE)";
        if (!env_int("MPI_LOCALRANKID", &e->local_rank)) e->local_rank = e->rank;
        if (!env_int("MPI_LOCALNRANKS", &e->local_size)) e->local_size = e->size;
    } else if (env_int("SLURM_PROCID", &e->rank) && env_int("SLURM_STEP_NUM_TASKS", &e->size)) {
        /* only inside an srun step: a batch script also has SLURM_PROCID=0 */
        e->source = "Slurm srun (SLURM_PROCID, SLURM_STEP_NUM_TASKS)";
        if (!env_int("SLURM_LOCALID", &e->local_rank)) e->local_rank = e->rank;
        /* SLURM_STEP_TASKS_PER_NODE reads like "2(x3),1": the first count is ours
         * on homogeneous allocations, the common case */
        const char *tpn = getenv("SLURM_STEP_TASKS_PER_NODE");
        e->local_size = tpn ? atoi(tpn) : 0;
        if (e->local_size < 1) e->local_size = e->size;
        /* srun --mpi=pmix sets PMIX_RANK (the one Open MPI 4.1 reads); --mpi=none sets neither */
        e->slurm_only = !getenv("PMIX_RANK");
    } else {
        return;
    }
    e->found = e->size >= 1 && e->rank < e->size && e->local_rank < e->local_size;
}

static void set_worker_logging(int rank, int world)
{
    if (world <= 1) return;
    char prefix[32];
    snprintf(prefix, sizeof prefix, "[rank %d] ", rank);
    tf_log_set_prefix(prefix); /* every worker's lines name it; only rank 0 prints progress and results */
}

/* --- the flight recorder (comm_recorder.h) ---------------------------------------- */

/* Print the report of an overdue collective, one log line per line; the
 * headline (its first line) into err. */
static void print_overdue(const char *report, tf_error *err)
{
    const char *p = report;
    bool first = true;
    while (*p) {
        const char *nl = strchr(p, '\n');
        int len = nl ? (int)(nl - p) : (int)strlen(p);
        if (first) tf_error_set(err, TF_ERR_RUNTIME, "%.*s; the job was stopped", len, p);
        else tf_log(TF_LOG_ERROR, "%.*s", len, p);
        first = false;
        p += len + (nl ? 1 : 0);
    }
    fflush(stderr);
}

/* A recorder in memory every worker process maps: a memfd (inherited
 * across exec, as the comm's shared region), or a file under /dev/shm when
 * path is given (mpirun's ranks are not our children). */
static tf_comm_recorder *recorder_create(int world, int *fd_out, char *path, size_t path_n, tf_error *err)
{
    size_t bytes = tf_comm_recorder_bytes(world);
    int fd;
    if (path) {
        const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm"
                          : getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
        snprintf(path, path_n, "%s/tfcore-comm-XXXXXX", dir);
        fd = mkostemp(path, O_CLOEXEC);
    } else {
        fd = memfd_create("tfcore-comm-recorder", 0);
    }
    if (fd < 0 || ftruncate(fd, (off_t)bytes) != 0) {
        tf_error_set(err, TF_ERR_RUNTIME, "cannot create the collectives' recorder%s%s: %s", path ? " " : "",
                     path ? path : "", strerror(errno));
        if (fd >= 0) close(fd);
        if (path && fd >= 0) unlink(path);
        return NULL;
    }
    void *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        tf_error_set(err, TF_ERR_RUNTIME, "cannot map the collectives' recorder: %s", strerror(errno));
        close(fd);
        if (path) unlink(path);
        return NULL;
    }
    tf_comm_recorder_init(m, world);
    if (fd_out) *fd_out = fd;
    else close(fd);
    return m;
}

/* Map the recorder a launcher made (fd, or the file at path); NULL when it
 * is not one for `world` ranks of this build (the rank then keeps its own). */
static tf_comm_recorder *recorder_attach(int fd, const char *path, int world)
{
    size_t bytes = tf_comm_recorder_bytes(world);
    if (path && (fd = open(path, O_RDWR | O_CLOEXEC)) < 0) return NULL;
    struct stat sb;
    void *m = MAP_FAILED;
    if (fstat(fd, &sb) == 0 && (size_t)sb.st_size >= bytes)
        m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return NULL;
    if (!tf_comm_recorder_valid(m, bytes, world)) {
        munmap(m, bytes);
        return NULL;
    }
    return m;
}

static void recorder_free(tf_comm_recorder *r, int world)
{
    if (r) munmap(r, tf_comm_recorder_bytes(world));
}

/* What a launcher watches: the recorder, and what it found. */
typedef struct stall_watch {
    const tf_comm_recorder *rec;
    double timeout_s;
    double next;       /* tf_now() of the next look */
    bool fired;
    tf_error err;      /* the headline, once fired */
    const char *report; /* ENV_REPORT_FILE's file, or NULL */
} stall_watch;

/* A rank on this machine reported its collective timeout into sw->report:
 * its headline becomes the launcher's error. */
static bool report_check(stall_watch *sw)
{
    struct stat sb;
    if (!sw->report || stat(sw->report, &sb) != 0 || sb.st_size == 0) return false;
    char line[TF_ERROR_MSG_MAX] = "";
    FILE *f = fopen(sw->report, "r");
    if (f) {
        if (!fgets(line, sizeof line, f)) line[0] = '\0';
        fclose(f);
    }
    line[strcspn(line, "\n")] = '\0';
    tf_error_set(&sw->err, TF_ERR_RUNTIME, "%s; mpirun was stopped",
                 line[0] ? line : "a rank's collective ran past comm.timeout_s");
    sw->fired = true;
    return true;
}

/* Look (at most every WATCH_INTERVAL_NS, or now when `force`): true when a
 * collective is overdue, after printing the report. */
static bool stall_check(stall_watch *sw, bool force)
{
    if (!sw || sw->fired || (!sw->rec && !sw->report)) return false;
    double now = tf_now();
    if (!force && now < sw->next) return false;
    sw->next = now + WATCH_INTERVAL_NS * 1e-9;
    if (!sw->rec) return report_check(sw);
    char *report = malloc(REPORT_BYTES);
    if (!report) return false;
    bool overdue = tf_comm_recorder_overdue(sw->rec, now, sw->timeout_s, report, REPORT_BYTES);
    if (overdue) {
        print_overdue(report, &sw->err);
        sw->fired = true;
    }
    free(report);
    return overdue || report_check(sw);
}

/* --- hints and checks before any work ---------------------------------------- */

/* mpirun places ranks on other machines — comm.mpirun_args names hosts, or
 * it runs inside a Slurm allocation of several nodes (Open MPI reads the
 * allocation and starts ranks on all of them) — so this machine's device
 * count says nothing about them, and they can see neither this machine's
 * /tmp nor its process ids. */
static bool mpirun_names_hosts(const tf_plan *plan)
{
    const char *extra = plan->comm.mpirun_args ? plan->comm.mpirun_args : "";
    int nodes;
    if ((env_int("SLURM_JOB_NUM_NODES", &nodes) || env_int("SLURM_NNODES", &nodes)) && nodes > 1) return true;
    return strstr(extra, "--host") || strstr(extra, "-H ") || strstr(extra, "hostfile");
}

/* The backend must have a device for each worker on this machine. */
static tf_status check_devices(const tf_plan *plan, const tf_launch_cmd *cmd, int needed, tf_error *err)
{
    const tf_loaded_plugin *bp = plan->plugin[TF_KIND_BACKEND];
    const tf_backend_vtable *bvt = bp->desc->vtable;
    if (!TF_HAS(bvt, device_count)) return TF_OK;
    char why[256] = "";
    int have = bvt->device_count(why, sizeof why);
    if (have < 0 || have >= needed) return TF_OK;
    const char *where = plan->config_file ? plan->config_file : "the config";
    if (have == 0)
        tf_error_set(err, TF_ERR_CONFIG, "%s: %d worker%s need%s %d %s device%s, and this machine has none%s%s%s",
                     where, needed, needed == 1 ? "" : "s", needed == 1 ? "s" : "", needed, bp->desc->name,
                     needed == 1 ? "" : "s", why[0] ? " (" : "", why, why[0] ? ")" : "");
    else
        tf_error_set(err, TF_ERR_CONFIG, "%s: comm.world_size %d needs %d %s devices on this machine, but it has %d",
                     where, plan->comm.world_size, needed, bp->desc->name, have);
    if (cmd && cmd->short_of_devices) cmd->short_of_devices(plan->config_file, err);
    return TF_ERR_CONFIG;
}

/* The ranks of a job mpirun starts on this machine alone: bounded by the
 * cores and the open-files limit (see LOCAL_RANKS_PER_CORE). */
static tf_status check_local_ranks(const tf_plan *plan, tf_error *err)
{
    int world = plan->comm.world_size;
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1) cores = 1;
    long by_cores = cores * LOCAL_RANKS_PER_CORE, limit = by_cores < LOCAL_RANKS_MAX ? by_cores : LOCAL_RANKS_MAX;
    struct rlimit rl;
    long by_fds = LONG_MAX;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        by_fds = ((long)rl.rlim_cur - 64) / LOCAL_FDS_PER_RANK;
    if (by_fds < limit) limit = by_fds < 1 ? 1 : by_fds;
    if (world <= limit) return TF_OK;
    tf_section *cs = tf_config_section(plan->cfg, "comm");
    char why[160];
    if (limit == by_fds)
        snprintf(why, sizeof why, "the open-files limit (ulimit -n %lld) allows %ld", (long long)rl.rlim_cur, by_fds);
    else if (limit == by_cores)
        snprintf(why, sizeof why, "%d per core on its %ld cores", LOCAL_RANKS_PER_CORE, cores);
    else
        snprintf(why, sizeof why, "at most %d in all", LOCAL_RANKS_MAX);
    return tf_error_set(err, TF_ERR_CONFIG,
                        "%s: comm.world_size %d: mpirun would start every rank on this machine (comm.mpirun_args "
                        "names no --host or hostfile), and it runs at most %ld (%s); lower world_size or name "
                        "the machines in comm.mpirun_args",
                        tf_cfg_where(cs, "world_size"), world, limit, why);
}

tf_status tf_launch_check_devices(const tf_plan *plan, const tf_launch_cmd *cmd, tf_error *err)
{
    const tf_loaded_plugin *cp = plan->plugin[TF_KIND_COMM];
    if (!cp) return check_devices(plan, cmd, 1, err);
    external_env e;
    read_external_env(&e);
    if (e.found && e.size > 1) return check_devices(plan, cmd, e.local_size, err);
    const tf_comm_vtable *cvt = cp->desc->vtable;
    if (cvt->launch_mode() == TF_LAUNCH_EXTERNAL && mpirun_names_hosts(plan)) return TF_OK;
    if (cvt->launch_mode() == TF_LAUNCH_EXTERNAL) {
        tf_status st = check_local_ranks(plan, err);
        if (st) return st;
    }
    return check_devices(plan, cmd, plan->comm.world_size, err);
}

/* --- one worker in this process ---------------------------------------------- */

/* Train as worker w. A failing worker of a multi-worker job prints its own
 * error (it may not get the chance later: the comm plugin's abort can end the
 * process) and then stops the others. */
static void *exit_after(void *arg)
{
    struct timespec ts = {(time_t)(intptr_t)arg, 0};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
    tf_log(TF_LOG_ERROR, "the comm's abort did not end this rank in %d s (its launcher unreachable?): ending it",
           (int)(intptr_t)arg);
    _exit(TF_ERR_RUNTIME);
    return NULL;
}

/* End this process after `seconds` whatever happens: a comm abort that
 * cannot reach the job's launcher (MPI_Abort on a machine cut off from
 * mpirun's) must not leave the rank behind. */
static void exit_later(double seconds)
{
    pthread_t th;
    if (pthread_create(&th, NULL, exit_after, (void *)(intptr_t)seconds) == 0) pthread_detach(th);
}

/* This rank's collective ran past comm.timeout_s and no launcher on this
 * machine reads its recorder: the report from what it heard of every rank
 * (comm_peers.h), else its own line; the headline also into the launcher's
 * report file when that is on this machine (ENV_REPORT_FILE). */
static void report_own_timeout(tf_trainer *t, double timeout_s)
{
    char *report = malloc(REPORT_BYTES);
    if (!report) return;
    double now = tf_now();
    if (!tf_comm_peers_overdue(t->peers, now, timeout_s, report, REPORT_BYTES)) {
        char line[512];
        tf_comm_recorder_rank_line(t->rec_own, 0, now, line, sizeof line);
        snprintf(report, REPORT_BYTES, "collective timeout (comm.timeout_s = %g): %s\n", timeout_s,
                 line + strlen("rank 0: "));
    }
    for (const char *p = report; *p;) {
        size_t len = strcspn(p, "\n");
        tf_log(TF_LOG_ERROR, "%.*s", (int)len, p);
        p += len + (p[len] ? 1 : 0);
    }
    const char *path = getenv(ENV_REPORT_FILE);
    int fd = path && *path ? open(path, O_WRONLY | O_APPEND | O_CLOEXEC) : -1; /* never created here */
    if (fd >= 0) {
        char line[TF_ERROR_MSG_MAX + 32];
        int k = snprintf(line, sizeof line, "rank %d: %.*s\n", t->rank, (int)strcspn(report, "\n"), report);
        if (k > 0 && write(fd, line, (size_t)k < sizeof line ? (size_t)k : sizeof line - 1) < 0)
            tf_debug("cannot report to %s: %s", path, strerror(errno));
        close(fd);
    }
    free(report);
}

static tf_status run_one(const tf_plan *plan, const tf_worker *w, tf_error *err)
{
    set_worker_logging(w->rank, w->world);
    tf_trainer t;
    tf_status st = tf_trainer_setup(&t, plan, w, err);
    if (!st) st = tf_trainer_comm_init(&t, err);
    if (!st) st = tf_trainer_run(&t, err);
    if (st && w->world > 1) {
        tf_log(TF_LOG_ERROR, "%s", err->msg);
        /* no launcher reads this rank's recorder: say where it is itself */
        if (!w->recorder && t.rec_own && tf_comm_recorder_oldest(t.rec_own, tf_now()) >= plan->comm.timeout_s)
            report_own_timeout(&t, plan->comm.timeout_s);
        fflush(stderr);
        exit_later(STOP_GRACE_SECONDS);
        tf_trainer_comm_abort(&t, err->msg);
        err->msg[0] = '\0'; /* printed */
    }
    tf_trainer_teardown(&t);
    return st;
}

/* --- threads (comm-dp-master) -------------------------------------------------- */

typedef struct thread_job {
    pthread_mutex_t lock;
    int failed_rank; /* -1: none yet */
    tf_status st;
    tf_error err;
} thread_job;

typedef struct thread_worker {
    tf_trainer t;
    thread_job *job;
    bool set_up;
} thread_worker;

/* The thread that watches the replicas' recorder: on an overdue collective
 * it prints the report and wakes every waiting replica with an error
 * (comm abort); a replica that does not end within STOP_GRACE_SECONDS (it
 * is stuck outside the comm) ends the process. */
typedef struct thread_watch {
    stall_watch sw;
    thread_worker *tw;
    int world;
    pthread_mutex_t lock;
    pthread_cond_t cv;
    bool done; /* every worker thread has ended */
} thread_watch;

static void *watch_threads(void *arg)
{
    thread_watch *tw = arg;
    pthread_mutex_lock(&tw->lock);
    while (!tw->done) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += WATCH_INTERVAL_NS;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&tw->cv, &tw->lock, &until);
        if (tw->done || !stall_check(&tw->sw, false)) continue;
        pthread_mutex_unlock(&tw->lock);
        for (int r = 0; r < tw->world; r++) tf_trainer_comm_abort(&tw->tw[r].t, tw->sw.err.msg);
        pthread_mutex_lock(&tw->lock);
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += (time_t)STOP_GRACE_SECONDS;
        while (!tw->done)
            if (pthread_cond_timedwait(&tw->cv, &tw->lock, &until) == ETIMEDOUT) {
                tf_log(TF_LOG_ERROR, "%s (a replica stuck outside the collectives did not stop: ending the process)",
                       tw->sw.err.msg);
                fflush(stderr);
                _exit(TF_ERR_RUNTIME);
            }
    }
    pthread_mutex_unlock(&tw->lock);
    return NULL;
}

static void record_failure(thread_job *job, int rank, tf_status st, const tf_error *e)
{
    pthread_mutex_lock(&job->lock);
    if (job->failed_rank < 0) {
        job->failed_rank = rank;
        job->st = st;
        job->err = *e;
    }
    pthread_mutex_unlock(&job->lock);
}

static void *thread_main(void *arg)
{
    thread_worker *tw = arg;
    set_worker_logging(tw->t.rank, tw->t.world);
    tf_error e = {0};
    tf_status st = tf_trainer_run(&tw->t, &e);
    if (st) {
        record_failure(tw->job, tw->t.rank, st, &e);
        tf_trainer_comm_abort(&tw->t, e.msg);
    }
    return NULL;
}

static tf_status run_threads(const tf_plan *plan, const tf_comm_vtable *cvt, int world, tf_error *err)
{
    thread_worker *tw = calloc((size_t)world, sizeof *tw);
    pthread_t *th = calloc((size_t)world, sizeof *th);
    bool *started = calloc((size_t)world, sizeof *started);
    if (!tw || !th || !started) {
        free(tw);
        free(th);
        free(started);
        return tf_error_set(err, TF_ERR_RUNTIME, "out of memory for %d workers", world);
    }
    thread_job job = {PTHREAD_MUTEX_INITIALIZER, -1, TF_OK, {0}};
    void *cell = NULL; /* the comm plugin's shared state (tfcore/comm.h) */
    tf_comm_recorder *rec = calloc(1, tf_comm_recorder_bytes(world));
    if (!rec) {
        free(tw);
        free(th);
        free(started);
        return tf_error_set(err, TF_ERR_RUNTIME, "out of memory for %d workers", world);
    }
    tf_comm_recorder_init(rec, world);
    thread_watch watch = {{rec, plan->comm.timeout_s, 0, false, {0}, NULL}, tw, world, PTHREAD_MUTEX_INITIALIZER,
                          PTHREAD_COND_INITIALIZER, false};
    pthread_t watcher;
    bool watching = false;
    tf_status st = TF_OK;
    int failed = -1;
    /* Set the workers up one after the other on this thread (plugins read the
     * config as they open), then connect them in rank order, as comm.h promises. */
    for (int r = 0; r < world && !st; r++) {
        tf_worker w = {r, world, r, world, TF_LAUNCH_THREADS, cvt, &cell, rec};
        set_worker_logging(r, world);
        tw[r].job = &job;
        st = tf_trainer_setup(&tw[r].t, plan, &w, err);
        tw[r].set_up = true;
        if (st) failed = r;
    }
    for (int r = 0; r < world && !st; r++) {
        set_worker_logging(r, world);
        if ((st = tf_trainer_comm_init(&tw[r].t, err))) failed = r;
    }
    tf_log_set_prefix(NULL);
    for (int r = 0; r < world && !st; r++) {
        int rc = pthread_create(&th[r], NULL, thread_main, &tw[r]);
        if (rc) {
            st = tf_error_set(err, TF_ERR_RUNTIME, "cannot start worker thread %d: %s", r, strerror(rc));
            failed = r;
            /* the started ones are waiting for this one in a collective: stop them */
            for (int q = 0; q < r; q++) tf_trainer_comm_abort(&tw[q].t, err->msg);
            break;
        }
        started[r] = true;
    }
    if (!st && pthread_create(&watcher, NULL, watch_threads, &watch) == 0) watching = true;
    for (int r = 0; r < world; r++)
        if (started[r]) pthread_join(th[r], NULL);
    if (watching) {
        pthread_mutex_lock(&watch.lock);
        watch.done = true;
        pthread_cond_signal(&watch.cv);
        pthread_mutex_unlock(&watch.lock);
        pthread_join(watcher, NULL);
    }
    if (!st && watch.sw.fired) { /* the replicas' errors only say they were stopped */
        st = TF_ERR_RUNTIME;
        *err = watch.sw.err;
    } else if (!st && job.failed_rank >= 0) {
        failed = job.failed_rank;
        st = job.st;
        *err = job.err;
    }
    /* comm finalize for every rank happens in teardown, after all stopped */
    for (int r = 0; r < world; r++)
        if (tw[r].set_up) tf_trainer_teardown(&tw[r].t);
    free(tw);
    free(th);
    free(started);
    free(rec);
    if (st && failed >= 0 && !watch.sw.fired) tf_error_prefix(err, "rank %d", failed);
    return st;
}

/* --- processes (comm-nccl): tfcore starts and watches one process per worker - */

static volatile sig_atomic_t stop_signal;  /* the first SIGINT/SIGTERM/SIGUSR1 the launcher got */
static volatile sig_atomic_t stop_signals; /* how many it got */

static void on_stop_signal(int sig)
{
    if (!stop_signal) stop_signal = sig;
    stop_signals++;
}

static void describe_status(int status, char *out, size_t n)
{
    if (WIFSIGNALED(status))
        snprintf(out, n, "was killed by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
    else if (WIFEXITED(status))
        snprintf(out, n, "exited with status %d", WEXITSTATUS(status));
    else
        snprintf(out, n, "stopped (wait status %#x)", (unsigned)status);
}

/* A job that must report its start: `want` bytes appended to `path` before
 * `deadline` (tf_now()), or it is stopped. */
typedef struct start_wait {
    const char *path;
    const char *rec_path; /* the ranks' flight recorder file: removed too once all started (mapped) */
    int want, got;
    double deadline;
    bool done, timed_out;
} start_wait;

static void poll_start(start_wait *sw)
{
    struct stat sb;
    sw->got = stat(sw->path, &sb) == 0 ? (int)(sb.st_size < INT_MAX ? sb.st_size : INT_MAX) : 0;
    if (sw->got >= sw->want) {
        sw->done = true;
        unlink(sw->path); /* not needed any more: a launcher killed later leaves nothing */
        if (sw->rec_path && sw->rec_path[0]) unlink(sw->rec_path); /* every rank mapped it before it reported */
    } else if (tf_now() > sw->deadline) sw->timed_out = true;
}

/* Wait for pids[n]; when one fails, terminate the rest (SIGTERM, then SIGKILL
 * after STOP_GRACE_SECONDS). A SIGINT, SIGTERM or SIGUSR1 to this launcher is
 * passed on to the children (as forward_as when not 0: mpirun passes only
 * SIGUSR1 on to its ranks), each time it comes, and they get
 * SIGNAL_GRACE_SECONDS to stop in order (stop_signal.h). With sw, the same
 * when the job has not reported its start by sw's deadline. Returns the index
 * of the first failure, or -1; *n_stopped counts the children that exited
 * with TF_EXIT_STOPPED. */
/* An overdue collective (stall): every worker the recorder names is killed
 * (SIGKILL ends a stopped process too), and the children are asked to end
 * (mpirun then reports its ranks' deaths and exits). */
static void stop_stalled(pid_t *pids, int n, const stall_watch *stall)
{
    for (int k = 0; stall->rec && k < stall->rec->world; k++) {
        pid_t p = (pid_t)stall->rec->rank[k].pid;
        if (p > 1 && p != getpid()) kill(p, SIGKILL);
    }
    for (int i = 0; i < n; i++)
        if (pids[i] > 0) kill(pids[i], SIGTERM);
}

static int watch_children(pid_t *pids, int n, int *fail_status, start_wait *sw, int forward_as, int *n_stopped,
                          stall_watch *stall)
{
    int alive = n, first = -1;
    *n_stopped = 0;
    double kill_at = 0; /* when to SIGKILL the stragglers (0: not stopping) */
    struct sigaction sa = {0}, old_int, old_term, old_usr1;
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    sigaction(SIGUSR1, &sa, &old_usr1);
    int forwarded = 0;
    while (alive > 0) {
        if (stop_signals > forwarded) {
            for (int i = 0; i < n; i++)
                if (pids[i] > 0) kill(pids[i], forward_as ? forward_as : stop_signal);
            forwarded++;
            if (kill_at == 0) kill_at = tf_now() + SIGNAL_GRACE_SECONDS;
        }
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid < 0 && errno != EINTR) break; /* no children left */
        if (pid <= 0) {
            if (sw && !sw->done && !sw->timed_out && kill_at == 0) {
                poll_start(sw);
                if (sw->timed_out) {
                    for (int i = 0; i < n; i++)
                        if (pids[i] > 0) kill(pids[i], SIGTERM);
                    kill_at = tf_now() + STOP_GRACE_SECONDS;
                }
            }
            if (kill_at == 0 && stall_check(stall, false)) {
                stop_stalled(pids, n, stall);
                kill_at = tf_now() + STOP_GRACE_SECONDS;
            }
            if (kill_at > 0 && tf_now() > kill_at) {
                /* the child and its process group (mpirun's ranks on this machine) */
                for (int i = 0; i < n; i++)
                    if (pids[i] > 0) {
                        kill(pids[i], SIGKILL);
                        kill(-pids[i], SIGKILL);
                    }
                kill_at = tf_now() + 3600; /* once */
            }
            struct timespec ts = {0, 20 * 1000 * 1000};
            nanosleep(&ts, NULL);
            continue;
        }
        int r = -1;
        for (int i = 0; i < n; i++)
            if (pids[i] == pid) r = i;
        if (r < 0) continue;
        pids[r] = -1;
        alive--;
        bool stopped = WIFEXITED(status) && WEXITSTATUS(status) == TF_EXIT_STOPPED;
        if (stopped) ++*n_stopped;
        bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0) && !stopped;
        /* a rank that gave up in its collective (its own comm.timeout_s): say where every rank is */
        if (failed && first < 0 && stall_check(stall, true)) stop_stalled(pids, n, stall);
        if (failed && first < 0) {
            first = r;
            *fail_status = status;
            for (int i = 0; i < n; i++)
                if (pids[i] > 0) kill(pids[i], SIGTERM);
            if (kill_at == 0 || kill_at > tf_now() + STOP_GRACE_SECONDS) kill_at = tf_now() + STOP_GRACE_SECONDS;
        }
    }
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    sigaction(SIGUSR1, &old_usr1, NULL);
    return first;
}

/* The status a launcher returns for a worker's wait status. */
static tf_status status_of(int status)
{
    if (WIFEXITED(status) && WEXITSTATUS(status) >= 1 && WEXITSTATUS(status) <= 5)
        return (tf_status)WEXITSTATUS(status);
    return TF_ERR_RUNTIME;
}

static tf_status run_processes(const tf_plan *plan, int world, const tf_launch_cmd *cmd, tf_error *err)
{
    int argc = cmd->argc;
    char **argv = cmd->argv;
    char exe[PATH_MAX];
    tf_status st = cmd->program(exe, sizeof exe, err);
    if (st) return st;
    /* the TF_COMM_SHARED_BYTES region every worker maps (tfcore/comm.h) */
    int fd = memfd_create("tfcore-comm-shared", 0); /* inherited across exec on purpose */
    if (fd < 0 || ftruncate(fd, TF_COMM_SHARED_BYTES) != 0) {
        if (fd >= 0) close(fd);
        return tf_error_set(err, TF_ERR_RUNTIME, "cannot create the workers' shared memory: %s", strerror(errno));
    }
    int rec_fd = -1;
    tf_comm_recorder *rec = recorder_create(world, &rec_fd, NULL, 0, err);
    if (!rec) {
        close(fd);
        return TF_ERR_RUNTIME;
    }
    char **args = calloc((size_t)argc + 2, sizeof *args);
    pid_t *pids = calloc((size_t)world, sizeof *pids);
    if (!args || !pids) {
        free(args);
        free(pids);
        close(fd);
        close(rec_fd);
        recorder_free(rec, world);
        return tf_error_set(err, TF_ERR_RUNTIME, "out of memory starting %d workers", world);
    }
    args[0] = exe;
    for (int i = 0; i < argc; i++) args[i + 1] = argv[i]; /* argv[0] is the verb ("train", "eval") */
    tf_info("starting %d worker processes (comm %s)", world, plan->plugin[TF_KIND_COMM]->desc->name);
    fflush(stderr);
    pid_t self = getpid();
    int started = 0;
    for (int r = 0; r < world; r++) {
        pid_t pid = fork();
        if (pid < 0) {
            st = tf_error_set(err, TF_ERR_RUNTIME, "cannot start worker %d: fork: %s", r, strerror(errno));
            break;
        }
        if (pid == 0) {
            /* the worker dies with its launcher: no orphans */
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            /* its own process group: a terminal's Ctrl-C reaches the launcher
             * alone, which passes it on once (a second one aborts the save) */
            setpgid(0, 0);
            if (getppid() != self) _exit(TF_ERR_RUNTIME);
            char v[32];
            snprintf(v, sizeof v, "%d", r);
            setenv(ENV_RANK, v, 1);
            snprintf(v, sizeof v, "%d", world);
            setenv(ENV_WORLD, v, 1);
            snprintf(v, sizeof v, "%d", fd);
            setenv(ENV_SHM_FD, v, 1);
            snprintf(v, sizeof v, "%d", rec_fd);
            setenv(ENV_REC_FD, v, 1);
            execv(exe, args);
            fprintf(stderr, "[rank %d] tfcore: error: cannot run %s: %s\n", r, exe, strerror(errno));
            _exit(TF_ERR_RUNTIME);
        }
        pids[r] = pid;
        started++;
    }
    if (st) { /* could not start them all: stop those that run */
        for (int i = 0; i < started; i++) kill(pids[i], SIGTERM);
        for (int i = 0; i < started; i++) waitpid(pids[i], NULL, 0);
    } else {
        int status = 0, stopped = 0;
        stall_watch stall = {rec, plan->comm.timeout_s, 0, false, {0}, NULL};
        int failed = watch_children(pids, world, &status, NULL, 0, &stopped, &stall);
        if (stall.fired) {
            st = TF_ERR_RUNTIME;
            *err = stall.err;
        } else if (failed < 0 && stopped == world) {
            tf_stop_mark_stopped(); /* each worker saved and said so */
        } else if (failed >= 0) {
            char how[128];
            describe_status(status, how, sizeof how);
            if (world == 2)
                st = tf_error_set(err, status_of(status), "worker rank %d %s; the other worker was stopped", failed, how);
            else
                st = tf_error_set(err, status_of(status), "worker rank %d %s; the other %d workers were stopped", failed,
                                  how, world - 1);
        } else if (stopped) {
            st = tf_error_set(err, TF_ERR_RUNTIME, "%d of %d workers stopped after a checkpoint, the others did not",
                              stopped, world);
        } else if (stop_signal) {
            tf_info("stopped by %s after the run had finished", tf_stop_signal_name(stop_signal));
        }
    }
    free(args);
    free(pids);
    close(fd);
    close(rec_fd);
    recorder_free(rec, world);
    return st;
}

/* This process is worker ENV_RANK that run_processes started. */
static tf_status run_started_worker(const tf_plan *plan, const tf_comm_vtable *cvt, tf_error *err)
{
    int rank, world, fd;
    if (!env_int(ENV_RANK, &rank) || !env_int(ENV_WORLD, &world) || !env_int(ENV_SHM_FD, &fd) || rank >= world)
        return tf_error_set(err, TF_ERR_USAGE, "bad worker environment (%s, %s, %s)", ENV_RANK, ENV_WORLD, ENV_SHM_FD);
    if (!cvt || world != plan->comm.world_size)
        return tf_error_set(err, TF_ERR_USAGE, "started as worker %d of %d, but the config says comm.world_size %d", rank,
                            world, plan->comm.world_size);
    void *shared = mmap(NULL, TF_COMM_SHARED_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (shared == MAP_FAILED)
        return tf_error_set(err, TF_ERR_RUNTIME, "rank %d: cannot map the workers' shared memory: %s", rank,
                            strerror(errno));
    close(fd);
    tf_comm_recorder *rec = NULL;
    if (env_int(ENV_REC_FD, &fd)) rec = recorder_attach(fd, NULL, world);
    tf_worker w = {rank, world, rank, world, TF_LAUNCH_PROCESSES, cvt, shared, rec};
    tf_stop_install();
    tf_status st = run_one(plan, &w, err);
    munmap(shared, TF_COMM_SHARED_BYTES);
    recorder_free(rec, world);
    return st;
}

/* --- mpirun ------------------------------------------------------------------ */

/* Split s on blanks into words appended to args (s is copied into buf). */
static int split_words(const char *s, char *buf, size_t n, char **args, int max)
{
    snprintf(buf, n, "%s", s);
    int k = 0;
    for (char *save = NULL, *w = strtok_r(buf, " \t\n", &save); w && k < max; w = strtok_r(NULL, " \t\n", &save))
        args[k++] = w;
    return k;
}

/* "<boot id>/<PID namespace inode>": which machine and PID namespace a pid
 * belongs to ("" when unknown). */
static void machine_id(char *out, size_t n)
{
    char boot[64] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (!fgets(boot, sizeof boot, f)) boot[0] = '\0';
        fclose(f);
    }
    boot[strcspn(boot, "\n")] = '\0';
    struct stat sb;
    if (!boot[0] || stat("/proc/self/ns/pid", &sb) != 0) {
        out[0] = '\0';
        return;
    }
    snprintf(out, n, "%s/%lu", boot, (unsigned long)sb.st_ino);
}

static tf_status relaunch_under_mpirun(const tf_plan *plan, int world, const tf_launch_cmd *cmd, tf_error *err)
{
    if (getenv(ENV_RELAUNCHED))
        return tf_error_set(err, TF_ERR_RUNTIME,
                            "tfcore re-executed itself under %s but finds no rank in its environment "
                            "(OMPI_COMM_WORLD_RANK, PMI_RANK): is that Open MPI's mpirun?",
                            TF_MPIRUN);
    int argc = cmd->argc;
    char **argv = cmd->argv;
    char exe[PATH_MAX];
    tf_status st = cmd->program(exe, sizeof exe, err);
    if (st) return st;
    enum { MAX_EXTRA = 64 };
    size_t cap = (size_t)argc + 64 + MAX_EXTRA;
    char **args = calloc(cap, sizeof *args);
    char np[16], extra_buf[4096];
    if (!args) return tf_error_set(err, TF_ERR_RUNTIME, "out of memory");
    int k = 0;
    args[k++] = (char *)TF_MPIRUN;
    snprintf(np, sizeof np, "%d", world);
    args[k++] = "-np";
    args[k++] = np;
    if (geteuid() == 0) args[k++] = "--allow-run-as-root"; /* containers and CI run as root */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    const char *extra = plan->comm.mpirun_args ? plan->comm.mpirun_args : "";
    if (!mpirun_names_hosts(plan) && cores > 0 && world > cores) args[k++] = "--oversubscribe";
    /* each rank runs a team of threads (the cores shared out), so no binding to one core */
    if (!strstr(extra, "--bind-to")) {
        args[k++] = "--bind-to";
        args[k++] = "none";
    }
    static const char *pass[] = {"TFCORE_PLUGIN_PATH", "TFCORE_LOG", "LD_LIBRARY_PATH", "TFCORE_TRACE_COMM"};
    for (size_t i = 0; i < sizeof pass / sizeof pass[0]; i++)
        if (getenv(pass[i])) { /* to ranks on other machines too */
            args[k++] = "-x";
            args[k++] = (char *)pass[i];
        }
    args[k++] = "-x";
    args[k++] = ENV_RELAUNCHED;
    bool local = !mpirun_names_hosts(plan);
    /* a machine dropping off the network ends the job in seconds, not minutes */
    if (!local && !strstr(extra, "oob_tcp_keepalive") && !getenv("OMPI_MCA_oob_tcp_keepalive_time")) {
        static const char *keepalive[] = {"--mca", "oob_tcp_keepalive_time",   KEEPALIVE_TIME_S,
                                          "--mca", "oob_tcp_keepalive_intvl",  KEEPALIVE_INTVL_S,
                                          "--mca", "oob_tcp_keepalive_probes", KEEPALIVE_PROBES};
        for (size_t i = 0; i < sizeof keepalive / sizeof keepalive[0]; i++) args[k++] = (char *)keepalive[i];
    }
    /* ranks on this machine watch this process, and report a collective timeout to it */
    char ready[PATH_MAX] = "", launcher[32], rec_path[PATH_MAX] = "", report[PATH_MAX] = "", machine[128];
    const char *tmpdir = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(report, sizeof report, "%s/tfcore-mpi-report-XXXXXX", tmpdir);
    int report_fd = mkostemp(report, O_CLOEXEC);
    if (report_fd < 0) {
        free(args);
        return tf_error_set(err, TF_ERR_RUNTIME, "cannot create %s: %s", report, strerror(errno));
    }
    close(report_fd);
    setenv(ENV_REPORT_FILE, report, 1);
    snprintf(launcher, sizeof launcher, "%d", (int)getpid());
    setenv(ENV_LAUNCHER_PID, launcher, 1);
    machine_id(machine, sizeof machine);
    setenv(ENV_LAUNCHER_MACHINE, machine, 1);
    static const char *watch_env[] = {"-x", ENV_REPORT_FILE, "-x", ENV_LAUNCHER_PID, "-x", ENV_LAUNCHER_MACHINE};
    for (size_t i = 0; i < sizeof watch_env / sizeof watch_env[0]; i++) args[k++] = (char *)watch_env[i];
    tf_comm_recorder *rec = NULL;
    if (local) { /* ranks on this machine alone: they report their start, and share a recorder */
        if (!(rec = recorder_create(world, NULL, rec_path, sizeof rec_path, err))) {
            free(args);
            unlink(report);
            return TF_ERR_RUNTIME;
        }
        setenv(ENV_RECORDER_FILE, rec_path, 1);
        args[k++] = "-x";
        args[k++] = ENV_RECORDER_FILE;
        snprintf(ready, sizeof ready, "%s/tfcore-mpi-start-XXXXXX", tmpdir);
        int rfd = mkostemp(ready, O_CLOEXEC);
        if (rfd < 0) {
            free(args);
            unlink(rec_path);
            unlink(report);
            recorder_free(rec, world);
            return tf_error_set(err, TF_ERR_RUNTIME, "cannot create %s: %s", ready, strerror(errno));
        }
        close(rfd);
        setenv(ENV_READY_FILE, ready, 1);
        args[k++] = "-x";
        args[k++] = ENV_READY_FILE;
    }
    k += split_words(extra, extra_buf, sizeof extra_buf, args + k, MAX_EXTRA);
    args[k++] = exe;
    for (int i = 0; i < argc; i++) args[k++] = argv[i];
    args[k] = NULL;
    char line[1024] = "";
    for (int i = 0; args[i] && strlen(line) < sizeof line - 64; i++)
        snprintf(line + strlen(line), sizeof line - strlen(line), "%s%s", i ? " " : "", args[i]);
    tf_info("running %d ranks under mpirun: %s", world, line);
    fflush(stderr);
    setenv(ENV_RELAUNCHED, "1", 1);
    pid_t self = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        free(args);
        if (ready[0]) unlink(ready);
        if (rec_path[0]) unlink(rec_path);
        unlink(report);
        recorder_free(rec, world);
        return tf_error_set(err, TF_ERR_RUNTIME, "cannot start %s: fork: %s", TF_MPIRUN, strerror(errno));
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* mpirun stops its ranks on SIGTERM */
        if (getppid() != self) _exit(TF_ERR_RUNTIME);
        setpgid(0, 0); /* a terminal's Ctrl-C reaches the launcher alone, which passes it on */
        /* no rank reads stdin, and mpirun reading a terminal from a background
         * process group would be stopped (SIGTTIN) */
        int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (null_fd >= 0) {
            dup2(null_fd, STDIN_FILENO);
            close(null_fd);
        }
        execvp(args[0], args);
        fprintf(stderr, "tfcore: error: cannot run %s: %s\n", args[0], strerror(errno));
        _exit(TF_ERR_RUNTIME);
    }
    free(args);
    int status = 0, stopped = 0;
    pid_t pids[1] = {pid};
    start_wait sw = {ready, rec_path, world, 0, tf_now() + plan->comm.mpirun_start_timeout, false, false};
    /* mpirun kills its ranks on SIGTERM and SIGINT but passes SIGUSR1 on to
     * them (Open MPI's default): each is asked to stop with that */
    stall_watch stall = {rec, plan->comm.timeout_s, 0, false, {0}, report};
    int failed = watch_children(pids, 1, &status, local ? &sw : NULL, SIGUSR1, &stopped, &stall);
    unsetenv(ENV_RELAUNCHED);
    unsetenv(ENV_READY_FILE);
    unsetenv(ENV_LAUNCHER_PID);
    unsetenv(ENV_LAUNCHER_MACHINE);
    unsetenv(ENV_RECORDER_FILE);
    unsetenv(ENV_REPORT_FILE);
    unlink(report);
    if (ready[0]) unlink(ready);
    if (rec_path[0]) unlink(rec_path);
    recorder_free(rec, world);
    if (stall.fired) {
        *err = stall.err;
        return TF_ERR_RUNTIME;
    }
    if (sw.timed_out)
        return tf_error_set(err, TF_ERR_RUNTIME,
                            "mpirun started %d of %d ranks in %g s (comm.mpirun_start_timeout); it was stopped",
                            sw.got < world ? sw.got : world, world, plan->comm.mpirun_start_timeout);
    if (failed >= 0) {
        char how[128];
        describe_status(status, how, sizeof how);
        return tf_error_set(err, status_of(status),
                            "the MPI job failed: mpirun %s (its messages above name the rank and the cause)", how);
    }
    if (stopped) tf_stop_mark_stopped(); /* the ranks saved and said so; mpirun passed their status on */
    return TF_OK;
}

/* --- a rank of the job tfcore started under mpirun ------------------------------ */

static void *watch_launcher(void *arg)
{
    pid_t pid = (pid_t)(intptr_t)arg;
    int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pfd >= 0) { /* readable when the process ends */
        struct pollfd p = {pfd, POLLIN, 0};
        while (poll(&p, 1, -1) < 0 && errno == EINTR) {}
    } else if (errno != ESRCH) { /* no pidfd (old kernel): look once a second */
        while (kill(pid, 0) == 0 || errno == EPERM) sleep(1);
    }
    tf_log(TF_LOG_ERROR, "the tfcore that launched this job (pid %d) is gone: stopping this rank", (int)pid);
    _exit(TF_ERR_RUNTIME);
    return NULL;
}

/* Report this rank's start to the launcher, and end with the launcher; the
 * launcher's recorder for this rank's trainer, or NULL. */
static tf_comm_recorder *started_under_launcher(int world)
{
    /* mapped before the start is reported: the launcher removes the file once all started */
    const char *rec_path = getenv(ENV_RECORDER_FILE);
    tf_comm_recorder *rec = rec_path && *rec_path ? recorder_attach(-1, rec_path, world) : NULL;
    const char *ready = getenv(ENV_READY_FILE);
    if (ready && *ready) {
        int fd = open(ready, O_WRONLY | O_APPEND | O_CLOEXEC);
        if (fd >= 0) {
            if (write(fd, "1", 1) != 1) tf_debug("cannot report the start to %s: %s", ready, strerror(errno));
            close(fd);
        }
    }
    /* the launcher's pid names it only on its machine, in its PID namespace */
    int launcher;
    pthread_t th;
    char here[128];
    const char *there = getenv(ENV_LAUNCHER_MACHINE);
    machine_id(here, sizeof here);
    if (there && here[0] && strcmp(there, here) == 0 && env_int(ENV_LAUNCHER_PID, &launcher) && launcher > 1 &&
        pthread_create(&th, NULL, watch_launcher, (void *)(intptr_t)launcher) == 0)
        pthread_detach(th);
    return rec;
}

/* --- the dispatcher ----------------------------------------------------------- */

tf_status tf_launch_train(const tf_plan *plan, const tf_launch_cmd *cmd, tf_error *err)
{
    const tf_loaded_plugin *cp = plan->plugin[TF_KIND_COMM];
    const tf_comm_vtable *cvt = cp ? cp->desc->vtable : NULL;
    int world = plan->comm.world_size;
    if (getenv(ENV_RANK)) return run_started_worker(plan, cvt, err); /* its launcher checked */

    external_env e;
    read_external_env(&e);
    bool external = e.found && e.size > 1;
    tf_launch_mode mode = cvt ? cvt->launch_mode() : (tf_launch_mode)0;
    tf_section *cs = tf_config_section(plan->cfg, "comm");
    if (external && !cvt)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: started as rank %d of %d by %s, but the config has no comm section: every rank "
                            "would train alone into the same output_dir (add comm = { plugin = \"mpi\"; "
                            "world_size = %d; })",
                            plan->config_file, e.rank, e.size, e.source, e.size);
    if (external && mode == TF_LAUNCH_THREADS)
        return tf_error_set(err, TF_ERR_CONFIG,
                            "%s: comm '%s' runs its workers as threads of one process; start tfcore once, not "
                            "under %s",
                            tf_cfg_where(cs, "plugin"), cp->desc->name, e.source);
    if (external && mode == TF_LAUNCH_EXTERNAL && e.slurm_only) {
        const char *type = getenv("SLURM_MPI_TYPE");
        return tf_error_set(err, TF_ERR_CONFIG,
                            "started as rank %d of %d by `srun --mpi=%s`, which gives the ranks no PMIx: comm '%s' "
                            "cannot connect the ranks; run `srun --mpi=pmix` (`srun --mpi=list` shows what this "
                            "Slurm offers), or set MpiDefault=pmix in slurm.conf",
                            e.rank, e.size, type && *type ? type : "none", cp->desc->name);
    }
    if (external && e.size != world)
        return tf_error_set(err, TF_ERR_CONFIG, "%s: %s started %d ranks, but comm.world_size is %d",
                            tf_cfg_where(cs, "world_size"), e.source, e.size, world);
    tf_status st = tf_launch_check_devices(plan, cmd, err);
    /* overwrite_output_dir, once per job: by the launcher, or by rank 0 of an external launch */
    if (!st && (!external || e.rank == 0)) st = tf_output_dir_check(&plan->training, err);
    if (st) return st;
    if (!cvt) {
        tf_worker w = tf_worker_single();
        tf_stop_install();
        return run_one(plan, &w, err);
    }
    if (external) {
        tf_stop_install();
        tf_comm_recorder *rec = getenv(ENV_RELAUNCHED) ? started_under_launcher(e.size) : NULL;
        tf_worker w = {e.rank, e.size, e.local_rank, e.local_size, TF_LAUNCH_EXTERNAL, cvt, NULL, rec};
        st = run_one(plan, &w, err);
        recorder_free(rec, e.size);
        return st;
    }
    switch (mode) {
    case TF_LAUNCH_THREADS: tf_stop_install(); return run_threads(plan, cvt, world, err);
    case TF_LAUNCH_PROCESSES: return run_processes(plan, world, cmd, err);
    case TF_LAUNCH_EXTERNAL:
        if (world == 1) { /* MPI starts a singleton without mpirun */
            tf_worker w = {0, 1, 0, 1, TF_LAUNCH_EXTERNAL, cvt, NULL, NULL};
            tf_stop_install();
            return run_one(plan, &w, err);
        }
        return relaunch_under_mpirun(plan, world, cmd, err);
    }
    return tf_error_set(err, TF_ERR_PLUGIN, "comm '%s' returned an unknown launch mode %d", cp->desc->name, (int)mode);
}
