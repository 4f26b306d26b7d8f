#!/bin/sh
# Datasets by name, offline: tests/dataset_server.py (127.0.0.1 only, started
# and stopped here) serves archives and SQuAD files that
# tests/dataset_fixture.py writes.
#  1. an honest aclImdb archive: `tfcore download -c` unpacks exactly its tree
#     into the cache, with the marker, nothing else left; a training run with
#     data.path = "imdb" reads it by name offline; `tfcore download imdb`
#     finds it in the cache
#  2. squad / squad_v2 by name: fetched, `tfcore download imdb squad squad_v2`
#     offline prints the three folders, a training run reads squad by name
#  3. hostile archives (path traversal, absolute path, symlink escape, a file
#     through a link, hardlink escape, device, FIFO, size bomb, too many
#     entries): one line each, exit 5, nothing in the cache, nothing outside
#  4. a wrong sha256: one line, nothing under the final name; a 404
#  5. offline with an empty cache: one line naming the dataset and the command
#  6. two fetches of one dataset at once: both succeed, one download; a
#     connection cut mid-file is resumed
#  7. config checks: data.url with a local path, a bad sha256, squad path names
# Skipped (77) when tfcore was built without libcurl or libarchive.
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
tfcore="$top_builddir/core/tfcore"
py="${TFCORE_PYTHON:-python3}"
command -v "$py" >/dev/null 2>&1 || { echo "SKIP: no $py for the test server"; exit 77; }
tmp=$(mktemp -d /tmp/tfcore-datasets-XXXXXX)
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

unset TFCORE_OFFLINE HF_DATASETS_OFFLINE HF_HUB_OFFLINE TRANSFORMERS_OFFLINE XDG_CACHE_HOME \
      TFCORE_DATASET_MAX_BYTES TFCORE_DATASET_MAX_ENTRIES
export TFCORE_LOG=warn TFCORE_HUB_TIMEOUT_S=5 TFCORE_HUB_RETRIES=1 PYTHONDONTWRITEBYTECODE=1
vocab="$top_srcdir/tests/data/tokenizer/vocab.txt"

"$py" "$top_srcdir/tests/dataset_fixture.py" "$tmp/root" "$top_srcdir" >"$tmp/fixture.out" 2>&1 \
    || { cat "$tmp/fixture.out"; echo "FAIL: cannot make the fixture"; exit 1; }
sha=$("$py" -c "import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],'rb').read()).hexdigest())" \
      "$tmp/root/honest/aclImdb_v1.tar.gz")

# start_server [--slow]: sets $endpoint; bodies logged to $tmp/server.log
start_server() {
    rm -f "$tmp/port" "$tmp/server.log"
    "$py" "$top_srcdir/tests/dataset_server.py" --root "$tmp/root" --port-file "$tmp/port" \
        --log "$tmp/server.log" --lifetime 200 "$@" 2>"$tmp/server.err" &
    pids="$pids $!"
    server_pid=$!
    i=0
    while [ ! -s "$tmp/port" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    [ -s "$tmp/port" ] || { cat "$tmp/server.err"; echo "FAIL: dataset_server did not start"; exit 1; }
    endpoint="http://127.0.0.1:$(cat "$tmp/port")"
}
stop_server() { kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; }

# imdb_cfg FILE DATA-KEYS: a tiny run on the imdb plugin
imdb_cfg() {
    cat >"$1" <<CFG
model = { plugin = "bert"; preset = "bert-tiny"; task = "classification"; num_labels = 2;
          max_position_embeddings = 64; };
data = { plugin = "imdb"; vocab_file = "$vocab"; max_length = 16; $2 };
training = { output_dir = "$tmp/run"; overwrite_output_dir = true; max_steps = 2;
             per_device_train_batch_size = 2; logging_steps = 1; };
CFG
}
# dl CACHE ARGS...: tfcore download with TFCORE_CACHE=CACHE; output in $tmp/out, $tmp/err
dl() {
    c=$1; shift
    TFCORE_CACHE="$c" timeout 60 "$tfcore" download "$@" >"$tmp/out" 2>"$tmp/err"
}
one_line() { # one_line WHAT RC WANT-RC PATTERN: exit WANT-RC, stderr one line matching PATTERN
    if [ "$2" -eq "$3" ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q -- "$4" "$tmp/err"; then ok; else
        bad "$1: expected exit $3 and one line matching '$4', got exit $2:"; cat "$tmp/err"; fi
}
# empty_cache WHAT CACHE: nothing but the lock folder under CACHE/datasets
empty_cache() {
    left=$(cd "$2" 2>/dev/null && find . -mindepth 1 ! -path ./datasets ! -path ./datasets/.locks \
           ! -path './datasets/.locks/*.lock' | sort)
    if [ -z "$left" ]; then ok; else bad "$1: the cache holds:"; echo "$left" | head -20; fi
}

start_server
# --- 1. the honest archive --------------------------------------------------
imdb_cfg "$tmp/honest.cfg" "path = \"imdb\"; url = \"$endpoint/honest/aclImdb_v1.tar.gz\"; sha256 = \"$sha\";"
dl "$tmp/c1" -c "$tmp/honest.cfg"
rc=$?
if grep -q "without libcurl\|without libarchive" "$tmp/err"; then
    echo "SKIP: tfcore was built without libcurl or libarchive"; exit 77
fi
[ $rc -eq 0 ] || { bad "download -c honest.cfg: exit $rc"; cat "$tmp/err"; }
d="$tmp/c1/datasets/imdb"
[ "$(cat "$tmp/out")" = "$d/aclImdb" ] && ok || bad "download printed '$(cat "$tmp/out")', not $d/aclImdb"
(cd "$d" && find aclImdb | sort) >"$tmp/tree"
cmp -s "$tmp/tree" "$tmp/root/honest.tree" && ok || { bad "the unpacked tree differs:"; diff "$tmp/root/honest.tree" "$tmp/tree"; }
[ "$(cat "$d/aclImdb/train/pos/1_8.txt")" = "great movie and great acting" ] && ok || bad "a review's text differs"
grep -q "^sha256\|sha256 $sha" "$d/.tfcore-dataset" && ok || bad "the marker does not record the sha256"
left=$(cd "$tmp/c1/datasets" && find . -mindepth 1 -maxdepth 1 | sort | tr '\n' ' ')
[ "$left" = "./.locks ./imdb " ] && ok || bad "the cache holds more than the dataset: $left"
[ "$(grep -c honest "$tmp/server.log")" -eq 1 ] && ok || bad "the archive was not fetched once"
# a run by name reads the cache, offline
imdb_cfg "$tmp/byname.cfg" 'path = "imdb";'
TFCORE_CACHE="$tmp/c1" HF_HUB_OFFLINE=1 TFCORE_LOG=info timeout 120 "$tfcore" -c "$tmp/byname.cfg" \
    >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && grep -q "imdb: 6 train and 4 eval reviews" "$tmp/err" && ok \
    || { bad "training with data.path = \"imdb\": exit $rc"; tail -5 "$tmp/err"; }
# the same again: the cache is used as it is, nothing is fetched
dl "$tmp/c1" imdb
[ $? -eq 0 ] && [ "$(cat "$tmp/out")" = "$d/aclImdb" ] && ok || { bad "download imdb from the cache"; cat "$tmp/err"; }
[ "$(grep -c honest "$tmp/server.log")" -eq 1 ] && ok || bad "a cached dataset was fetched again"
# a given url that is not where the cached copy came from
dl "$tmp/c1" -c "$tmp/honest.cfg" -o "data.url=\"$endpoint/other/aclImdb_v1.tar.gz\""
one_line "another url" $? 3 "fetched from another URL"

# --- 2. squad and squad_v2 ------------------------------------------------------
cat >"$tmp/squad.cfg" <<CFG
model = { plugin = "bert"; preset = "bert-tiny"; task = "question-answering";
          max_position_embeddings = 64; };
data = { plugin = "squad"; path = "squad"; url = "$endpoint/squad/"; vocab_file = "$vocab";
         max_seq_length = 64; doc_stride = 16; };
training = { output_dir = "$tmp/qa"; overwrite_output_dir = true; max_steps = 1;
             per_device_train_batch_size = 2; };
CFG
dl "$tmp/c1" -c "$tmp/squad.cfg"
[ $? -eq 0 ] && [ "$(cat "$tmp/out")" = "$tmp/c1/datasets/squad" ] && ok || { bad "download -c squad.cfg"; cat "$tmp/err"; }
cmp -s "$tmp/c1/datasets/squad/dev-v1.1.json" "$tmp/root/squad/dev-v1.1.json" && ok || bad "dev-v1.1.json differs"
dl "$tmp/c1" -c "$tmp/squad.cfg" -o 'data.path="squad_v2"'
[ $? -eq 0 ] && [ -f "$tmp/c1/datasets/squad_v2/train-v2.0.json" ] && ok || { bad "download squad_v2"; cat "$tmp/err"; }
TFCORE_OFFLINE=1 dl "$tmp/c1" imdb squad squad_v2
rc=$?
printf '%s\n' "$tmp/c1/datasets/imdb/aclImdb" "$tmp/c1/datasets/squad" "$tmp/c1/datasets/squad_v2" >"$tmp/want"
[ $rc -eq 0 ] && cmp -s "$tmp/out" "$tmp/want" && ok || { bad "download imdb squad squad_v2 offline"; cat "$tmp/out" "$tmp/err"; }
TFCORE_CACHE="$tmp/c1" TFCORE_OFFLINE=1 timeout 120 "$tfcore" -c "$tmp/squad.cfg" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && ok || { bad "training with data.path = \"squad\": exit $rc"; tail -5 "$tmp/err"; }

# --- 3. hostile archives --------------------------------------------------------
n=0
for case in traversal:"is not a name inside" absolute:"is an absolute path" symlink:"points outside" \
            through:"passes through 'aclImdb/in', which is a link" hardlink:"points outside" \
            device:"is a character device" fifo:"is a FIFO" bomb:"unpacked size past 1000000 bytes (TFCORE_DATASET_MAX_BYTES" \
            entries:"more than 1000 entries"; do
    name=${case%%:*} want=${case#*:}
    n=$((n + 1))
    imdb_cfg "$tmp/h.cfg" "path = \"imdb\"; url = \"$endpoint/$name/aclImdb_v1.tar.gz\";"
    TFCORE_DATASET_MAX_BYTES=1000000 TFCORE_DATASET_MAX_ENTRIES=1000 dl "$tmp/h$n" -c "$tmp/h.cfg"
    one_line "hostile archive '$name'" $? 5 "refused: .*$want"
    empty_cache "hostile archive '$name'" "$tmp/h$n"
done
escaped=$(find "$tmp" -name 'escaped-*' | head -3)
[ -z "$escaped" ] && ok || bad "a hostile archive wrote outside the cache: $escaped"

# --- 4. a wrong sha256, a 404 -------------------------------------------------------
dl "$tmp/c4" -c "$tmp/honest.cfg" -o "data.sha256=\"$(printf '0%.0s' $(seq 64))\""
one_line "wrong sha256" $? 5 "checksum mismatch for $endpoint/honest/aclImdb_v1.tar.gz: expected sha256 0000"
empty_cache "wrong sha256" "$tmp/c4"
imdb_cfg "$tmp/404.cfg" "path = \"imdb\"; url = \"$endpoint/missing/aclImdb_v1.tar.gz\";"
dl "$tmp/c4" -c "$tmp/404.cfg"
one_line "404" $? 5 "HTTP 404 from $endpoint/missing/aclImdb_v1.tar.gz"
empty_cache "404" "$tmp/c4"

# squad: the train file verified and moved on, the dev file's checksum wrong:
# neither stays in the cache
train_sha=$("$py" -c "import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],'rb').read()).hexdigest())" \
      "$tmp/root/squad/train-v1.1.json")
dl "$tmp/c4b" -c "$tmp/squad.cfg" -o "data.train_sha256=\"$train_sha\"" \
    -o "data.validation_sha256=\"$(printf 'f%.0s' $(seq 64))\""
one_line "squad, wrong dev sha256" $? 5 "checksum mismatch for $endpoint/squad/dev-v1.1.json"
empty_cache "squad, wrong dev sha256" "$tmp/c4b"

# --- 5. offline with an empty cache --------------------------------------------------
for var in TFCORE_OFFLINE HF_HUB_OFFLINE HF_DATASETS_OFFLINE; do
    env "$var=1" TFCORE_CACHE="$tmp/c5" timeout 20 "$tfcore" download imdb >"$tmp/out" 2>"$tmp/err"
    one_line "offline ($var)" $? 5 "dataset 'imdb' is not in the tfcore cache $tmp/c5/datasets (offline: $var is set); fetch it with \`tfcore download imdb\`"
done
TFCORE_CACHE="$tmp/c5" HF_HUB_OFFLINE=1 timeout 60 "$tfcore" -c "$tmp/byname.cfg" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 5 ] && tail -n 1 "$tmp/err" | grep -q 'data.path "imdb": dataset .imdb. is not in the tfcore cache.*tfcore download imdb' \
    && ok || { bad "a run offline with an empty cache: exit $rc"; tail -3 "$tmp/err"; }
[ ! -e "$tmp/c5/datasets/imdb" ] && ok || bad "offline left something in the cache"
# --dry-run: offline, the missing dataset is the one line; online, nothing is downloaded
TFCORE_CACHE="$tmp/c5" TFCORE_OFFLINE=1 timeout 20 "$tfcore" -c "$tmp/byname.cfg" --dry-run >"$tmp/out" 2>"$tmp/err"
one_line "--dry-run offline" $? 5 'data.path "imdb": dataset .imdb. is not in the tfcore cache.*tfcore download imdb'
TFCORE_CACHE="$tmp/c5" TFCORE_OFFLINE=1 timeout 20 "$tfcore" -c "$tmp/squad.cfg" --dry-run >"$tmp/out" 2>"$tmp/err"
one_line "--dry-run offline (squad)" $? 5 'data.path "squad": dataset .squad. is not in the tfcore cache.*tfcore download squad'
TFCORE_CACHE="$tmp/c5" timeout 20 "$tfcore" -c "$tmp/honest.cfg" --dry-run >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 0 ] && [ ! -e "$tmp/c5/datasets/imdb" ] && ok || { bad "--dry-run online: exit $rc, or it downloaded"; cat "$tmp/err"; }

# --- 6. two fetches at once -------------------------------------------------------------
stop_server
start_server --slow
imdb_cfg "$tmp/honest.cfg" "path = \"imdb\"; url = \"$endpoint/honest/aclImdb_v1.tar.gz\"; sha256 = \"$sha\";"
TFCORE_CACHE="$tmp/c6" timeout 60 "$tfcore" download -c "$tmp/honest.cfg" >"$tmp/o1" 2>"$tmp/e1" &
p1=$!
TFCORE_CACHE="$tmp/c6" timeout 60 "$tfcore" download -c "$tmp/honest.cfg" >"$tmp/o2" 2>"$tmp/e2" &
p2=$!
wait $p1; r1=$?
wait $p2; r2=$?
if [ $r1 -eq 0 ] && [ $r2 -eq 0 ] && cmp -s "$tmp/o1" "$tmp/o2"; then ok; else
    bad "two fetches at once: exit $r1 and $r2"; cat "$tmp/e1" "$tmp/e2"; fi
[ "$(grep -c honest "$tmp/server.log")" -eq 1 ] && ok || { bad "two fetches at once downloaded twice:"; cat "$tmp/server.log"; }
(cd "$tmp/c6/datasets/imdb" && find aclImdb | sort) >"$tmp/tree"
cmp -s "$tmp/tree" "$tmp/root/honest.tree" && ok || bad "two fetches at once: the tree differs"
# what a killed fetch left: a half-unpacked folder (tidied) and a partial
# download (resumed from its last byte)
mkdir -p "$tmp/c6c/datasets/.tmp-imdb-99999/aclImdb" "$tmp/c6c/datasets/.downloads/imdb"
total=$(wc -c <"$tmp/root/honest/aclImdb_v1.tar.gz")
half=$((total / 2))
head -c $half "$tmp/root/honest/aclImdb_v1.tar.gz" >"$tmp/c6c/datasets/.downloads/imdb/aclImdb_v1.tar.gz.incomplete"
: >"$tmp/server.log"
dl "$tmp/c6c" -c "$tmp/honest.cfg"
rc=$?
if [ $rc -eq 0 ] && grep -q "^honest/aclImdb_v1.tar.gz 206 $((total - half))\$" "$tmp/server.log"; then ok; else
    bad "a partial download left over: exit $rc, server log:"; cat "$tmp/server.log" "$tmp/err"; fi
left=$(cd "$tmp/c6c/datasets" && find . -mindepth 1 -maxdepth 1 | sort | tr '\n' ' ')
[ "$left" = "./.locks ./imdb " ] && ok || bad "a killed fetch's leftovers stay: $left"
stop_server

# --- 6b. a connection cut mid-file: resumed with Range -----------------------------------
start_server --reset
imdb_cfg "$tmp/honest.cfg" "path = \"imdb\"; url = \"$endpoint/honest/aclImdb_v1.tar.gz\"; sha256 = \"$sha\";"
# (and a folder of the dataset's name without the marker: replaced whole)
mkdir -p "$tmp/c6b/datasets/imdb/aclImdb/stale"
dl "$tmp/c6b" -c "$tmp/honest.cfg"
rc=$?
if [ $rc -eq 0 ] && [ "$(grep -c '^honest/aclImdb_v1.tar.gz 206 ' "$tmp/server.log")" -eq 1 ]; then ok; else
    bad "a cut download: exit $rc, server log:"; cat "$tmp/server.log" "$tmp/err"; fi
(cd "$tmp/c6b/datasets/imdb" && find aclImdb | sort) >"$tmp/tree"
cmp -s "$tmp/tree" "$tmp/root/honest.tree" && ok || bad "a cut download: the tree differs"
stop_server

# --- 7. config checks ----------------------------------------------------------------------
imdb_cfg "$tmp/k.cfg" "path = \"$top_srcdir/tests/data/imdb/reviews.csv\"; url = \"http://127.0.0.1:1/x\";"
timeout 20 "$tfcore" -c "$tmp/k.cfg" --dry-run >"$tmp/out" 2>"$tmp/err"
one_line "data.url with a local path" $? 3 "data.url is for data.path = \"imdb\""
imdb_cfg "$tmp/k.cfg" 'path = "imdb"; sha256 = "abc";'
timeout 20 "$tfcore" -c "$tmp/k.cfg" --dry-run >"$tmp/out" 2>"$tmp/err"
one_line "a bad sha256" $? 3 "data.sha256 'abc' is not 64 hex digits"
sed 's/path = "squad";/path = "squad3";/' "$tmp/squad.cfg" >"$tmp/k.cfg"
timeout 20 "$tfcore" -c "$tmp/k.cfg" --dry-run >"$tmp/out" 2>"$tmp/err"
one_line "squad path name" $? 3 "data.path 'squad3' is not \"squad\" or \"squad_v2\""

echo "test_datasets: $pass passed, $fail failed"
[ $fail -eq 0 ]
