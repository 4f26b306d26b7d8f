#!/bin/sh
# Models by Hugging Face name, offline: tests/hub_server.py (127.0.0.1 only,
# started and stopped here) serves a tiny BERT as the hub does.
#  1. `tfcore download` fills a cache with exactly the tree huggingface_hub makes
#  2. a cache filled by the real huggingface_hub client is used by tfcore offline
#     (a short training run with model.pretrained = "org/tiny-bert")
#  3. transformers' from_pretrained loads tfcore's cache offline
#  4. faults: reset mid-file (resumed), a partial file left over (resumed), disk full,
#     404, 401 (token from HF_TOKEN / the token file), 500 then success, wrong
#     checksum, a stalled server, a repo with only pytorch_model.bin, a
#     relative redirect, a server gone with / without a cached copy
#  5. two downloads of one model at once: both succeed, the blob is sent once;
#     huggingface_hub's lock on a blob holds tfcore back
#  6. offline with an empty cache: one line naming the model and the fix
#  7. the cache folder is huggingface_hub's for HF_HUB_CACHE, HF_HOME, XDG_CACHE_HOME, HOME
#  8. a sharded repo (no model.safetensors, an index and its shards): tfcore
#     fetches the same snapshot as huggingface_hub, trains from either cache
#     offline, and from_pretrained reads tfcore's; an index naming a shard
#     outside the snapshot ('..', '/') is refused with one line, nothing fetched
# Skipped (77) when the Python venv lacks huggingface_hub/transformers/torch
# or tfcore was built without libcurl.
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
tfcore="$top_builddir/core/tfcore"
py="${TFCORE_PYTHON:-${TFCORE_VENV:-$HOME/.cache/tfcore/venv}/bin/python}"
if [ ! -x "$py" ] || ! "$py" -c "import huggingface_hub, transformers, torch" 2>/dev/null; then
    if [ "${TFCORE_REQUIRE_REF:-0}" = 1 ]; then
        echo "FAIL: '$py' lacks huggingface_hub/transformers/torch (run scripts/setup-python.sh)"; exit 1
    fi
    echo "SKIP: '$py' lacks huggingface_hub/transformers/torch; run scripts/setup-python.sh"; exit 77
fi
tmp=$(mktemp -d /tmp/tfcore-hub-XXXXXX)
pids=""
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null; done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# the environment of every run: nothing from the user's own setup
unset HF_TOKEN HF_TOKEN_PATH HF_HUB_CACHE HUGGINGFACE_HUB_CACHE HF_HUB_OFFLINE TRANSFORMERS_OFFLINE XDG_CACHE_HOME
export HF_HOME="$tmp/hfhome" TFCORE_LOG=warn TFCORE_HUB_TIMEOUT_S=5 TFCORE_HUB_RETRIES=2
export HF_HUB_DISABLE_TELEMETRY=1 HF_HUB_DISABLE_PROGRESS_BARS=1 PYTHONDONTWRITEBYTECODE=1

timeout 300 "$py" "$top_srcdir/tests/hub_fixture.py" "$tmp/root" >"$tmp/fixture.out" 2>&1 \
    || { cat "$tmp/fixture.out"; echo "FAIL: cannot make the fixture"; exit 1; }
sha=$("$py" -c "import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],'rb').read()).hexdigest())" \
      "$tmp/root/org/tiny-bert/model.safetensors")

# start_server TAG [server options]: sets $endpoint; the server logs LFS bodies to $tmp/TAG.log
start_server() {
    tag=$1; shift
    rm -f "$tmp/$tag.port"
    "$py" "$top_srcdir/tests/hub_server.py" --root "$tmp/root" --port-file "$tmp/$tag.port" \
        --log "$tmp/$tag.log" --lifetime 120 "$@" 2>"$tmp/$tag.err" &
    pids="$pids $!"
    server_pid=$!
    i=0
    while [ ! -s "$tmp/$tag.port" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    [ -s "$tmp/$tag.port" ] || { cat "$tmp/$tag.err"; echo "FAIL: hub_server did not start"; exit 1; }
    endpoint="http://127.0.0.1:$(cat "$tmp/$tag.port")"
}
stop_server() { kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; }
# dl CACHE ARGS...: tfcore download against $endpoint into CACHE; stdout/stderr in $tmp/out, $tmp/err
dl() {
    c=$1; shift
    HF_ENDPOINT="$endpoint" HF_HUB_CACHE="$c" timeout 60 "$tfcore" download "$@" >"$tmp/out" 2>"$tmp/err"
}
one_line() { # one_line WHAT PATTERN: stderr is exactly one line matching PATTERN
    if [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "$2" "$tmp/err"; then ok; else
        bad "$1: expected one line matching '$2', got:"; cat "$tmp/err"; fi
}
model="models--org--tiny-bert"

# 1. tfcore download, then the real client into another cache: the same tree
start_server main
dl "$tmp/c1" org/tiny-bert
rc=$?
if [ $rc -eq 77 ] || grep -q "without libcurl" "$tmp/err"; then
    echo "SKIP: this tfcore was built without libcurl (hub downloads disabled)"; exit 77; fi
[ $rc -eq 0 ] && ok || { bad "download rc $rc"; cat "$tmp/err"; }
snap1=$(cat "$tmp/out")
HF_ENDPOINT="$endpoint" HF_HUB_CACHE="$tmp/c2" timeout 120 "$py" -c "
from huggingface_hub import snapshot_download
print(snapshot_download('org/tiny-bert'))" >"$tmp/py.out" 2>"$tmp/py.err" && ok \
    || { bad "huggingface_hub snapshot_download"; cat "$tmp/py.err"; }
[ "${snap1#$tmp/c1/}" = "$(sed "s|^$tmp/c2/||" "$tmp/py.out")" ] && ok \
    || bad "snapshot folders differ: $snap1 vs $(cat "$tmp/py.out")"
"$py" - "$tmp/c1" "$tmp/c2" <<'PY' && ok || bad "tfcore's cache is not huggingface_hub's layout"
import os, sys
def tree(root):
    out = {}
    for d, dirs, files in os.walk(root):
        for n in dirs + files:
            p = os.path.join(d, n)
            rel = os.path.relpath(p, root)
            if os.path.islink(p):
                out[rel] = ("link", os.readlink(p))
            elif os.path.isdir(p):
                out[rel] = ("dir",)
            elif rel.startswith(".locks"):
                out[rel] = ("lock",)
            else:
                out[rel] = ("file", open(p, "rb").read())
    return out
a, b = tree(sys.argv[1]), tree(sys.argv[2])
assert a.keys() == b.keys(), sorted(set(a) ^ set(b))
for k in a:
    assert a[k] == b[k], k
assert not any(k.endswith(".incomplete") for k in a)
ref = open(os.path.join(sys.argv[1], "models--org--tiny-bert/refs/main")).read()
assert len(ref) == 40 and ref == os.path.basename(os.listdir(os.path.join(sys.argv[1], "models--org--tiny-bert/snapshots"))[0])
PY
# a second download finds everything cached: no LFS body sent again
dl "$tmp/c1" org/tiny-bert && [ "$(cat "$tmp/out")" = "$snap1" ] && [ "$(wc -l <"$tmp/main.log")" -eq 2 ] && ok \
    || bad "second download: rc/folder/log: $(cat "$tmp/main.log")"

# 2. tfcore trains offline from the cache huggingface_hub filled
cat >"$tmp/run.cfg" <<'CFG'
model = { plugin = "bert"; pretrained = "org/tiny-bert"; task = "classification"; };
data = { plugin = "synthetic"; task = "classification"; num_labels = 2; seq_len = 16;
         num_examples = 16; eval_examples = 8; };
training = { max_steps = 2; per_device_train_batch_size = 8; per_device_eval_batch_size = 8;
             learning_rate = 1e-3; logging_steps = 1; save_strategy = "no"; };
CFG
HF_HUB_OFFLINE=1 HF_ENDPOINT=http://127.0.0.1:9 HF_HUB_CACHE="$tmp/c2" \
    timeout 120 "$tfcore" -c "$tmp/run.cfg" -o training.output_dir="$tmp/run" >"$tmp/run.out" 2>&1 \
    && [ -s "$tmp/run/results.json" ] && ok || { bad "offline run from huggingface_hub's cache"; cat "$tmp/run.out"; }
TRANSFORMERS_OFFLINE=1 HF_ENDPOINT=http://127.0.0.1:9 HF_HUB_CACHE="$tmp/c2" \
    timeout 60 "$tfcore" -c "$tmp/run.cfg" --dry-run >"$tmp/run.out" 2>&1 && ok \
    || { bad "TRANSFORMERS_OFFLINE dry run"; cat "$tmp/run.out"; }

# 3. transformers loads tfcore's cache offline, the same weights as the source
HF_HUB_OFFLINE=1 HF_HUB_CACHE="$tmp/c1" timeout 120 "$py" - "$tmp/root/org/tiny-bert" >"$tmp/tf.out" 2>&1 <<'PY' \
    && ok || { bad "from_pretrained from tfcore's cache"; cat "$tmp/tf.out"; }
import sys, torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer
a = AutoModelForSequenceClassification.from_pretrained("org/tiny-bert", local_files_only=True)
b = AutoModelForSequenceClassification.from_pretrained(sys.argv[1])
tok = AutoTokenizer.from_pretrained("org/tiny-bert")
ids = tok("the movie was good", return_tensors="pt")
assert ids["input_ids"].tolist() == [[2, 5, 7, 8, 9, 3]], ids
with torch.no_grad():
    assert torch.equal(a(**ids).logits, b(**ids).logits)
PY
stop_server

# download -c: what a config names (model.pretrained at model.revision)
start_server cfg
commit=$(basename "$snap1")
dl "$tmp/c1b" -c "$tmp/run.cfg" -o model.revision="\"$commit\"" && [ "$(cat "$tmp/out")" = "$tmp/c1b/$model/snapshots/$commit" ] \
    && [ ! -e "$tmp/c1b/$model/refs" ] && ok || { bad "download -c at a commit"; cat "$tmp/err"; }
dl "$tmp/c1c" -c "$tmp/run.cfg" -o model.pretrained="\"$tmp/root/org/tiny-bert\"" && [ ! -s "$tmp/out" ] \
    && grep -q "is a local path: nothing to fetch" "$tmp/err" && [ ! -e "$tmp/c1c" ] && ok || bad "download -c, a folder"
dl "$tmp/c1c" -c "$tmp/run.cfg" -o model.pretrained='"org/nope"'; [ $? -eq 5 ] && ok || bad "download -c org/nope exit code"
one_line "download -c 404" "model.pretrained 'org/nope': HTTP 404"
dl "$tmp/c1c" -c "$tmp/run.cfg" org/tiny-bert; [ $? -eq 2 ] && ok || bad "download -c with names is a usage error"
# a name that is no folder here and no model on the hub: one line saying both
HF_ENDPOINT="$endpoint" HF_HUB_CACHE="$tmp/c1c" timeout 60 "$tfcore" -c "$tmp/run.cfg" -o model.pretrained='"models/bert-x"' \
    --dry-run >"$tmp/out" 2>"$tmp/err"; [ $? -eq 5 ] && ok || bad "missing folder / unknown name exit code"
one_line "missing folder / unknown name" "model.pretrained 'models/bert-x' is no folder here; as a Hugging Face name: HTTP 404"
stop_server

# 4a. connection reset mid-file: resumed with Range, correct bytes
start_server reset --fault reset
dl "$tmp/c3" org/tiny-bert && cmp -s "$tmp/c3/$model/blobs/$sha" "$tmp/root/org/tiny-bert/model.safetensors" \
    && grep -q "^$sha 206 " "$tmp/reset.log" && ok || { bad "reset then resume"; cat "$tmp/err" "$tmp/reset.log"; }
stop_server
# 4b. a partial file left by a killed process is resumed
start_server partial
mkdir -p "$tmp/c4/$model/blobs"
head -c 1000 "$tmp/root/org/tiny-bert/model.safetensors" >"$tmp/c4/$model/blobs/$sha.incomplete"
dl "$tmp/c4" org/tiny-bert && cmp -s "$tmp/c4/$model/blobs/$sha" "$tmp/root/org/tiny-bert/model.safetensors" \
    && [ ! -e "$tmp/c4/$model/blobs/$sha.incomplete" ] \
    && grep -q "^$sha 206 $(($(wc -c <"$tmp/root/org/tiny-bert/model.safetensors") - 1000))\$" "$tmp/partial.log" \
    && ok || { bad "partial file resumed"; cat "$tmp/err" "$tmp/partial.log"; }
# 4b'. disk full while writing (the partial file is /dev/full): one line, exit 1
if [ -w /dev/full ]; then
    mkdir -p "$tmp/c4f/$model/blobs"
    ln -s /dev/full "$tmp/c4f/$model/blobs/$sha.incomplete"
    dl "$tmp/c4f" org/tiny-bert; [ $? -eq 1 ] && ok || bad "disk full exit code"
    one_line "disk full" "disk full"
    [ ! -e "$tmp/c4f/$model/blobs/$sha" ] && ok || bad "disk full left a blob"
fi
# 4c. 404 and a repo with only pytorch_model.bin
dl "$tmp/c5" org/nope; [ $? -eq 5 ] && ok || bad "404 exit code"
one_line "404" "HTTP 404 from $endpoint/org/nope/resolve/main/config.json: no such model or file"
dl "$tmp/c5" org/bin-only; [ $? -eq 5 ] && ok || bad "bin-only exit code"
one_line "bin-only" "has only pytorch_model.bin.*safetensors"
# 4d. a relative redirect (a renamed repo) is followed
dl "$tmp/c5" old-org/tiny-bert && [ -f "$(cat "$tmp/out")/model.safetensors" ] && ok \
    || { bad "relative redirect"; cat "$tmp/err"; }
# 4e. the server goes away: the cached copy is used (a warning), else one line
stop_server
dl "$tmp/c4" org/tiny-bert && grep -q "cannot reach" "$tmp/err" && ok || { bad "fallback to cache"; cat "$tmp/err"; }
TFCORE_HUB_RETRIES=0 dl "$tmp/c6" org/tiny-bert; [ $? -eq 1 ] && ok || bad "server gone, exit code"
one_line "server gone" "cannot reach $endpoint/org/tiny-bert/resolve/main/config.json"
# 4f. 401: a gated model; HF_TOKEN or the token file opens it
start_server gated --token s3cret
dl "$tmp/c7" org/tiny-bert; [ $? -eq 5 ] && ok || bad "401 exit code"
one_line "401" "HTTP 401 from .*gated or private.*HF_TOKEN"
HF_TOKEN=s3cret dl "$tmp/c7" org/tiny-bert && ok || { bad "HF_TOKEN"; cat "$tmp/err"; }
mkdir -p "$HF_HOME" && printf 's3cret\n' >"$HF_HOME/token"
dl "$tmp/c8" org/tiny-bert && ok || { bad "token file"; cat "$tmp/err"; }
rm -f "$HF_HOME/token"
stop_server
# 4g. 500 then success
start_server e500 --fault error500
dl "$tmp/c9" org/tiny-bert && ok || { bad "500 then success"; cat "$tmp/err"; }
stop_server
# 4h. a wrong checksum: refused, nothing under the final name, nothing partial
start_server badsum --fault badsum
dl "$tmp/c10" org/tiny-bert; [ $? -eq 5 ] && ok || bad "checksum exit code"
one_line "checksum" "checksum mismatch for $endpoint/lfs/$sha: expected sha256 $sha"
[ ! -e "$tmp/c10/$model/blobs/$sha" ] && [ ! -e "$tmp/c10/$model/blobs/$sha.incomplete" ] \
    && ! ls "$tmp"/c10/$model/snapshots/*/model.safetensors >/dev/null 2>&1 && [ ! -e "$tmp/c10/$model/refs/main" ] \
    && ok || bad "checksum mismatch left files: $(find "$tmp/c10" | grep -v locks)"
stop_server
# 4i. a stalled server: a timeout with a clear message, quickly
start_server stall --fault stall
t0=$(date +%s)
TFCORE_HUB_TIMEOUT_S=1 TFCORE_HUB_RETRIES=0 dl "$tmp/c11" org/tiny-bert; rc=$?
t1=$(date +%s)
[ $rc -eq 1 ] && [ $((t1 - t0)) -lt 20 ] && ok || bad "stall: rc $rc after $((t1 - t0)) s"
one_line "stall" "cannot download $endpoint/lfs/$sha: timed out.*TFCORE_HUB_TIMEOUT_S"
stop_server

# 5. two downloads at once: both succeed, the LFS body is sent once
start_server twice --fault slow
dl2() { HF_ENDPOINT="$endpoint" HF_HUB_CACHE="$tmp/c12" timeout 60 "$tfcore" download org/tiny-bert >"$tmp/out$1" 2>"$tmp/err$1"; }
dl2 1 & p1=$!
dl2 2 & p2=$!
wait $p1; r1=$?
wait $p2; r2=$?
[ $r1 -eq 0 ] && [ $r2 -eq 0 ] && cmp -s "$tmp/out1" "$tmp/out2" && ok || { bad "concurrent: rc $r1 $r2"; cat "$tmp/err1" "$tmp/err2"; }
[ "$(grep -c "^$sha " "$tmp/twice.log")" -eq 1 ] && cmp -s "$tmp/c12/$model/blobs/$sha" "$tmp/root/org/tiny-bert/model.safetensors" \
    && ok || bad "concurrent: the blob was sent $(grep -c "^$sha " "$tmp/twice.log") times"
# 5b. huggingface_hub's own lock (filelock on .locks/.../<etag>.lock) holds tfcore back
mkdir -p "$tmp/c14/.locks/$model"
"$py" - "$tmp/c14/.locks/$model/$sha.lock" "$tmp/locked" <<'PY' &
import sys, time
from filelock import FileLock
with FileLock(sys.argv[1]):
    open(sys.argv[2], "w").close()
    time.sleep(2)
PY
lockpid=$!
i=0
while [ ! -e "$tmp/locked" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
t0=$(date +%s.%N)
dl "$tmp/c14" org/tiny-bert; rc=$?
t1=$(date +%s.%N)
wait $lockpid
[ $rc -eq 0 ] && "$py" -c "import sys; sys.exit(0 if float(sys.argv[2]) - float(sys.argv[1]) > 1.0 else 1)" "$t0" "$t1" \
    && ok || bad "tfcore did not wait for huggingface_hub's lock (rc $rc, $t0 .. $t1)"
stop_server

# 8. a sharded repo: the index and each shard it names, as huggingface_hub fetches them
start_server shard
smodel="models--org--sharded"
dl "$tmp/c15" org/sharded && ok || { bad "sharded download"; cat "$tmp/err"; }
snap15=$(cat "$tmp/out")
HF_ENDPOINT="$endpoint" HF_HUB_CACHE="$tmp/c16" timeout 120 "$py" -c "
from huggingface_hub import snapshot_download
print(snapshot_download('org/sharded'))" >"$tmp/py.out" 2>"$tmp/py.err" && ok \
    || { bad "huggingface_hub snapshot_download of the sharded repo"; cat "$tmp/py.err"; }
"$py" - "$tmp/c15/$smodel" "$tmp/c16/$smodel" "$tmp/root/org/sharded" <<'PY' && ok || bad "sharded snapshots differ"
import os, sys
def tree(root, sub):
    out = {}
    for d, _, files in os.walk(os.path.join(root, sub)):
        for n in files:
            p = os.path.join(d, n)
            out[os.path.relpath(p, root)] = os.readlink(p) if os.path.islink(p) else open(p, "rb").read()
    return out
a, b = sys.argv[1], sys.argv[2]
for sub in ("snapshots", "blobs", "refs"):
    assert tree(a, sub) == tree(b, sub), (sub, sorted(set(tree(a, sub)) ^ set(tree(b, sub))))
snap = os.path.join(a, "snapshots", os.listdir(os.path.join(a, "snapshots"))[0])
names = sorted(os.listdir(snap))
assert "model.safetensors" not in names and "model.safetensors.index.json" in names, names
for n in os.listdir(sys.argv[3]):
    assert open(os.path.join(snap, n), "rb").read() == open(os.path.join(sys.argv[3], n), "rb").read(), n
PY
HF_HUB_OFFLINE=1 HF_HUB_CACHE="$tmp/c15" timeout 120 "$py" - "$tmp/root/org/tiny-bert" >"$tmp/tf.out" 2>&1 <<'PY' \
    && ok || { bad "from_pretrained of the sharded model from tfcore's cache"; cat "$tmp/tf.out"; }
import sys, torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer
a = AutoModelForSequenceClassification.from_pretrained("org/sharded", local_files_only=True)
b = AutoModelForSequenceClassification.from_pretrained(sys.argv[1])
ids = AutoTokenizer.from_pretrained("org/sharded")("the movie was good", return_tensors="pt")
with torch.no_grad():
    assert torch.equal(a(**ids).logits, b(**ids).logits)
PY
for c in c15 c16; do
    HF_HUB_OFFLINE=1 HF_ENDPOINT=http://127.0.0.1:9 HF_HUB_CACHE="$tmp/$c" timeout 120 "$tfcore" -c "$tmp/run.cfg" \
        -o model.pretrained='"org/sharded"' -o training.output_dir="\"$tmp/run-$c\"" >"$tmp/run.out" 2>&1 \
        && [ -s "$tmp/run-$c/results.json" ] && ok || { bad "offline run of org/sharded from $c"; cat "$tmp/run.out"; }
done
# an index naming a shard outside the snapshot: one line, exit 5, no shard fetched, no index kept
for r in bad-index-dots bad-index-slash; do
    dl "$tmp/c17" "org/$r"; [ $? -eq 5 ] && ok || bad "$r exit code"
    one_line "$r" "model.safetensors.index.json: weight_map\['bert.pooler.dense.bias'\] = '[./a-z]*evil.safetensors' is not a plain file name; refused"
    [ -z "$(find "$tmp/c17" -name 'evil*')" ] && [ -z "$(find "$tmp/c17/models--org--$r/snapshots" -name 'model.safetensors*')" ] \
        && [ ! -e "$tmp/c17/models--org--$r/refs/main" ] && ok || bad "$r left files: $(find "$tmp/c17" | grep -v locks)"
done
[ "$(grep -c evil "$tmp/shard.log")" -eq 0 ] && ok || bad "a refused shard was requested"
stop_server

# 7. the cache folder: the same as huggingface_hub's for each way of naming it
# (read from the offline message, which names it)
for envs in "HF_HUB_CACHE=$tmp/e/a" "HF_HOME=$tmp/e/b" "XDG_CACHE_HOME=$tmp/e/c" "HOME=$tmp/e/d" \
            "HF_HOME=$tmp/e/b XDG_CACHE_HOME=$tmp/e/c" "HUGGINGFACE_HUB_CACHE=$tmp/e/f HF_HOME=$tmp/e/b"; do
    # shellcheck disable=SC2086
    want=$(env -u HF_HOME $envs HF_HUB_OFFLINE=1 "$py" -c "from huggingface_hub import constants; print(constants.HF_HUB_CACHE)")
    # shellcheck disable=SC2086
    env -u HF_HOME $envs HF_HUB_OFFLINE=1 timeout 60 "$tfcore" download org/tiny-bert >"$tmp/out" 2>"$tmp/err"
    grep -q "the Hugging Face cache $want (offline" "$tmp/err" && ok || { bad "cache folder with $envs: want $want"; cat "$tmp/err"; }
done

# 6. offline with an empty cache: one line with what is missing and the fix
HF_HUB_OFFLINE=1 HF_HUB_CACHE="$tmp/empty" timeout 60 "$tfcore" -c "$tmp/run.cfg" --dry-run >"$tmp/out" 2>"$tmp/err"
[ $? -eq 5 ] && ok || bad "offline empty cache exit code"
one_line "offline empty" "model 'org/tiny-bert' (revision 'main') is not in the Hugging Face cache $tmp/empty .*tfcore download org/tiny-bert"
# model.revision with a local folder is a config error
timeout 60 "$tfcore" -c "$tmp/run.cfg" -o model.pretrained="\"$tmp/root/org/tiny-bert\"" -o model.revision='"v1"' --dry-run \
    >"$tmp/out" 2>"$tmp/err"; [ $? -eq 3 ] && ok || bad "revision with a folder"
one_line "revision with a folder" "model.revision applies to a Hugging Face name"

echo "test_hub: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
