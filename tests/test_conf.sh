#!/bin/sh
# The ready experiments in conf/: every conf/*.cfg resolves with
# `tfcore train --dry-run` (every @include found, every plugin and key
# checked). Checkpoint folders are stood in for by their config.json alone
# (a dry run reads nothing else). Where a config names a plugin this machine
# lacks or cannot run (cuda without a GPU, nccl, mpi without MPI), its refusal
# must be one line with exit 4 (naming a cpu_*.cfg to run instead when the
# plugin is there but cannot run), and the config must then resolve with that
# plugin swapped for a CPU one (backend cpu, precision fp32, no comm section),
# so every other key is still checked. Then: each experiment's comm, world
# size and precision match its name; the hands-on's hyperparameters resolve
# as CONTEXT.md gives them; and experiments of one comparison differ only in
# backend, comm, precision and output_dir (cpu_* against quickstart.cfg).
set -u
: "${top_builddir:?}" "${top_srcdir:?}"
tfcore="$top_builddir/core/tfcore"
conf="$top_srcdir/conf"
tmp=$(mktemp -d /tmp/tfcore-conf-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
pass=0
fail=0
ok() { pass=$((pass + 1)); }
bad() {
    fail=$((fail + 1))
    echo "FAIL: $*"
}

# Checkpoint folders where the configs expect them (relative to the run's
# folder): config.json as Hugging Face publishes it for each model.
bert_config() { # DIR VOCAB HIDDEN LAYERS HEADS INTERMEDIATE
    mkdir -p "$tmp/work/$1"
    cat >"$tmp/work/$1/config.json" <<EOF
{
  "architectures": ["BertForMaskedLM"],
  "attention_probs_dropout_prob": 0.1,
  "hidden_act": "gelu",
  "hidden_dropout_prob": 0.1,
  "hidden_size": $3,
  "initializer_range": 0.02,
  "intermediate_size": $6,
  "layer_norm_eps": 1e-12,
  "max_position_embeddings": 512,
  "model_type": "bert",
  "num_attention_heads": $5,
  "num_hidden_layers": $4,
  "pad_token_id": 0,
  "type_vocab_size": 2,
  "vocab_size": $2
}
EOF
}
# the hands-on's models are hub names: a Hugging Face cache that has them
# (config.json and an empty model.safetensors: a dry run reads no weights),
# used offline
hub_model() { # NAME VOCAB HIDDEN LAYERS HEADS INTERMEDIATE
    commit=0123456789abcdef0123456789abcdef01234567
    snap="hub/models--$1/snapshots/$commit"
    bert_config "$snap" "$2" "$3" "$4" "$5" "$6"
    : >"$tmp/work/$snap/model.safetensors"
    mkdir -p "$tmp/work/hub/models--$1/refs"
    printf %s "$commit" >"$tmp/work/hub/models--$1/refs/main"
}
export HF_HUB_CACHE="$tmp/work/hub" HF_HUB_OFFLINE=1
hub_model bert-base-cased 28996 768 12 12 3072
hub_model bert-base-uncased 30522 768 12 12 3072
bert_config models/all-MiniLM-L6-v2 30522 384 6 12 1536
# and the datasets are names: a tfcore cache that has them (the marker a
# completed fetch leaves; a dry run reads no data), used offline
export TFCORE_CACHE="$tmp/work/tfcore"
for d in imdb squad squad_v2; do
    mkdir -p "$TFCORE_CACHE/datasets/$d"
    printf 'tfcore dataset %s\n' "$d" >"$TFCORE_CACHE/datasets/$d/.tfcore-dataset"
done
# the configs' folders, for configs with a section taken out; base/ is shared
mkdir -p "$tmp/conf"
ln -s "$conf/base" "$tmp/conf/base"

# section NAME < DUMP: that section of a --dry-run dump, output_dir left out
section() { awk -v s="$1" '$0 ~ "^" s " = \\{" {p = 1} p && !/^  output_dir = / {print} /^\};/ {p = 0}'; }

# 1. every config resolves
n_full=0
n_swapped=0
for cfg in "$conf"/*.cfg; do
    name=$(basename "$cfg" .cfg)
    (cd "$tmp/work" && "$tfcore" train -c "$cfg" --dry-run) >"$tmp/$name.dump" 2>"$tmp/$name.err"
    rc=$?
    if [ "$rc" -eq 0 ]; then
        n_full=$((n_full + 1))
        ok
        continue
    fi
    # refused for a plugin: one line, exit 4; swap that plugin and retry
    file=$cfg
    set --
    tries=0
    while [ "$rc" -ne 0 ] && [ "$tries" -lt 3 ]; do
        tries=$((tries + 1))
        if [ "$rc" -ne 4 ] || [ "$(wc -l <"$tmp/$name.err")" -ne 1 ]; then break; fi
        # a plugin that cannot run here (built, but no GPU): the core names a
        # CPU config of conf/ that does
        if grep -q "cannot run here" "$tmp/$name.err" && ! grep -q "; on this machine run .*/cpu_[a-z0-9]*\.cfg instead$" "$tmp/$name.err"; then
            bad "conf/$name.cfg: the refusal does not name a CPU config: $(cat "$tmp/$name.err")"
        fi
        # (match the kind as the message names it: a "no plugin named" line
        # also lists the search path, whose folders name every kind)
        if grep -q "backend plugin" "$tmp/$name.err"; then
            set -- "$@" -o backend.plugin=cpu
        elif grep -q "comm plugin" "$tmp/$name.err"; then
            sed '/^comm = {/,/^};/d' "$cfg" >"$tmp/conf/$name.cfg"
            file="$tmp/conf/$name.cfg"
        elif grep -Eq "precision plugin|in precision '" "$tmp/$name.err"; then
            # fp16/bf16 (missing, or beyond the cpu backend): fp32
            set -- "$@" -o precision.plugin=fp32
        else
            break
        fi
        echo "$name: $(cat "$tmp/$name.err")" >>"$tmp/refusals"
        (cd "$tmp/work" && "$tfcore" train -c "$file" --dry-run "$@") >"$tmp/$name.dump" 2>"$tmp/$name.err"
        rc=$?
    done
    if [ "$rc" -eq 0 ]; then
        n_swapped=$((n_swapped + 1))
        ok
    else
        bad "conf/$name.cfg does not resolve (exit $rc):"
        sed 's/^/    /' "$tmp/$name.err" | head -5
    fi
done
echo "test_conf: $n_full configs resolved as they are, $n_swapped with plugins this machine lacks swapped for CPU ones:"
[ -f "$tmp/refusals" ] && sed -e 's/^/    refused: /' -e 's/; searched .*//' "$tmp/refusals"

# The CPU comparison must resolve as it is wherever its comm plugin is built.
for pair in cpu_dp2:dp-master cpu_mpi2:mpi; do
    name=${pair%%:*} plugin=${pair#*:}
    if "$tfcore" plugins 2>/dev/null | grep -Eq "^comm +$plugin "; then
        if grep -q "^$name:" "$tmp/refusals" 2>/dev/null; then bad "conf/$name.cfg refused although comm $plugin is here"; else ok; fi
    else
        echo "test_conf: comm plugin $plugin is not built here; conf/$name.cfg checked without its comm section"
    fi
done

# 2. the experiments the issue asks for, their comm, world size and precision
for name in imdb_1gpu imdb_dp2 imdb_dp4 imdb_ddp2 imdb_ddp4 imdb_mpi4 imdb_fp16 imdb_bf16 squad_1gpu squad_ddp4 \
    quickstart cpu_dp2 cpu_mpi2; do
    cfg="$conf/$name.cfg"
    [ -f "$cfg" ] || {
        bad "conf/$name.cfg is missing"
        continue
    }
    case $name in
    *_dp[0-9]*) plugin=dp-master ;;
    *_ddp[0-9]*) plugin=nccl ;;
    *_mpi[0-9]*) plugin=mpi ;;
    *) plugin= ;;
    esac
    world=$(printf '%s' "$name" | sed -n 's/.*_d*[a-z]*\([0-9]\)$/\1/p')
    case $name in *1gpu) world= ;; esac
    comm=$(sed -n '/^comm = {/,/^};/p' "$cfg")
    if [ -z "$plugin" ]; then
        [ -z "$comm" ] && ok || bad "conf/$name.cfg: a one-worker experiment with a comm section"
    else
        printf '%s\n' "$comm" | grep -q "^  plugin = \"$plugin\";" &&
            printf '%s\n' "$comm" | grep -q "^  world_size = $world;" && ok ||
            bad "conf/$name.cfg: want comm.plugin \"$plugin\" and world_size $world, got: $comm"
        # the bucket size is DDP's (nccl, mpi) only: DataParallel has no buckets
        if [ "$plugin" = dp-master ]; then
            printf '%s\n' "$comm" | grep -q bucket_mb && bad "conf/$name.cfg: bucket_mb for dp-master" || ok
        else
            printf '%s\n' "$comm" | grep -q '^  bucket_mb = 25\.0;' && ok || bad "conf/$name.cfg: no bucket_mb = 25.0"
        fi
    fi
    # precision: as resolved, or (where fp16/bf16 was swapped for fp32) as written
    case $name in *fp16) prec=fp16 ;; *bf16) prec=bf16 ;; *) prec=fp32 ;; esac
    if section precision <"$tmp/$name.dump" | grep -q "^  plugin = \"$prec\";$" ||
        sed -n '/^precision = {/,/^};/p' "$cfg" | grep -q "^  plugin = \"$prec\";"; then ok; else
        bad "conf/$name.cfg: precision is not $prec"
    fi
    grep -q "^  output_dir = \"runs/$name\";" "$tmp/$name.dump" && ok || bad "conf/$name.cfg: output_dir is not runs/$name"
done

# 3. the hands-on's settings (CONTEXT.md), as the dry run resolved them
d="$tmp/imdb_1gpu.dump"
for want in 'pretrained = "bert-base-cased";' 'task = "classification";' 'num_labels = 2;' \
    'plugin = "imdb";' 'path = "imdb";' 'max_length = 512;' 'padding = "max_length";' \
    'num_train_epochs = 2.0;' 'per_device_train_batch_size = 16;' 'per_device_eval_batch_size = 16;' \
    'learning_rate = 5e-05;' 'eval_strategy = "epoch";' 'logging_strategy = "no";' 'save_strategy = "no";' \
    'disable_tqdm = true;' 'weight_decay = 0.0; # default' 'warmup_ratio = 0.0; # default' \
    'lr_scheduler_type = "linear"; # default' 'seed = 42; # default'; do
    grep -qF "  $want" "$d" && ok || bad "imdb_1gpu does not resolve to: $want"
done
d="$tmp/squad_1gpu.dump"
for want in 'pretrained = "bert-base-uncased";' 'task = "question-answering";' 'plugin = "squad";' 'path = "squad";' \
    'max_seq_length = 384;' 'doc_stride = 128;' 'learning_rate = 5e-05;' 'num_train_epochs = 2.0;'; do
    grep -qF "  $want" "$d" && ok || bad "squad_1gpu does not resolve to: $want"
done

# 4. one comparison = one model, data and training; only backend, comm and
# precision (and output_dir) vary
same_as() { # BASE NAME SECTIONS...
    base=$1 name=$2
    shift 2
    for s in "$@"; do
        section "$s" <"$tmp/$base.dump" >"$tmp/a"
        section "$s" <"$tmp/$name.dump" >"$tmp/b"
        if [ -s "$tmp/a" ] && cmp -s "$tmp/a" "$tmp/b"; then ok; else
            bad "conf/$name.cfg: section $s differs from conf/$base.cfg's:"
            diff "$tmp/a" "$tmp/b" | head -10
        fi
    done
}
for name in imdb_dp2 imdb_dp4 imdb_ddp2 imdb_ddp4 imdb_mpi4 imdb_fp16 imdb_bf16; do
    same_as imdb_1gpu "$name" model data training
done
same_as squad_1gpu squad_ddp4 model data training
for name in cpu_dp2 cpu_mpi2; do
    same_as quickstart "$name" model data training backend precision
done

echo "test_conf: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
