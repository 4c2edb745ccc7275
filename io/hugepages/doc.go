// Package hugepages has the Go heap of the process backed by transparent
// huge pages where the system offers them on advice (Advise). It is a leaf
// of production IO, imported by nothing of the project but cmd/replica,
// which calls it first thing, and the state machine's benchmarks (a test
// file), which call it so that they measure the memory a replica runs
// with.
package hugepages
