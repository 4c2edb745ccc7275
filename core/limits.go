package core

// Limits of SPEC.md "Limits". Every one is enforced at its edge.
const (
	MaxBatchEvents      = 10_000         // events per insert/upsert batch
	MaxBatchIDs         = 10_000         // ids per getLatestBatch or deleteEntities
	MinPolygonVertices  = 3              // outer (and hole) ring, after closing
	MaxPolygonVertices  = 1_000          // outer ring, and each hole
	MaxPolygonHoles     = 100            // holes per polygon
	DefaultQueryLimit   = 1_000          // results per page when the request sets none
	MaxQueryLimit       = 10_000         // results per page
	MinRadiusMM         = 1              // radius, Form B units
	MaxRadiusMM         = 40_000_000_000 // 40,000 km
	DefaultCleanupLimit = 10_000         // cleanup max_entries default
	MaxCleanupLimit     = 1<<31 - 1      // cleanup max_entries is an int32 in the spec
)
