// Package examples holds runnable programs that use the GeoEvent Go
// client against a real cluster; copy them as a start:
//
//   - quickstart: connect, insert events, a radius query, an entity's
//     latest position.
//   - failover: a client over three replicas that keeps writing and
//     reading while the leader is lost, with what an application does
//     about the errors the client's own retries did not absorb.
//
// Both take the replicas' addresses (--addresses, or GEOEVENT_ADDRESSES)
// and the cluster id (--cluster, or GEOEVENT_CLUSTER): the id that
// `replica dev` prints in its banner, or that `replica format --cluster`
// was given, or GET /status's cluster_id. For example:
//
//	go run ./cmd/replica dev --data /tmp/geoevent-dev
//	go run ./client/examples/quickstart --cluster <the id in the banner>
//
// The tests of this package build cmd/replica, start real processes (one
// `replica dev` for the quick start, three `replica start` for the failover,
// whose leader they kill), run each program and check what it prints. A
// test also compiles the README's Go snippets, so that they keep
// compiling.
package examples
