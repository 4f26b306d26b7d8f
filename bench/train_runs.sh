# shellcheck shell=bash
# train_runs.sh — what the CPU training benches that compare ways of running
# one fine-tune (bench/scaling.sh, bench/pipeline.sh) share; sourced by bash:
#
#   . "$(dirname "${BASH_SOURCE[0]}")/train_runs.sh"
#   train_runs_init NAME            # build, tfcore (exit 2 outside the build tree),
#                                   # tmp (removed on exit); NAME heads messages
#   train_runs_cfg RUN BATCH STEPS EXTRA
#                                   # $tmp/RUN.cfg: bert-mini, synthetic data at
#                                   # seq 128, fp32, AdamW, one thread a worker,
#                                   # BATCH a device, STEPS steps; EXTRA appended
#   train_runs_header MODEL_LINE    # the machine:, date: and model: lines
#   train_runs_rounds ROUNDS COLLECT RUN...
#                                   # ROUNDS rounds, each running every RUN once
#                                   # in order (exit 1 with its log's tail when one
#                                   # fails), then `COLLECT RUN RESULTS_JSON`
#   field JSON EXPR                 # EXPR over the parsed JSON r, printed
#   median                          # the median of the numbers on stdin
#   span FILE FORMAT                # the lowest and highest number of FILE, printed
#                                   # through FORMAT (two %f conversions)

train_runs_init() { # NAME
    bench_name=$1
    build="${BUILD:-$PWD}"
    tfcore="$build/core/tfcore"
    [ -x "$tfcore" ] || { echo "$bench_name: run from the build tree (no $tfcore)" >&2; exit 2; }
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
}

train_runs_cfg() { # RUN BATCH STEPS EXTRA
    cat >"$tmp/$1.cfg" <<CFG
model = { plugin = "bert"; preset = "bert-mini"; task = "classification"; num_labels = 2; };
data = { plugin = "synthetic"; task = "classification"; num_labels = 2; seq_len = 128;
         num_examples = 65536; eval_examples = 0; learnable = true; };
backend = { plugin = "cpu"; threads = 1; };
training = { output_dir = "$tmp/out-$1"; overwrite_output_dir = true; max_steps = $3;
             per_device_train_batch_size = $2; learning_rate = 5e-5; logging_steps = 1000000;
             eval_strategy = "no"; save_strategy = "no"; };
$4
CFG
}

field() { python3 -c "import json,sys; r=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$1" "$2"; }
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
span() { sort -g "$1" | awk -v f="$2" 'NR==1{lo=$1} {hi=$1} END {printf f, lo, hi}'; }

train_runs_header() { # MODEL_LINE
    echo "machine: $(nproc) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)"
    echo "date:    $(date -u +%Y-%m-%d)"
    echo "model:   $1"
}

train_runs_rounds() { # ROUNDS COLLECT RUN...
    local rounds=$1 collect=$2 k name
    shift 2
    for ((k = 1; k <= rounds; k++)); do
        for name in "$@"; do
            TFCORE_LOG=warn "$tfcore" -c "$tmp/$name.cfg" >"$tmp/$name.$k.log" 2>&1 ||
                { echo "$bench_name: $name failed:" >&2; tail -n 20 "$tmp/$name.$k.log" >&2; exit 1; }
            "$collect" "$name" "$tmp/out-$name/results.json"
        done
    done
}
