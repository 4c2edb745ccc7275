// Package core is GeoEvent's vocabulary: the types every other package speaks.
//
// It holds 128-bit ids ([Uint128]), the GeoEvent record and its fixed 128-byte
// encoding ([GeoEvent], [RecordSize]), the operation codes ([Operation]), the
// request and reply values of every operation, the operation table with their
// typed codecs ([Op], [Lookup]), and the one table of result
// codes with their names, HTTP statuses and retryability ([Code], [Error]).
//
// core depends on no other package of the project and does no IO.
package core
