# shellcheck shell=bash disable=SC2154 # the caller sets out, work, logs, summary, deadline, budget, only
# scripts/gpu-steps.sh — the step runner of scripts/gpu-run.sh, sourced by
# it (and by tests/test_gpu_run.sh, which checks it without a GPU).
#
#   step NAME TIMEOUT CMD...   runs CMD (a program or an exported shell
#       function) with stdout and stderr in $logs/NN-NAME.log, under TIMEOUT
#       seconds cut to what is left before $deadline; appends one line to
#       $summary: PASS, FAIL (exit code), TIMEOUT, or SKIPPED when less than
#       10 s are left; then repacks $work/gpu-run-logs into $out/logs.tar.gz.
#       Returns 0 only for PASS (and for a step left out by --only).
#   say LINE...   prints a line and appends it to $summary
#   pack          repacks the logs (a killed run keeps what was packed)
# The caller sets: out, work, logs (= $work/gpu-run-logs), summary,
# deadline (epoch seconds), budget, only (comma list or empty), nstep=0,
# failed=0 (steps not passed).

say() { printf '%s\n' "$*" | tee -a "$summary"; }
pack() { tar -C "$work" -czf "$out/logs.tar.gz.tmp" gpu-run-logs 2>/dev/null && mv "$out/logs.tar.gz.tmp" "$out/logs.tar.gz"; }
wanted() { # STEP: in --only, or no --only; preflight and env always run
    [ -z "$only" ] && return 0
    case $1 in preflight | env) return 0 ;; esac
    case ",$only," in *",$1,"*) return 0 ;; esac
    return 1
}

step() {
    local name=$1 limit=$2 now left rc t0 dur verdict last log
    shift 2
    wanted "$name" || return 0
    nstep=$((nstep + 1))
    log="$logs/$(printf '%02d' "$nstep")-$name.log"
    now=$(date +%s)
    left=$((deadline - now))
    if [ "$left" -lt 10 ]; then
        failed=$((failed + 1))
        say "$(printf '%-8s %-16s %4s   %s' SKIPPED "$name" - "no time left in the ${budget}s budget (run it with --only $name in another call)")"
        return 1
    fi
    [ "$limit" -le "$left" ] || limit=$left
    t0=$(date +%s)
    # timeout runs programs, not shell functions: the steps' functions and
    # variables are exported, and bash -c runs them inside timeout's process
    # group, which it kills whole
    timeout -k 10 "$limit" bash -c '"$@"' step "$@" >"$log" 2>&1 </dev/null
    rc=$?
    dur=$(($(date +%s) - t0))
    case $rc in
        0) verdict=PASS ;;
        124|137) verdict=TIMEOUT ;;
        *) verdict=FAIL ;;
    esac
    [ "$verdict" = PASS ] || failed=$((failed + 1))
    last=$(grep -v '^[[:space:]]*$' "$log" | tail -n 1 | cut -c1-160)
    [ "$verdict" = TIMEOUT ] && last="killed after ${limit}s; last line: $last"
    [ "$verdict" = FAIL ] && last="exit $rc: $last"
    say "$(printf '%-8s %-16s %4ss  %s' "$verdict" "$name" "$dur" "$last")"
    pack
    [ "$verdict" = PASS ]
}
