// Package prefetch asks the processor to start loading a cache line that
// the caller will read soon, without waiting for it.
//
// A plain load that misses the cache holds up the instructions behind it
// until its line arrives (they cannot retire before it), so a loop that
// loads one entity per candidate stalls on each batch of misses. A prefetch
// instruction does not wait for its line (only, when the processor already
// has as many misses in flight as it can hold, for room for one more): the
// line is fetched while the caller goes on with other work, and the read
// that follows finds it in cache. The
// state machine's spatial scans prefetch the entities of each run of
// candidates as they find them, and read them only after judging the rest
// of their keys; they prefetch the index's leaves for their next ranges.
//
// Line is a hint with no effect on what a program computes; where the
// architecture has no implementation here it does nothing.
package prefetch
