//go:build race

package core

// raceEnabled: the race detector is on, and the compiler keeps allocations
// it would otherwise leave out (counting them tells nothing then).
const raceEnabled = true
