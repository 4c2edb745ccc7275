//go:build !linux

package statemachine

import "time"

// threadCPU is not measured here: the figures are wall time alone.
func threadCPU() time.Duration { return 0 }
