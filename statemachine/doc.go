// Package statemachine executes GeoEvent operations deterministically.
//
// A [StateMachine] holds every entity's events and answers every operation of
// SPEC.md. Each operation arrives with its timestamp (nanoseconds since the
// Unix epoch, assigned by the leader and carried in the log); the state
// machine never reads a clock, does no IO and starts no goroutine, so the
// same operations with the same timestamps give the same state and the same
// replies on every replica.
//
// # Invariants
//
//   - Every stored entity has at least one event. Its events have strictly
//     increasing timestamps; the newest is its latest position.
//   - lastTS is at least every stored timestamp, so a fresh timestamp
//     max(opTS, lastTS+1) never collides with a stored event.
//   - The spatial index holds exactly one key (latest.CellID, entity id) per
//     entity; its leaves store the slot and not the id, which is read from
//     the slot's entity when needed (a tie of cell ids), so an entry is
//     removed before its slot changes hands. Writes queue its changes,
//     which are applied sorted by cell once enough have built up or before
//     anything reads the index (spatialbatch.go). The id index maps each
//     id to its slot through 32 bits of the id's hash, comparing the id in
//     the slot's entity (ids.go). The
//     expiry index holds one (expiresAt, entity id) per entity with a
//     finite expiry; the older-due index one (soonest removal due of its
//     older events, entity id) per entity with an older event that has a
//     TTL (history.go keeps a bound of that soonest due). The time index holds one live key (latest.TimestampNS,
//     entity id) per entity, and stale keys: an entity's old key is left in
//     place when its latest event changes or it is removed, readers skip
//     keys that no longer match their slot's entity, and a sweep that goes
//     round the index, paid for by the writes that leave stale keys, keeps
//     them to a fraction of the entities.
//   - An entity is visible at time t when expiresAt is 0 or t < expiresAt.
//     Writes to an invisible (expired) entity first erase it, so expired data
//     never comes back. An older event of a visible entity is visible at t
//     when it has no TTL or t is before its own expiry; one that has expired
//     stays stored, unseen, until cleanup removes it or a write at its key
//     takes its place.
//   - Nothing that reaches a reply or the digest depends on Go map order or
//     on slot numbers; slots are an in-memory detail rebuilt on restore. A
//     snapshot lists entities in slot order (cheap to write), so two
//     replicas' snapshots of one state may differ byte for byte, but they
//     restore to the same state and digest.
//   - Older events are in the history store, on disk (core/history.go):
//     applying an operation produces the writes it makes there
//     (TakeHistoryWrites), and an operation whose outcome depends on a
//     stored older event gets the store's answers first (WriteNeeds,
//     CleanupNeeds, Provide), so applying stays a function of the state,
//     the operation and those answers. A history page is finished from the
//     store's events (HistoryStart, FinishHistory). Memory keeps, per
//     entity, facts of its older events (history.go): their count, a bound
//     of the oldest timestamp, a bound of the soonest removal due.
//   - An entity keeps what every index and query reads in 64 bytes; the
//     other fields of its latest event and its older events' facts live in an
//     ext beside it, which takes memory only in chunks of entities where
//     one needs it (store.go). The zero ext is an event without those
//     fields and no older events.
//   - Snapshots are written from a Freeze view beside the writes: the
//     entity store is copy-on-write while a view is out (store.go).
//   - One radius, polygon, bbox, nearest or latest page does at most about
//     maxScanWork units of work (about 10 ms; a nearest page always
//     completes the first cap it searches), counted in integers: its plan (a
//     polygon's is charged by its edges, even when the polygon builder
//     serves it from its cache of the last large polygon), its seeks, the
//     keys it examines, the polygon edges judging them reads, the entities
//     it reads and their exact tests. Past the budget it ends early with
//     has_more. The count never depends on time or on cached memory.
//   - A radius, polygon, bbox, nearest, latest-across-all or history query's result
//     (Events, DistancesMM) is the state machine's memory, reused by the
//     next such query, and a latest batch's results by the next latest
//     batch: the caller encodes or copies them first (the replica encodes
//     every reply at once).
//
// # Semantics the spec leaves open (see DESIGN.md)
//
//   - insert appends an event; it fails with EVENT_EXISTS only where the
//     exact key (entity id, timestamp) exists. upsert replaces the event at
//     the given timestamp or, without one, the entity's latest event (the new
//     event gets a fresh timestamp), and inserts where there is none.
//   - A batch is all-or-nothing: if any event is invalid nothing is written
//     and every event's code is reported.
//   - An event expires at its timestamp plus its ttl_seconds (0 = never).
//     The latest event's expiry is the entity's: when an event becomes its
//     entity's latest, the entity's expiry becomes the event's, and
//     /ttl/set, /ttl/extend and /ttl/clear change it. When it passes, the
//     entity — latest position and history — is invisible, and cleanup
//     removes it. An older event expires on its own at its own expiry (what
//     /ttl/* did while it was the latest does not follow it): it leaves the
//     history, counts as absent for writes at its key (an insert there
//     succeeds, an upsert there reports updated false), and cleanup
//     removes it. Cleanup takes entities soonest due first, an entity being
//     due at the sooner of its own expiry and its older events' removal
//     dues: an older event's expiry plus a sixteenth of its TTL, so that a
//     long history loses its expired events in batches (core.RemovalDue). Taking an entity removes all its expired events. Stats
//     count an expired older event until cleanup removes it.
//   - Radius, polygon and bbox results are ordered by (leaf cell id,
//     entity id), nearest results by (distance, entity id), latest results
//     by (timestamp, entity id) descending, history by timestamp
//     ascending. A cursor is the last key returned, or, when a radius,
//     polygon, bbox or latest page ends at its budget of work
//     (maxScanWork, with fewer results than its limit), the last key whose
//     judgement it completed, or the end of the last range of cells it
//     finished (a nearest page that ends at its budget: the radius of
//     the last cap it completed, after every entity within it).
//   - Fences (fences.go) are state: every change of an entity's latest
//     position, and its removal, is judged against the fences whose S2
//     covering holds its leaf cell (an event that only adds to an
//     entity's history changes nothing), and each transition (enter,
//     exit, inside) goes into the feed (feed.go) with a sequence derived
//     from the log index the replica passes to BeginEntry. Fences, the
//     feed and its retention (set_feed_retention) are in snapshots and
//     the digest.
//
// The leader fills each event's CellID with [AssignCells] (or, on encoded
// records, [AssignRecordCells]) before the operation enters the log;
// applying never recomputes a cell. Fences are the one place applying
// judges geometry: with geom's point tests, which give every replica of
// a build the same answer (fences.go).
package statemachine
