// Package history is the on-disk history store of one replica: every
// event the state machine has stored, kept in a pebble LSM
// (github.com/cockroachdb/pebble/v2) on an injectable filesystem (vfs), so
// that history is bounded by disk, not memory.
//
// # Invariants
//
//   - Key: 'e', the entity id (Hi then Lo, 8 bytes each, big-endian), the
//     timestamp (8 bytes, big-endian): key order is (entity, timestamp)
//     order, and one entity's events are one key range, oldest first. Keys
//     that start with 'm' are metadata; "m/applied" holds the index of the
//     last Apply.
//   - Value: a version byte (1), then every field of the event but the
//     key's, in a fixed order chosen for block compression: the fields an
//     entity rarely changes (the 128-bit ids as two varints each, group,
//     TTL, flags), the cell id, latitude and longitude as 8 big-endian
//     bytes each, then altitude (zig-zag), velocity, accuracy and heading
//     as varints. Each value has one encoding (minimal varints); the
//     decoder rejects anything else with an error. Pebble compresses
//     blocks (snappy in L0, zstd below).
//   - One write-ahead log: pebble's WAL is off, the Raft log is the only
//     one. Apply writes an entry's history writes and the entry's index in
//     one unsynced pebble batch, so the stored index always says exactly
//     which entries the stored events reflect. Replay is idempotent: an
//     entry at or below Applied() is skipped.
//   - Durable when: after a crash the store holds whatever pebble had
//     flushed: whole batches, so exactly the entries up to the Applied()
//     it reopens at. A Checkpoint (a flush, then a pebble checkpoint in a
//     new directory) is durable when it returns and holds exactly the
//     writes up to the index it returns. Recover keeps the store as it is
//     when the caller's log can be replayed onto it (see Recovery), and
//     otherwise Restores the snapshot's checkpoint, atomically (a crash
//     never leaves a part of one); the caller replays the log above.
//     Close flushes, so a store closed cleanly reopens at Applied().
//   - Opening does not wait for compactions: the store's compaction
//     scheduler (openGate) grants none until pebble.Open has returned,
//     so a store with tables piled up in L0 opens in milliseconds and
//     compacts them while it serves.
//   - Reads: a View is a pebble snapshot, consistent as of the Apply
//     before it, whatever Apply does meanwhile. Every block read is
//     checked against its checksum; a damaged block, key or value is
//     never answered from but reported as a *CorruptionError.
//   - Erasure: HistoryDeleteEntity is a range deletion; the store then
//     compacts that key range in the background so that the entity's
//     events leave the store's files. Guaranteed when Close returns (it
//     waits for those compactions, and pebble deletes the replaced tables
//     before it closes), provided no View taken before the deletion was
//     open while the compaction ran (a snapshot keeps what it sees);
//     usually moments after the Apply. Not covered: checkpoints taken
//     before the deletion (they keep their tables until the caller
//     removes them), and the entity's id, which may stay in the MANIFEST
//     as the bound of a table until pebble rewrites the MANIFEST.
//   - Transfer: a checkpoint travels as a checkpoint stream (stream.go):
//     a checksummed header naming its files, then their content, read
//     from disk a chunk at a time (Stream) and written to a staging
//     directory a chunk at a time, in order (Receiver), which checks the
//     header and each file before it reports the stream complete; the
//     directory is then a checkpoint that Restore opens as a store. Neither
//     side holds more than a chunk and the header in memory.
package history
