#!/usr/bin/env bash
# check-packages.sh [BUILD_DIR]: fails when the configured build uses a Debian package that
# scripts/bootstrap.sh does not install (itself or as a dependency of a package it installs).
#
# A build that works only because someone once installed a package by hand breaks for every
# newcomer; this check makes that mistake fail `make test` instead. It is stricter than "what a
# bare machine has": nothing the build touches may come from outside bootstrap's list.
#
# Files the build uses: the system paths in CMakeCache.txt, the package configs CMake loaded,
# every header in ninja's dependency log and every library on the link lines. dpkg names the
# package that owns each; apt-cache the dependency closure of bootstrap's `packages=( ... )`.
set -uo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
[ -f "$build/CMakeCache.txt" ] || { echo "check-packages: no $build/CMakeCache.txt (configure first)" >&2; exit 2; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

# The packages=( ... ) array of bootstrap.sh, one name a line.
sed -n '/^[[:space:]]*packages=(/,/)/p' scripts/bootstrap.sh | sed 's/#.*//; s/packages=(//; s/)//' |
  tr -s ' \t' '\n\n' | grep -E '^[a-z0-9][a-z0-9.+-]+$' | sort -u > "$tmp/listed"
[ -s "$tmp/listed" ] || { echo "check-packages: no packages=( ... ) array in scripts/bootstrap.sh" >&2; exit 2; }

# Everything those packages bring: themselves and their dependency closure (Depends and
# Pre-Depends; alternatives count, since apt may pick any of them). From apt's lists, and from
# dpkg's own database (which needs no lists: a machine whose apt lists were cleaned still works).
cp "$tmp/listed" "$tmp/queue"
cp "$tmp/listed" "$tmp/seen"
while [ -s "$tmp/queue" ]; do
  dpkg-query -W -f='${Depends}, ${Pre-Depends}\n' $(cat "$tmp/queue") 2>/dev/null |
    tr ',|' '\n\n' | sed 's/([^)]*)//g; s/:any//; s/^ *//; s/ *$//' | grep -E '^[a-z0-9][a-z0-9.+-]+$' |
    sort -u | comm -23 - "$tmp/seen" > "$tmp/new"
  sort -u "$tmp/seen" "$tmp/new" -o "$tmp/seen"
  mv "$tmp/new" "$tmp/queue"
done
{ cat "$tmp/seen"
  apt-cache depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
    --no-replaces --no-enhances $(cat "$tmp/listed") 2>/dev/null | grep -v '^ ' | tr -d '<>'
} | sed 's/:.*//' | sort -u > "$tmp/provided"

# System files the build reads.
{
  grep -oE '=/usr/[^;[:space:]]+' "$build/CMakeCache.txt" | cut -c2-
  grep -oE '_DIR:PATH=/usr/[^;[:space:]]+' "$build/CMakeCache.txt" | sed 's/.*=//' |
    while read -r d; do ls "$d"/*onfig.cmake 2>/dev/null; done
  (cd "$build" && ninja -t deps 2>/dev/null) | grep -oE '^[[:space:]]+/usr/[^[:space:]]+' | tr -d ' \t'
  (cd "$build" && ninja -t commands 2>/dev/null) | grep -oE '/usr/[^[:space:]]+\.(so|a)([.0-9]*)?'
} | sort -u | while read -r f; do [ -f "$f" ] && echo "$f"; done > "$tmp/files"

# Owner of each file, asked in one batch; a file dpkg does not know under the path the build
# used (a symlink) is asked again under its resolved path.
xargs -a "$tmp/files" -d '\n' dpkg -S 2>/dev/null | grep -v '^diversion' | sed 's/: /|/' > "$tmp/owners"
cut -d'|' -f2 "$tmp/owners" | sort -u > "$tmp/known"
sort -u "$tmp/files" | comm -23 - "$tmp/known" | while read -r f; do readlink -f "$f"; done | sort -u > "$tmp/resolved"
[ -s "$tmp/resolved" ] && xargs -a "$tmp/resolved" -d '\n' dpkg -S 2>/dev/null | grep -v '^diversion' | sed 's/: /|/' >> "$tmp/owners"

missing=0
while IFS='|' read -r owners f; do
  for p in $(echo "$owners" | tr ',' ' '); do
    p=${p%%:*}
    grep -qxF "$p" "$tmp/provided" || echo "$p|$f"
  done
done < "$tmp/owners" | sort -t'|' -k1,1 -u > "$tmp/missing"
while IFS='|' read -r p f; do
  echo "check-packages: the build uses $p ($f), which scripts/bootstrap.sh does not install: add it to packages=( ... )" >&2
  missing=1
done < "$tmp/missing"
echo "check-packages: $(wc -l < "$tmp/files") system files from $(cut -d'|' -f1 "$tmp/owners" | tr ',' '\n' | sed 's/^ *//; s/:.*//' | sort -u | wc -l) packages; $([ $missing = 0 ] && echo 'all installed by scripts/bootstrap.sh' || echo 'some are not')"
exit $missing
