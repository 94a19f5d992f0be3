package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
)

// group is a flag taking a comma-separated list of KEY=VALUE settings of
// one concern (-limits pool-size=8,call-timeout=1m), each KEY a flag of the
// group's own FlagSet: the hotel's less common knobs, so that -h lists only
// the common flags; -h lists every key.
type group struct{ *flag.FlagSet }

// newGroup defines the group name on fs.
func newGroup(fs *flag.FlagSet, name, usage string) group {
	g := group{flag.NewFlagSet(name, flag.ContinueOnError)}
	fs.Var(g, name, usage+"; a comma-separated list of KEY=VALUE, repeatable. KEY (default): meaning")
	return g
}

// document adds the group's keys, defaults and meanings to f's usage.
func (g group) document(f *flag.Flag) {
	g.VisitAll(func(k *flag.Flag) {
		def := ""
		if k.DefValue != "" {
			def = " (" + k.DefValue + ")"
		}
		f.Usage += fmt.Sprintf("\n    %s%s: %s", k.Name, def, k.Usage)
	})
}

func (g group) String() string { return "" }

func (g group) Set(list string) error {
	for _, kv := range strings.Split(list, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(kv), "=")
		if g.Lookup(k) == nil {
			var keys []string
			g.VisitAll(func(f *flag.Flag) { keys = append(keys, f.Name) })
			return fmt.Errorf("%q: want KEY=VALUE with KEY one of %s", kv, strings.Join(keys, ", "))
		}
		if err := g.FlagSet.Set(k, v); err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	return nil
}

// confine is what -sandbox or -egress says: on, best effort, and (for
// -egress) more destinations.
type confine struct {
	on, bestEffort bool
	allow          []string
}

// set parses -sandbox or -egress: a bool, or a comma-separated list of
// best-effort and (with allowOK) allow=DEST items, which turns it on.
func (c *confine) set(allowOK bool) func(string) error {
	return func(v string) error {
		if b, err := strconv.ParseBool(v); err == nil {
			c.on = b
			return nil
		}
		c.on = true
		for _, item := range strings.Split(v, ",") {
			switch dest, isAllow := strings.CutPrefix(item, "allow="); {
			case item == "best-effort":
				c.bestEffort = true
			case isAllow && allowOK:
				c.allow = append(c.allow, dest)
			default:
				return fmt.Errorf("unknown option %q", item)
			}
		}
		return nil
	}
}
