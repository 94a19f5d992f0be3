//go:build !linux

package sandbox

func restrict(Policy, int, bool) (Rights, error) { return Rights{}, ErrUnsupported }
