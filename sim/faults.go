package sim

import (
	"fmt"
	"strings"
)

// Faults is a fault profile: which kinds of fault a run injects. Delays,
// disk latencies and clock drift are not faults: every profile has them.
// Every fault stops for the quiet period at the end of the run.
type Faults uint8

// The fault profiles (cmd/simulator's --faults).
const (
	// FaultsAll (the zero value, the default) injects every kind of fault,
	// each at a rate drawn from the seed (which may be zero).
	FaultsAll Faults = iota
	// FaultsNone injects nothing: no loss, no duplication, no connection
	// drops, no partitions, no crashes.
	FaultsNone
	// FaultsNetwork loses, duplicates and holds back (reorders) frames on
	// every link, client connections and between replicas, and drops
	// client connections. No partitions, no crashes.
	FaultsNetwork
	// FaultsPartition is FaultsNetwork plus partitions between replicas:
	// symmetric splits, one-way cuts, and an isolated leader.
	FaultsPartition
	// FaultsCrash crashes replicas (losing unsynced writes, with torn
	// tails) and restarts them; in a cluster, a crash may also damage a
	// synced record of the replica's log, or its history checkpoint (of a
	// minority of the replicas at a time), which it must repair, or
	// rebuild, from its peers. Links lose nothing.
	FaultsCrash
)

var faultNames = []string{FaultsAll: "all", FaultsNone: "none", FaultsNetwork: "network", FaultsPartition: "partition", FaultsCrash: "crash"}

func (f Faults) String() string {
	if int(f) < len(faultNames) {
		return faultNames[f]
	}
	return fmt.Sprintf("Faults(%d)", uint8(f))
}

// ParseFaults reads a profile's name: all, none, network, partition or
// crash.
func ParseFaults(s string) (Faults, error) {
	for i, n := range faultNames {
		if s == n {
			return Faults(i), nil
		}
	}
	return 0, fmt.Errorf("unknown fault profile %q (want one of %s)", s, strings.Join(faultNames, ", "))
}

func (f Faults) network() bool    { return f == FaultsAll || f == FaultsNetwork || f == FaultsPartition }
func (f Faults) partitions() bool { return f == FaultsAll || f == FaultsPartition }
func (f Faults) crashes() bool    { return f == FaultsAll || f == FaultsCrash }
