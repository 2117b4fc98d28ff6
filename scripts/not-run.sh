#!/usr/bin/env bash
# Prints the grid points that tests compiled but did not run on this host (one line each, written
# by tests/unit/host_isa.h), grouped by reason, so that `make test` shows what it could not run.
# Usage: scripts/not-run.sh FILE. Always exits 0: not running a point this CPU cannot run is
# expected; the tests themselves fail on anything else.
file=${1:?usage: not-run.sh FILE}
if [ ! -s "$file" ]; then
  echo "not run: none (every grid point ran on this host)"
  exit 0
fi
echo "not run on this host (compiled and plan-checked only): $(wc -l <"$file") grid points"
sed -E 's/^(.*): not run: (.*)$/\2\t\1/' "$file" | sort | awk -F'\t' '
  $1 != last { if (last != "") print ""; print "  because " $1 ":"; last = $1 }
  { print "    " $2 }'
