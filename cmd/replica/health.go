package main

import (
	"time"

	ghttp "github.com/geoevent/geoevent/http"
	geoio "github.com/geoevent/geoevent/io"
	"github.com/geoevent/geoevent/replica"
)

// probeHealth is the gateway's Config.Health: the state srv's event loop
// last published, as the HTTP probes read it.
func probeHealth(srv *geoio.Server) func() ghttp.Health {
	self := int(srv.Cluster().ReplicaIndex)
	return func() ghttp.Health {
		h := srv.Health()
		out := ghttp.Health{
			Running: h.Running, Replica: self, Leader: -1, Role: h.Role.String(),
			LeaderHeard: h.LeaderHeard, Replaying: h.Replaying,
			Term: h.Term, Commit: h.Commit, Applied: h.Applied, PrevCommit: h.PrevCommit,
			Status: h.Status,
		}
		if !h.At.IsZero() {
			out.HeartbeatAge = time.Since(h.At)
		}
		if h.Leader != replica.NoLeader {
			out.Leader = int(h.Leader)
		}
		return out
	}
}
