#!/bin/sh
# gen-check.sh: regenerate the egress guard's eBPF objects and Go bindings
# (internal/kern) into a scratch directory with the exact go:generate command
# of internal/kern/gen.go, and fail if the committed files differ.
#
# Needs clang, llvm-strip and libbpf headers (Debian: clang llvm libbpf-dev).
# Without clang it prints SKIP and exits 0, unless GEN_CHECK_REQUIRE=1.
# Objects are byte-identical only when built by the same clang and kernel
# headers: the committed ones come from Debian 12's clang 14.0.6 and
# linux-libc-dev 6.1.
set -eu
cd "$(dirname "$0")/internal/kern"

if ! command -v clang >/dev/null 2>&1; then
	if [ "${GEN_CHECK_REQUIRE:-0}" = 1 ]; then
		echo "gen-check: FAIL: clang not found" >&2
		exit 1
	fi
	echo "gen-check: SKIP: clang not found; committed eBPF objects not verified"
	exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

directive=$(sed -n 's|^//go:generate go tool bpf2go ||p' gen.go)
[ -n "$directive" ] || { echo "gen-check: no bpf2go directive in gen.go" >&2; exit 1; }
eval "set -- $directive"
GOPACKAGE=kern go tool bpf2go -output-dir "$tmp" "$@" >"$tmp/log" 2>&1 || {
	cat "$tmp/log" >&2
	echo "gen-check: FAIL: bpf2go failed" >&2
	exit 1
}

status=0
for f in "$tmp"/guard_*; do
	name=$(basename "$f")
	if ! cmp -s "$f" "$name"; then
		echo "gen-check: FAIL: internal/kern/$name is stale; run 'go generate ./egress/...'" >&2
		status=1
	fi
done
for f in guard_*; do
	[ -e "$tmp/$f" ] || { echo "gen-check: FAIL: internal/kern/$f is no longer generated" >&2; status=1; }
done
[ $status -eq 0 ] && echo "gen-check: OK ($(clang --version | head -n1))"
exit $status
