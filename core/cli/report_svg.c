/* report_svg.c — `tfcore report --svg`: the comparison as a chart a browser
 * opens. One self-contained SVG (no scripts, no external fonts or styles):
 *
 *   panel 1  a horizontal bar per run: train_runtime, the speedup over the
 *            baseline written on the bar;
 *   panel 2  a horizontal stacked bar per run of where the time went, like a
 *            profile: data, forward, backward, exposed comm, optimizer, eval,
 *            save, and the rest of train_runtime no phase timed. Only the
 *            EXPOSED communication (the time the optimizer waited for it) is
 *            stacked: the rest overlapped with backward and is already inside
 *            it. All communication is a thin black bar under the stack,
 *            ending where the exposed segment ends (so its overlapped part
 *            lies under backward).
 *
 * Each bar and segment carries a <title> (the browser's tooltip) with its
 * exact value; every text from a run is XML-escaped. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report_table.h"

/* Geometry, in SVG user units (px) */
#define SVG_WIDTH 960.0
#define LABEL_RIGHT 200.0 /* run names end here, bars start here */
#define PLOT_WIDTH 560.0  /* the longest bar; right of it, the value labels */
#define BAR_HEIGHT 20.0
#define ROW1_HEIGHT 28.0  /* panel 1: a bar and its gap */
#define ROW2_HEIGHT 34.0  /* panel 2: a bar, the comm marker and a gap */
#define MARKER_HEIGHT 4.0
#define NAME_CHARS 26     /* longer run names are cut, with "…" (full in the tooltip) */
#define CHAR_WIDTH 7.0    /* a rough width of one character at font-size 12 */

/* The stacked segments of panel 2, in order, and their colours (Okabe–Ito,
 * safe for colour-blind readers). */
enum { SEG_DATA, SEG_FORWARD, SEG_BACKWARD, SEG_EXPOSED, SEG_OPTIMIZER, SEG_EVAL, SEG_SAVE, SEG_OTHER, NSEG };
static const char *const seg_label[NSEG] = {"data",      "forward", "backward", "comm (exposed)",
                                            "optimizer", "eval",    "save",     "other (untimed)"};
static const char *const seg_colour[NSEG] = {"#E69F00", "#56B4E9", "#0072B2", "#D55E00",
                                             "#009E73", "#CC79A7", "#F0E442", "#BBBBBB"};
#define RUNTIME_COLOUR "#4C72B0"
#define BASELINE_COLOUR "#2A4A80"
#define COMM_COLOUR "#000000"

/* Text as XML character data or attribute value: & < > " ' escaped, control
 * characters (not allowed in XML 1.0) as spaces. */
static void xml_escape(tf_report_text *t, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        switch (c) {
        case '&': tf_report_puts(t, "&amp;"); break;
        case '<': tf_report_puts(t, "&lt;"); break;
        case '>': tf_report_puts(t, "&gt;"); break;
        case '"': tf_report_puts(t, "&quot;"); break;
        case '\'': tf_report_puts(t, "&apos;"); break;
        default: {
            char one[2] = {(char)(c < 0x20 || c == 0x7F ? ' ' : c), '\0'};
            tf_report_puts(t, one);
        }
        }
    }
}

/* The run's name, cut to NAME_CHARS code points with "…" when longer. */
static void short_name(tf_report_text *t, const char *name)
{
    if (tf_report_width(name) <= NAME_CHARS) {
        xml_escape(t, name);
        return;
    }
    char cut[NAME_CHARS * 4 + 4];
    size_t o = 0, chars = 0;
    for (const char *p = name; *p && o + 4 < sizeof cut; p++) {
        if (((unsigned char)*p & 0xC0) != 0x80 && ++chars > NAME_CHARS - 1) break;
        cut[o++] = *p;
    }
    cut[o] = '\0';
    xml_escape(t, cut);
    tf_report_puts(t, "\xe2\x80\xa6"); /* … */
}

/* An axis from 0 to a round number >= max in 1, 2 or 5 x 10^k steps. */
typedef struct axis {
    double max, step;
} axis;

static axis nice_axis(double max)
{
    axis a = {1.0, 0.2};
    if (!(max > 0) || !isfinite(max)) return a;
    double raw = max / 5.0, mag = pow(10.0, floor(log10(raw))), f = raw / mag;
    a.step = (f <= 1.0 ? 1.0 : f <= 2.0 ? 2.0 : f <= 5.0 ? 5.0 : 10.0) * mag;
    a.max = ceil(max / a.step - 1e-9) * a.step;
    return a;
}

static double x_of(const axis *a, double v) { return LABEL_RIGHT + PLOT_WIDTH * (v > 0 ? v : 0) / a->max; }

/* Grid lines over [top, bottom] and tick labels under it. */
static void draw_axis(tf_report_text *t, const axis *a, double top, double bottom, const char *unit)
{
    tf_report_puts(t, "<g font-size=\"11\" fill=\"#555555\" text-anchor=\"middle\">\n");
    int ticks = (int)floor(a->max / a->step + 0.5);
    for (int k = 0; k <= ticks; k++) {
        double v = k * a->step, x = x_of(a, v);
        tf_report_printf(t, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#DDDDDD\"/>\n", x, top, x,
                         bottom);
        tf_report_printf(t, "<text x=\"%.1f\" y=\"%.1f\">%g%s%s</text>\n", x, bottom + 14, v, k == ticks ? " " : "",
                         k == ticks ? unit : "");
    }
    tf_report_puts(t, "</g>\n");
}

static void run_label(tf_report_text *t, const tf_report_run *run, double y)
{
    tf_report_printf(t, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\"><title>", LABEL_RIGHT - 8,
                     y + BAR_HEIGHT / 2 + 4);
    xml_escape(t, run->dir);
    tf_report_puts(t, "</title>");
    short_name(t, run->name);
    tf_report_puts(t, "</text>\n");
}

/* One segment of a bar from value v0 to v1, with its tooltip. */
static void rect(tf_report_text *t, const axis *a, double v0, double v1, double y, double h, const char *fill,
                 const char *tip_label, double tip_value)
{
    double x0 = x_of(a, v0), x1 = x_of(a, v1);
    tf_report_printf(t, "<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" height=\"%.1f\" fill=\"%s\"><title>", x0, y,
                     x1 - x0, h, fill);
    xml_escape(t, tip_label);
    tf_report_printf(t, ": %.2f s</title></rect>\n", tip_value);
}

/* Panel 1: train_runtime per run, the speedup on each bar. Returns the y below it. */
static double runtime_panel(tf_report_text *t, const tf_report *r, double y)
{
    const tf_report_run *base = &r->runs[r->baseline];
    tf_report_printf(t,
                     "<text x=\"16\" y=\"%.1f\" font-size=\"14\" font-weight=\"bold\">Training time "
                     "(train_runtime) and speedup over ",
                     y);
    short_name(t, base->name);
    tf_report_puts(t, "</text>\n");
    y += 14;
    double max = 0;
    for (size_t i = 0; i < r->n; i++)
        if (r->runs[i].train_runtime > max) max = r->runs[i].train_runtime;
    axis a = nice_axis(max);
    double top = y;
    draw_axis(t, &a, top, top + ROW1_HEIGHT * (double)r->n, "s");
    for (size_t i = 0; i < r->n; i++, y += ROW1_HEIGHT) {
        const tf_report_run *run = &r->runs[i];
        double rt = run->train_runtime, sp = tf_report_speedup(r, i);
        tf_report_puts(t, "<g>\n");
        run_label(t, run, y);
        char speed[32] = "";
        if (!isnan(sp)) snprintf(speed, sizeof speed, "%.2f\xc3\x97", sp); /* 1.93× */
        if (rt > 0) {
            char tip[64];
            snprintf(tip, sizeof tip, "train_runtime (speedup %s)", speed[0] ? speed : "unknown");
            rect(t, &a, 0, rt, y, BAR_HEIGHT, i == r->baseline ? BASELINE_COLOUR : RUNTIME_COLOUR, tip, rt);
        }
        double end = x_of(&a, rt > 0 ? rt : 0);
        bool inside = speed[0] && end - LABEL_RIGHT >= 56; /* room for "12.34×" on the bar */
        if (inside)
            tf_report_printf(t,
                             "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" fill=\"#FFFFFF\" "
                             "font-weight=\"bold\">%s</text>\n",
                             end - 6, y + BAR_HEIGHT / 2 + 4, speed);
        tf_report_printf(t, "<text x=\"%.1f\" y=\"%.1f\">%.1f s%s%s%s</text>\n", end + 6, y + BAR_HEIGHT / 2 + 4,
                         rt, !inside && speed[0] ? ", " : "", !inside ? speed : "",
                         i == r->baseline ? " (baseline)" : "");
        tf_report_puts(t, "</g>\n");
    }
    return y + 34;
}

/* The stacked values of one run (seconds; 0 where unknown) and whether it
 * recorded any phase time. */
static bool segments(const tf_report_run *run, double seg[NSEG])
{
    static const int phase_of[NSEG] = {TF_REPORT_DATA, TF_REPORT_FORWARD, TF_REPORT_BACKWARD, -1,
                                       TF_REPORT_OPTIMIZER, TF_REPORT_EVAL, TF_REPORT_SAVE, -1};
    bool any = false;
    double sum = 0;
    for (int s = 0; s < NSEG; s++) {
        double v = s == SEG_EXPOSED ? run->comm_exposed : phase_of[s] >= 0 ? run->phase[phase_of[s]] : NAN;
        seg[s] = isnan(v) ? 0 : v;
        if (!isnan(v)) any = true;
        sum += seg[s];
    }
    /* what train_runtime holds beyond the timed phases (launch, logging, ...) */
    seg[SEG_OTHER] = any && run->train_runtime > sum ? run->train_runtime - sum : 0;
    return any;
}

/* Panel 2: where the time went. Returns the y below it. */
static double phase_panel(tf_report_text *t, const tf_report *r, double y)
{
    tf_report_printf(t, "<text x=\"16\" y=\"%.1f\" font-size=\"14\" font-weight=\"bold\">Where the time went "
                        "(seconds per phase, as rank 0 timed them)</text>\n",
                     y);
    y += 14;
    double max = 0, seg[NSEG];
    for (size_t i = 0; i < r->n; i++) {
        segments(&r->runs[i], seg);
        double sum = 0;
        for (int s = 0; s < NSEG; s++) sum += seg[s];
        if (sum > max) max = sum;
        double comm = r->runs[i].phase[TF_REPORT_COMM];
        if (comm > max) max = comm;
    }
    axis a = nice_axis(max);
    draw_axis(t, &a, y, y + ROW2_HEIGHT * (double)r->n, "s");
    for (size_t i = 0; i < r->n; i++, y += ROW2_HEIGHT) {
        const tf_report_run *run = &r->runs[i];
        tf_report_puts(t, "<g>\n");
        run_label(t, run, y);
        if (!segments(run, seg)) {
            tf_report_printf(t, "<text x=\"%.1f\" y=\"%.1f\" fill=\"#555555\">no phase times in results.json</text>\n",
                             LABEL_RIGHT + 6, y + BAR_HEIGHT / 2 + 4);
            tf_report_puts(t, "</g>\n");
            continue;
        }
        double v = 0;
        for (int s = 0; s < NSEG; s++) {
            if (seg[s] <= 0) continue;
            rect(t, &a, v, v + seg[s], y, BAR_HEIGHT, seg_colour[s], seg_label[s], seg[s]);
            v += seg[s];
        }
        /* Communication starts during backward; what did not overlap with it
         * is the exposed segment. So the thin bar ends where that segment
         * ends (where backward ends when the exposed time is unknown). */
        double comm = run->phase[TF_REPORT_COMM];
        double comm_end = seg[SEG_DATA] + seg[SEG_FORWARD] + seg[SEG_BACKWARD] + seg[SEG_EXPOSED];
        if (comm > 0) {
            char tip[96];
            if (!isnan(run->comm_exposed))
                snprintf(tip, sizeof tip, "comm in all (%.2f s exposed, the rest overlapped)", run->comm_exposed);
            else
                snprintf(tip, sizeof tip, "comm in all (exposed share not recorded)");
            rect(t, &a, comm_end > comm ? comm_end - comm : 0, comm_end > comm ? comm_end : comm, y + BAR_HEIGHT + 2,
                 MARKER_HEIGHT, COMM_COLOUR, tip, comm);
        }
        double pct = tf_report_exposed_percent(run);
        if (!isnan(pct))
            tf_report_printf(t, "<text x=\"%.1f\" y=\"%.1f\">exposed comm %.1f %%</text>\n", x_of(&a, v) + 6,
                             y + BAR_HEIGHT / 2 + 4, pct);
        tf_report_puts(t, "</g>\n");
    }
    return y + 34;
}

/* The legend of panel 2, in rows that fit the width. Returns the y below it. */
static double legend(tf_report_text *t, double y)
{
    double x = LABEL_RIGHT;
    tf_report_puts(t, "<g font-size=\"12\">\n");
    for (int s = 0; s <= NSEG; s++) {
        const char *label = s < NSEG ? seg_label[s] : "comm in all (thin bar: overlapped + exposed)";
        double w = 22 + CHAR_WIDTH * (double)strlen(label) + 18;
        if (x + w > SVG_WIDTH - 16) {
            x = LABEL_RIGHT;
            y += 20;
        }
        if (s < NSEG)
            tf_report_printf(t, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"14\" fill=\"%s\"/>\n", x, y - 11,
                             seg_colour[s]);
        else
            tf_report_printf(t, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"%.1f\" fill=\"%s\"/>\n", x,
                             y - 6, MARKER_HEIGHT, COMM_COLOUR);
        tf_report_printf(t, "<text x=\"%.1f\" y=\"%.1f\">%s</text>\n", x + 20, y, label);
        x += w;
    }
    tf_report_puts(t, "</g>\n");
    return y + 24;
}

char *tf_report_svg(const tf_report *r)
{
    tf_report_text body = {0};
    double y = 30;
    tf_report_printf(&body, "<text x=\"16\" y=\"%.1f\" font-size=\"18\" font-weight=\"bold\">tfcore report: %zu run%s</text>\n",
                     y, r->n, r->n == 1 ? "" : "s");
    y += 20;
    tf_report_printf(&body, "<text x=\"16\" y=\"%.1f\" fill=\"#555555\">speedup = the baseline&apos;s train_runtime / "
                          "the run&apos;s; hover a bar for its exact value</text>\n",
                     y);
    y += 30;
    y = runtime_panel(&body, r, y);
    y = phase_panel(&body, r, y);
    y = legend(&body, y);

    tf_report_text t = {0};
    tf_report_printf(&t,
                     "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                     "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
                     "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\" fill=\"#222222\">\n"
                     "<title>tfcore report</title>\n"
                     "<rect width=\"100%%\" height=\"100%%\" fill=\"#FFFFFF\"/>\n",
                     SVG_WIDTH, ceil(y), SVG_WIDTH, ceil(y));
    if (body.failed) t.failed = true;
    if (body.s) tf_report_puts(&t, body.s);
    tf_report_puts(&t, "</svg>\n");
    free(body.s);
    return tf_report_text_take(&t);
}
