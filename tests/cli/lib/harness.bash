# Shared by the CLI test scripts (sourced, not run: tests/CMakeLists.txt runs tests/cli/*.sh).
# Provides $tmp (removed on exit), pass/fail counters, run CMD... (stdout in $tmp/out, stderr
# in $tmp/err, status in $rc) and expect NAME EXIT_CODE [STDOUT_REGEX [STDERR_REGEX]].
export LC_ALL=C

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

passed=0
failed=0
pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1${2:+ ($2)}"; failed=$((failed + 1)); }

rc=0
run() {
  "$@" >"$tmp/out" 2>"$tmp/err"
  rc=$?
}

expect() {
  local name=$1 want=$2 out_re=${3:-} err_re=${4:-}
  if [ "$rc" -ne "$want" ]; then
    fail "$name" "exit $rc, wanted $want: $(head -c 300 "$tmp/err")"
  elif [ -n "$out_re" ] && ! grep -Eq -- "$out_re" "$tmp/out"; then
    fail "$name" "stdout lacks /$out_re/: $(head -c 300 "$tmp/out")"
  elif [ -n "$err_re" ] && ! grep -Eq -- "$err_re" "$tmp/err"; then
    fail "$name" "stderr lacks /$err_re/: $(head -c 300 "$tmp/err")"
  else
    pass "$name"
  fi
}
