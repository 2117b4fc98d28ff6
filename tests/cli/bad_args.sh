#!/usr/bin/env bash
# Bad command lines never crash `kiln`: each case below gives the exit code it expects (1 a
# problem with the input, 2 a usage error that CLI11 reports, see docs/cli.md) and a piece of the
# message that must name the problem. A timeout or a signal fails the case whatever was expected.
# The sanitizer build runs the same table (ctest registers this script in both builds).
# Usage: bash bad_args.sh KILN_BIN SOURCE_DIR
set -u

if [ $# -ne 2 ]; then
  echo "usage: bash $0 KILN_BIN SOURCE_DIR" >&2
  exit 2
fi
KILN=$1
SRC=$2
LIMIT=${KILN_ERRORS_TIMEOUT:-120}  # seconds per case

passed=0
failed=0
tmp=$(mktemp -d "${TMPDIR:-/tmp}/kiln-bad-args.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT

RMS=$SRC/examples/rmsnorm.tile
ELEM=$SRC/tests/ir/elementwise.tile  # scalar parameters %scale: f32, %n: i64
ATT=(--kernel attention --shape 1,8,2,1,20,80,96)
RN=(--kernel rmsnorm --shape 4,4)

# expect NAME RC 'TEXT' ARGS...: `kiln ARGS...` exits RC and says TEXT (stderr or stdout).
expect() {
  local name=$1 want=$2 text=$3
  shift 3
  timeout "$LIMIT" "$KILN" "$@" </dev/null >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ "$rc" -eq 124 ]; then
    echo "FAIL $name: timed out after ${LIMIT}s"
  elif [ "$rc" -ge 128 ]; then
    echo "FAIL $name: crashed (exit $rc, signal $((rc - 128))): $(tail -c 300 "$tmp/err" | tr '\n' ' ')"
  elif [ "$rc" -ne "$want" ]; then
    echo "FAIL $name: expected exit $want, got $rc: $(head -c 300 "$tmp/err" | tr '\n' ' ')"
  elif ! cat "$tmp/err" "$tmp/out" | grep -qaF -- "$text"; then
    echo "FAIL $name: the message does not say '$text': $(head -c 300 "$tmp/err" | tr '\n' ' ')"
  else
    echo "PASS $name"
    passed=$((passed + 1))
    return
  fi
  failed=$((failed + 1))
}

# --- library kernel shapes: field counts, non-numbers, negative and huge (2^40) extents
expect shape_too_few 1 "has 3 fields; expected 7" run --kernel attention --shape 1,2,3
expect shape_too_many 1 "has 8 fields; expected 7" run --kernel attention --shape 1,8,2,1,20,80,96,5
expect shape_not_numbers 1 "B='a' is not an integer" run --kernel attention --shape a,b,c,d,e,f,g
expect shape_empty_field 1 "Hq='' is not an integer" run --kernel attention --shape 1,,2,1,20,80,96
expect shape_negative 1 "K=-5 must be at least 0" run --kernel attention --shape 1,8,2,1,-5,80,96
expect shape_2pow40 1 "K=1099511627776 is too large" run --kernel attention --shape 1,8,2,1,1099511627776,80,96
expect shape_2pow63 1 "is not an integer" run --kernel attention --shape 1,8,2,1,9223372036854775808,80,96
expect gemm_2pow40 1 "M=1099511627776 is too large" run --kernel gemm --shape 1099511627776,4096,4
expect gemm_fields 1 "expected 3: M,N,K" run --kernel gemm --shape 4,4
expect rmsnorm_2pow40 1 "rows=1099511627776 is too large" run --kernel rmsnorm --shape 1099511627776,4096
expect rmsnorm_negative 1 "rows=-1 must be at least" run --kernel rmsnorm --shape -1,4
expect softmax_fields 1 "expected 2: rows,cols" run --kernel softmax --shape 4
expect layernorm_fields 1 "expected 2: rows,cols" run --kernel layernorm --shape 4,4,4
expect swiglu_fields 1 "expected 2: rows,cols" run --kernel swiglu --shape x
expect gelu_fields 1 "expected 1: n" run --kernel gelu --shape 0,4
expect rope_fields 1 "expected 3: tokens,heads,head_dim" run --kernel rope --shape 4,4
expect unknown_kernel 1 "unknown kernel 'nosuch'" run --kernel nosuch --shape 1
expect kernel_without_shape 1 "needs --shape" run --kernel attention
expect no_kernel 1 "no kernel: give a .tile FILE" run
expect file_and_kernel 1 "not both" run "$RMS" --kernel rmsnorm --shape 4,4

# --- library kernel options
expect block_not_pair 1 "is not BQxBK" run "${ATT[@]}" --block 16
expect block_zero 1 "BQ=0 is out of range" run "${ATT[@]}" --block 0x0
expect block_huge 1 "BQ=1000 is out of range" run "${ATT[@]}" --block 1000x16
expect mask_unknown 1 "--mask 'foo' is not one of causal|none" run "${ATT[@]}" --mask foo
expect scale_text 1 "--scale 'x' is not a finite number" run "${ATT[@]}" --scale x
expect scale_inf 1 "--scale 'inf' is not a finite number" run "${ATT[@]}" --scale inf
expect heads_unknown 1 "--heads 'foo' is not one of stacked|separate" run "${ATT[@]}" --heads foo
expect fma_unknown 1 "--fma 'foo' is not one of fused|unfused" run "${ATT[@]}" --fma foo
expect split_word 1 "--split 'many' is not a number of KV chunks 1..4096, auto or off" run "${ATT[@]}" --split many
expect split_zero 1 "--split '0' is not a number of KV chunks" run "${ATT[@]}" --split 0
expect split_separate 1 "--split needs --heads stacked" run "${ATT[@]}" --split 2 --heads separate
expect split_not_attention 1 "split" run "${RN[@]}" --split 2
expect rope_style 1 "--style 'foo' is not one of neox|interleaved" run --kernel rope --shape 4,4,4 --style foo
expect rope_base 1 "--base 'x' is not a finite number" run --kernel rope --shape 4,4,4 --base x
expect eps_negative 1 "--eps=-1 is out of range" run "${RN[@]}" --eps -1

# --- knobs: unknown names, out-of-range and malformed values
expect knob_unknown 1 "unknown knob 'nosuch'" run "${RN[@]}" --set nosuch=1
expect knob_no_value 1 "expected name=value, got 'threads'" run "${RN[@]}" --set threads
expect knob_no_name 1 "expected name=value, got '=3'" run "${RN[@]}" --set =3
expect knob_threads_zero 1 "knob 'threads': value '0' is outside its legal range" run "${RN[@]}" --set threads=0
expect knob_threads_huge 1 "knob 'threads': value '100000' is outside" run "${RN[@]}" --set threads=100000
expect knob_width 1 "knob 'packet_width': value '3' is outside" run "${RN[@]}" --set packet_width=3
expect knob_lanes_negative 1 "knob 'local_lanes': value '-1' is outside" run "${RN[@]}" --set local_lanes=-1
expect knob_lanes_odd 1 "knob 'local_lanes': value '5' is outside" run "${RN[@]}" --set local_lanes=5
expect knob_isa 1 "knob 'isa': value 'sse' is outside" run "${RN[@]}" --set isa=sse
expect knob_bool 1 "knob 'fast_math': value 'maybe' is outside" run "${RN[@]}" --set fast_math=maybe
expect knob_block_zero 1 "knob 'block_size': value '0' is outside" run "${RN[@]}" --set block_size=0
expect knob_block_multiple 1 "17 is not a multiple of packet_width" run "${RN[@]}" --set block_size=17 --set local_lanes=1
expect knob_block_word 1 "knob 'block_size': value 'many' is outside its legal range" run "${RN[@]}" --set block_size=many
expect knob_partitions 1 "knob 'reduction_partitions': value '0' is outside" run "${RN[@]}" --set reduction_partitions=0
expect knob_bytes_huge 1 "knob 'max_local_bytes': value '99999999999999999999999'" run "${RN[@]}" --set max_local_bytes=99999999999999999999999
expect knob_axis_order 1 "'xyz' is not a permutation of the root domain's axes" run "${RN[@]}" --set root_axis_order=xyz
expect knob_on_compile 1 "unknown knob 'nosuch'" compile "$RMS" --set nosuch=1
expect knob_on_fuzz 1 "unknown knob 'nosuch'" fuzz --programs 1 --set nosuch=1

# --- usage errors (CLI11; exit 2)
expect usage_threads_zero 2 "--threads: Value 0 not in range" run "${RN[@]}" --threads 0
expect usage_check 2 "--check: foo not in" run "${RN[@]}" --check foo
expect usage_seed_negative 2 "expected an integer in 0 .. 2^64-1, got '-1'" run "${RN[@]}" --seed -1
expect usage_seed_2pow64 2 "expected an integer in 0 .. 2^64-1" run "${RN[@]}" --seed 18446744073709551616
expect usage_seed_eval 2 "expected an integer in 0 .. 2^64-1" eval "$RMS" --seed x
expect usage_seed_fuzz 2 "expected an integer in 0 .. 2^64-1" fuzz --programs 1 --seed -2
expect usage_unknown_option 2 "--frobnicate" run "${RN[@]}" --frobnicate
expect usage_emit 2 "--emit: foo not in" compile "$RMS" --emit foo
expect usage_eval_mode 2 "--mode: foo not in" eval "$RMS" --mode foo
expect usage_subcommand 2 "unknown subcommand 'nosuchcmd'" nosuchcmd
expect usage_programs 2 "--programs" fuzz --programs -1
expect usage_peers_threads 2 "--threads: Value 0 not in range" peers --threads 0

# --- scalar parameters of the wrong kind or out of range
expect arg_i64_text 1 "'abc' is not an i64 integer" run "$ELEM" --arg n=abc
expect arg_i64_fraction 1 "'1.5' is not an i64 integer" run "$ELEM" --arg n=1.5
expect arg_i64_float_form 1 "'1.0' is not an i64 integer" run "$ELEM" --arg n=1.0
expect arg_i64_overflow 1 "'99999999999999999999999' is not an i64 integer" run "$ELEM" --arg n=99999999999999999999999
expect arg_i64_hex 1 "'0x10' is not an i64 integer" run "$ELEM" --arg n=0x10
expect arg_f32_text 1 "'zz' is not an f32 number" run "$ELEM" --arg scale=zz
expect arg_f32_empty 1 "'' is not an f32 number" run "$ELEM" --arg scale=
expect arg_unknown 1 "has no scalar parameter %nosuch" run "$ELEM" --arg nosuch=1
expect arg_view 1 "has no scalar parameter %x" run "$ELEM" --arg x=1
expect arg_no_value 1 "--arg expects NAME=VALUE, got 'n'" run "$ELEM" --arg n
expect arg_no_name 1 "--arg expects NAME=VALUE, got '=3'" run "$ELEM" --arg =3
expect arg_eval 1 "'abc' is not an i64 integer" eval "$ELEM" --arg n=abc

# --- paths: missing, directories, a file used as a directory, unwritable outputs
mkdir -p "$tmp/dir.tile"
expect check_missing 1 "cannot open the file for reading [io]" check "$tmp/missing.tile"
expect check_directory 1 "is a directory, not a .tile file [io]" check "$tmp/dir.tile"
expect check_under_file 1 "cannot open the file for reading [io]" check "$RMS/x.tile"
expect print_missing 1 "cannot open the file for reading [io]" print "$tmp/missing.tile"
expect eval_directory 1 "is a directory, not a .tile file [io]" eval "$tmp/dir.tile"
expect run_directory 1 "is a directory, not a .tile file [io]" run "$tmp/dir.tile"
expect compile_missing 1 "cannot open the file for reading [io]" compile "$tmp/missing.tile"
expect fuzz_replay_missing 1 "cannot open the file for reading [io]" fuzz --replay "$tmp/missing.tile"
expect fuzz_replay_directory 1 "is a directory, not a .tile file [io]" fuzz --replay "$tmp/dir.tile"
expect bench_preset_unknown 1 "unknown preset 'nosuch'" bench --preset nosuch --out "$tmp/bench-a"
expect bench_out_exists 1 "already exists; an archive is never overwritten" bench --preset seed-mma-roll --out "$RMS"
expect bench_out_unwritable 1 "cannot create '/proc/kiln-bench'" bench --preset seed-mma-roll --out /proc/kiln-bench
expect audit_missing 1 "not a directory" audit "$tmp/no-archive"
expect audit_not_archive 1 '"verdict": "fail"' audit "$tmp/dir.tile"

# --- peers
expect peers_impl 1 "no implementation named 'foo'" peers --impl foo
expect peers_shape_fields 1 "has 2 fields; expected 7" peers --shape 1,2
expect peers_shape_zero 1 "shape field K is 0" peers --shape 1,8,2,1,0,80,96 --impl native --quick

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
