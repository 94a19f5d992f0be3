//go:build !linux

package egress

import "context"

// platformGuard has no state where the guard is unsupported.
type platformGuard struct{}

func install(context.Context, compiled, *Options, chan<- Denial) (*platformGuard, error) {
	return nil, ErrUnsupported
}

func (*platformGuard) apply(compiled) error { return ErrUnsupported }
func (*platformGuard) stats() Stats         { return Stats{} }
func (*platformGuard) cgroupDir() string    { return "" }
func (*platformGuard) close() error         { return nil }
