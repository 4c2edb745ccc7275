package client

import (
	"github.com/google/uuid"

	"github.com/geoevent/geoevent/core"
)

// ID is the type set of the ids the helpers below take: a core.Uint128
// or a uuid.UUID. It is a constraint, usable only as a type parameter; the
// package documentation ("Ids and positions") says why the methods take core.Uint128.
type ID interface {
	core.Uint128 | uuid.UUID
}

// IDOf returns id as the core.Uint128 the client's methods and requests
// carry: a core.Uint128 as it is, a uuid.UUID through core.FromUUID (its
// bytes big-endian, so that IDOf(u).String() == u.String()).
func IDOf[T ID](id T) core.Uint128 {
	switch v := any(id).(type) {
	case uuid.UUID:
		return core.FromUUID(v)
	case core.Uint128:
		return v
	}
	return core.Uint128{} // unreachable: ID admits no other type
}

// IDs converts ids with IDOf, for the calls that take a list:
//
//	c.GetLatestBatch(ctx, client.IDs(truck, van))   // truck, van uuid.UUID
//	c.DeleteEntities(ctx, client.IDs(uuids...))
func IDs[T ID](ids ...T) []core.Uint128 {
	out := make([]core.Uint128, len(ids))
	for i, id := range ids {
		out[i] = IDOf(id)
	}
	return out
}
