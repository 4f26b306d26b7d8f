# tests/gpu_backend.sh — sourced (not run) by the GPU shell tests: can
# backend-cuda run here, and what a test does when it cannot.
#
#   gpu_cuda_why TFCORE     returns 0 when `TFCORE plugins --json` lists
#                           backend cuda as usable; else prints one line
#                           saying why and returns 1. The line tells apart
#                           "the plugin loader rejected backend-cuda: <the
#                           loader's reason>" (a missing library, say),
#                           "backend-cuda cannot run here: no CUDA device:
#                           <the probe's reason>" and "not found".
#   gpu_unavailable WHY     the whole test cannot run: "SKIP: WHY", exit 77;
#                           with TFCORE_REQUIRE_GPU=1, "FAIL: ..." and exit 1.
#   gpu_part_unavailable WHY  a part of a test cannot run: prints the SKIP
#                           line and returns 0, or with TFCORE_REQUIRE_GPU=1
#                           prints the FAIL line and returns 1 (the caller
#                           counts the failure).
# TFCORE_REQUIRE_GPU=1 is for machines that have a GPU (scripts/gpu-run.sh
# sets it): there a skip would hide a broken bundle or plugin.

gpu_required() { [ "${TFCORE_REQUIRE_GPU:-0}" = 1 ]; }

gpu_cuda_why() {
    # stdout is the JSON; stderr (log lines, say) is kept apart for a failure
    _gpu_err=$(mktemp "${TMPDIR:-/tmp}/tfcore-gpu-why-XXXXXX") || return 1
    if ! _gpu_json=$("$1" plugins --json 2>"$_gpu_err"); then
        echo "'$1 plugins --json' failed: $(tail -n 1 "$_gpu_err")"
        rm -f "$_gpu_err"
        return 1
    fi
    rm -f "$_gpu_err"
    printf '%s\n' "$_gpu_json" | python3 -c '
import json, sys
try:
    d = json.load(sys.stdin)
except ValueError as e:
    print("tfcore plugins --json gave no JSON (%s)" % e)
    sys.exit(1)
for p in d["plugins"]:
    if p["kind"] == "backend" and p["name"] == "cuda":
        if p["usable"]:
            sys.exit(0)
        print("backend-cuda cannot run here: %s" % p.get("why", "no reason given"))
        sys.exit(1)
for r in d["rejected"]:
    if r["path"].endswith("/tfcore-backend-cuda.so"):
        print("the plugin loader rejected backend-cuda: %s" % r["why"])
        sys.exit(1)
print("backend-cuda was not found (searched %s)" % ":".join(d["searched"]))
sys.exit(1)
'
}

gpu_unavailable() {
    if gpu_required; then
        echo "FAIL: TFCORE_REQUIRE_GPU=1 but the GPU test cannot run: $*"
        exit 1
    fi
    echo "SKIP: $*"
    exit 77
}

gpu_part_unavailable() {
    if gpu_required; then
        echo "FAIL: TFCORE_REQUIRE_GPU=1 but a GPU part cannot run: $*"
        return 1
    fi
    echo "SKIP: $*"
    return 0
}
