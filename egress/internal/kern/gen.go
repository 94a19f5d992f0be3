// Package kern holds the eBPF programs of the egress guard: the C source
// (guard.bpf.c), and the objects and Go bindings bpf2go generated from it.
// The generated files are committed so that building the module needs no
// clang; egress/gen-check.sh regenerates them and fails if they are stale.
package kern

//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Werror" -tags linux -go-package kern -type event -type allow_val -type config -type sk_tag -type lpm4_key -type lpm6_key Guard guard.bpf.c -- -I./include
