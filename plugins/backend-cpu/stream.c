/* stream.c — backend-cpu streams and events. Every op runs to completion
 * before it returns, so a stream is only a handle (NULL is the default
 * stream), recording an event marks a point that is already reached, and
 * every wait or sync returns at once. They are still real objects so that
 * code written for an asynchronous backend runs unchanged here. */
#include <stdlib.h>

#include "cpu.h"

tf_status cpu_stream_create(tf_backend *be, tf_stream **out, tf_error *err)
{
    if (cpu_need(err, "stream_create", "backend", be) ||
        cpu_need(err, "stream_create", "out", out))
        return TF_ERR_RUNTIME;
    tf_stream *s = calloc(1, sizeof *s);
    if (!s)
        return cpu_fail(err, TF_ERR_RUNTIME, "stream_create", "out of memory (%zu bytes)",
                        sizeof *s);
    s->be = be;
    *out = s;
    return TF_OK;
}

void cpu_stream_destroy(tf_backend *be, tf_stream *s)
{
    (void)be;
    free(s);
}

tf_status cpu_stream_sync(tf_backend *be, tf_stream *s, tf_error *err)
{
    if (s && s->be != be)
        return cpu_fail(err, TF_ERR_RUNTIME, "stream_sync",
                        "the stream belongs to another backend");
    return TF_OK;
}

tf_status cpu_event_create(tf_backend *be, tf_event **out, tf_error *err)
{
    if (cpu_need(err, "event_create", "backend", be) ||
        cpu_need(err, "event_create", "out", out))
        return TF_ERR_RUNTIME;
    tf_event *e = calloc(1, sizeof *e);
    if (!e)
        return cpu_fail(err, TF_ERR_RUNTIME, "event_create", "out of memory (%zu bytes)",
                        sizeof *e);
    e->be = be;
    *out = e;
    return TF_OK;
}

void cpu_event_destroy(tf_backend *be, tf_event *e)
{
    (void)be;
    free(e);
}

tf_status cpu_event_record(tf_backend *be, tf_event *e, tf_stream *s)
{
    if (!e || e->be != be || (s && s->be != be)) return TF_ERR_RUNTIME;
    e->recorded++;
    return TF_OK;
}

tf_status cpu_stream_wait_event(tf_backend *be, tf_stream *s, tf_event *e)
{
    if (!e || e->be != be || (s && s->be != be)) return TF_ERR_RUNTIME;
    return TF_OK;
}

tf_status cpu_event_sync(tf_backend *be, tf_event *e, tf_error *err)
{
    if (cpu_need(err, "event_sync", "event", e)) return TF_ERR_RUNTIME;
    if (e->be != be)
        return cpu_fail(err, TF_ERR_RUNTIME, "event_sync", "the event belongs to another backend");
    return TF_OK;
}
