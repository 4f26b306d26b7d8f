# train_setup.sh — the setup the multi-rank training scripts share
# (run_parallel_emu.sh, run_zero_emu.sh, run_pipeline_emu.sh); sourced, not run:
#   setup_name=run_x_emu; . "$(dirname "$0")/train_setup.sh"
# setup_name names the script in its usage line and its temporary folder.
# Takes DIR (the script's first argument, or TFCORE_EMU_DIR: what
# scripts/build-cuda-emu.sh DIR filled) and sets
#   emu, build, tfcore, diff_tool   the emulated plugins, the normal tree, the
#                                   CLI, tests/params_diff (built when missing)
#   tmp                             a temporary folder, removed at exit unless KEEP
#   fail                            0; bad sets it to 1
# exports TFCORE_PLUGIN_PATH (DIR first), TFCORE_EMU_DEVICES=4,
# TFCORE_EMU_NCCL_TIMEOUT_S=120 (a rank that makes no progress this long is an
# error of the NCCL stand-in) and Open MPI's settings for root and shared
# memory, and defines
#   pass NAME           prints "PASS: NAME [N s]" (seconds since the last case)
#   bad NAME [FILE...]  prints "FAIL: NAME [N s]" and the end of each FILE
#   train CFG           tfcore -c $tmp/CFG.cfg, its output in $tmp/CFG.out
#   runs CASE           true when case CASE is to run: every case, or those
#                       whose names EMU_RUNS (an extended regular expression
#                       matched against the whole name) selects, as
#                       scripts/test-emulated-gpu.sh does under ThreadSanitizer
emu=${1:-${TFCORE_EMU_DIR:-}}
[ -n "$emu" ] && [ -f "$emu/tfcore-comm-nccl.so" ] || {
    echo "usage: $setup_name.sh DIR (the folder scripts/build-cuda-emu.sh DIR filled)" >&2
    exit 2
}
emu=$(cd "$emu" && pwd)
build="$emu/build"
tfcore="$build/core/tfcore"
diff_tool="$build/tests/params_diff"
[ -x "$diff_tool" ] || nice make -s -C "$build" tests/params_diff >/dev/null || {
    echo "FAIL: building $diff_tool"
    exit 1
}
case ":${TFCORE_PLUGIN_PATH:-}:" in
*":$emu:"*) ;;
*) export TFCORE_PLUGIN_PATH="$emu${TFCORE_PLUGIN_PATH:+:$TFCORE_PLUGIN_PATH}" ;;
esac
export TFCORE_EMU_DEVICES=4
export TFCORE_EMU_NCCL_TIMEOUT_S=120
OMPI_MCA_btl="self,vader"
OMPI_ALLOW_RUN_AS_ROOT=1
OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM
tmp=$(mktemp -d "/tmp/tfcore-$setup_name-XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
fail=0
last=$(date +%s)
took() { now=$(date +%s); took_s=$((now - last)); last=$now; }
pass() { took; echo "PASS: $1 [$took_s s]"; }
bad() { # NAME [FILE...]: the case failed; show the end of its output
    took
    echo "FAIL: $1 [$took_s s]"
    shift
    for f in "$@"; do [ -f "$f" ] && tail -n 15 "$f" | sed 's/^/    /'; done
    fail=1
}
train() { "$tfcore" -c "$tmp/$1.cfg" >"$tmp/$1.out" 2>&1; }
runs() { [ -z "${EMU_RUNS:-}" ] || printf '%s\n' "$1" | grep -Eqx -- "$EMU_RUNS"; }
