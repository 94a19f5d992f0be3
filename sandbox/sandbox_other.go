//go:build !linux

package sandbox

func detectABI() int { return 0 }

func restrict(Policy, int, int, bool) (Rights, error) { return Rights{}, ErrUnsupported }
