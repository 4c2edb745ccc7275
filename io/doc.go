// Package io is the production runtime of one GeoEvent replica: the event
// loop, the framed TCP server, the disk goroutine over package store, the
// real clock and random source, and the cluster file that `replica format`
// writes. It holds no protocol logic: every decision is the replica's.
//
// # Goroutines
//
//   - The event loop (Server.Run) owns the *replica.Replica and is the only
//     goroutine that calls it. It takes one input at a time — a frame, a
//     closed connection, a storage completion, a tick — and after each checks
//     Replica.Err; a replica that failed stops the server.
//   - The disk goroutine performs AppendLog, SaveHardState, Sync and
//     SaveSnapshot against package store, in the order the replica asked,
//     and reports Synced and SnapshotSaved back to the loop. Its queue is
//     unbounded but small in practice: the replica keeps at most one Sync in
//     flight (group commit). A failed write or fsync stops the server: the
//     state of the files is then unknown and only a restart (recovery) may
//     go on.
//   - The accept goroutine, started once the first Sync has completed (the
//     replica has then committed and applied all it recovered, so no client
//     sees the state from before a restart; until then connections wait in
//     the listen backlog), and, per connection, one reader and one writer.
//     A reader decodes frames with core.ReadFrame into a buffer it reuses,
//     hands each to the loop and waits until the loop has handled it (the
//     payload aliases the buffer; this also bounds each connection to one
//     frame in the loop's queue). A bad frame (length, checksum, version,
//     type) closes the connection. A writer drains its connection's bounded
//     send queue, writing every frame queued so far with one writev.
//     SendClient never blocks the loop: when a connection's queue is full
//     (a client that does not read), the connection is closed.
//
// # Data directory
//
//	cluster                       the cluster file (Format): cluster id, replica index, replica count; checksummed
//	log-<first index>.seg         log segments (package store)
//	hardstate                     term, vote, commit (package store)
//	snapshot-<index>-<term>.snap  snapshots, the newest and one fallback (package store)
package io
