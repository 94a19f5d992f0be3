package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// setting is one key of a grouped flag: the former flag of that name.
type setting struct {
	key  string
	ptr  any // *int, *int64, *float64, *time.Duration, *string or *[]string (repeatable)
	help string
}

// group is a flag taking a comma-separated list of key=value settings of
// one concern (-limits pool-size=8,call-timeout=1m): the hotel's less
// common knobs, so that -h lists only the common flags.
type group []setting

func (g group) String() string { return "" }

func (g group) Set(list string) error {
	for _, kv := range strings.Split(list, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		i := -1
		for j, s := range g {
			if s.key == k {
				i = j
			}
		}
		if !ok || i < 0 {
			return fmt.Errorf("%q: want KEY=VALUE with KEY one of %s", kv, g.keys())
		}
		var err error
		switch p := g[i].ptr.(type) {
		case *int:
			*p, err = strconv.Atoi(v)
		case *int64:
			*p, err = strconv.ParseInt(v, 10, 64)
		case *float64:
			*p, err = strconv.ParseFloat(v, 64)
		case *time.Duration:
			*p, err = time.ParseDuration(v)
		case *string:
			*p = v
		case *[]string:
			*p = append(*p, v)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
	}
	return nil
}

func (g group) keys() string {
	var ks []string
	for _, s := range g {
		ks = append(ks, s.key)
	}
	return strings.Join(ks, ", ")
}

// define adds g as flag name, repeatable, its usage listing every key with
// its default.
func (g group) define(fs *flag.FlagSet, name, usage string) {
	var b strings.Builder
	b.WriteString(usage + "; a comma-separated list of KEY=VALUE, repeatable:")
	for _, s := range g {
		def := ""
		switch p := s.ptr.(type) {
		case *int:
			def = strconv.Itoa(*p)
		case *int64:
			def = strconv.FormatInt(*p, 10)
		case *float64:
			def = strconv.FormatFloat(*p, 'g', -1, 64)
		case *time.Duration:
			def = p.String()
		case *string:
			def = *p
		}
		if def != "" {
			def = " (" + def + ")"
		}
		fmt.Fprintf(&b, "\n    %s%s: %s", s.key, def, s.help)
	}
	fs.Var(g, name, b.String())
}

// toggle is a flag that is a bool (-sandbox) or takes a list of options
// (-sandbox=best-effort, -egress=best-effort,allow=10.0.0.5:443).
type toggle struct {
	on, bestEffort bool
	allow          []string // allow=… items, if allowed
	allowOK        bool
}

func (t *toggle) IsBoolFlag() bool { return true }
func (t *toggle) String() string   { return "" }

func (t *toggle) Set(v string) error {
	if b, err := strconv.ParseBool(v); err == nil {
		t.on = b
		return nil
	}
	t.on = true
	for _, item := range strings.Split(v, ",") {
		switch dest, isAllow := strings.CutPrefix(item, "allow="); {
		case item == "best-effort":
			t.bestEffort = true
		case isAllow && t.allowOK:
			t.allow = append(t.allow, dest)
		default:
			return fmt.Errorf("unknown option %q", item)
		}
	}
	return nil
}
