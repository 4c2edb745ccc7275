package http

import (
	"context"
	"fmt"
	stdhttp "net/http"
	"time"

	"github.com/geoevent/geoevent/core"
)

// Health is the local replica's state as its event loop last published
// it (Config.Health; io.Server.Health gives it in the server): the health
// probes answer from it, without a request to the backend, so they never
// wait for the loop, a leader or a free session.
type Health struct {
	// Running: the replica's event loop runs.
	Running bool
	// HeartbeatAge is how long ago the loop published this state; it
	// publishes on every tick (10 ms by default).
	HeartbeatAge time.Duration
	// Replica is this replica's index; Leader the leader's it knows (-1:
	// none); Role "follower", "candidate" or "leader".
	Replica int
	Leader  int
	Role    string
	// LeaderHeard: this replica leads, or heard from its leader within the
	// election timeout (ping's test).
	LeaderHeard bool
	// Replaying: it is applying the log it recovered at start.
	Replaying bool
	// Term, Commit and Applied are its term, commit index and applied
	// index; PrevCommit is the commit index it knew one heartbeat before.
	Term, Commit, Applied, PrevCommit uint64
	// Status is what GET /status answers when the backend does not answer
	// within statusWait (its counts may be a second old).
	Status core.StatusReply
}

// statusWait bounds how long GET /status waits for the backend when
// Config.Health can answer instead: a replica that knows no leader may
// have no session to send it on (registering one needs a leader).
const statusWait = 50 * time.Millisecond

// statusReply is GET /status's answer: the replica's, or with
// Config.Health and no answer within statusWait, the published one.
func (g *Gateway) statusReply(c *call) (*core.StatusReply, *failure) {
	if g.cfg.Health == nil {
		return submit(c, core.Status, nil)
	}
	ctx := c.ctx
	short, cancel := context.WithTimeout(ctx, statusWait)
	c.ctx = short
	s, f := submit(c, core.Status, nil)
	c.ctx = ctx
	cancel()
	if f == nil {
		return s, nil
	}
	st := g.cfg.Health().Status
	return &st, nil
}

// LivenessTimeout is how old the loop's heartbeat may be before /healthz
// says the replica is not alive: a loop that has not ticked for that long
// is stuck (the longest step it takes is bounded far below it).
const LivenessTimeout = 5 * time.Second

// alive is /healthz's test: "" when the loop runs and ticked recently,
// else why not.
func (h *Health) alive() string {
	switch {
	case !h.Running:
		return "the replica's event loop is not running"
	case h.HeartbeatAge > LivenessTimeout:
		return fmt.Sprintf("the replica's event loop has not ticked for %v (limit %v)", h.HeartbeatAge.Round(time.Millisecond), LivenessTimeout)
	}
	return ""
}

// ready is /readyz's test: "" when the replica is alive, knows a leader
// and has applied every entry it knew committed a heartbeat ago, else why
// not. (The commit index of a heartbeat ago, not of now: a loaded leader
// always has entries committed a moment ago and not yet applied, and must
// not flap.)
func (h *Health) ready() string {
	if why := h.alive(); why != "" {
		return why
	}
	switch {
	case !h.LeaderHeard:
		return h.noLeader()
	case h.Replaying || h.Applied < h.PrevCommit:
		return fmt.Sprintf("replica %d is catching up: it has applied up to index %d of %d committed", h.Replica, h.Applied, h.Commit)
	}
	return ""
}

func (h *Health) noLeader() string {
	return fmt.Sprintf("replica %d knows no leader (an election is under way, or it is cut off from the majority)", h.Replica)
}

// GET /healthz: liveness. 200 {alive: true, loop_heartbeat_age_ms} while
// the replica's loop runs and ticks; 503 {alive: false, reason} else.
// Without Config.Health (a gateway with a remote backend) the process
// answering is the test: 200.
func (g *Gateway) healthz(c *call) *failure {
	if _, f := c.params(); f != nil {
		return f
	}
	if g.cfg.Health == nil {
		return c.ok(func(w *jw) { w.open(); w.key("alive"); w.boolean(true); w.close() })
	}
	h := g.cfg.Health()
	return g.probeAnswer(c, "alive", h.alive(), func(w *jw) {
		w.key("loop_heartbeat_age_ms")
		w.u64(uint64(h.HeartbeatAge.Milliseconds()))
	})
}

// GET /readyz: readiness. 200 {ready: true, role, leader, term, commit,
// applied} while the replica knows a leader and has applied what it knew
// committed; 503 {ready: false, reason} else. Without Config.Health it
// asks the cluster for a ping.
func (g *Gateway) readyz(c *call) *failure {
	if _, f := c.params(); f != nil {
		return f
	}
	if g.cfg.Health == nil {
		r, f, bad := run(c, core.Ping, nil)
		why := ""
		switch {
		case f != nil:
			why = fmt.Sprintf("%s (%d): %s", f.info.Name, f.info.Code, f.msg)
		case bad != nil:
			return bad
		case !r.Pong:
			why = r.Reason
		}
		return g.probeAnswer(c, "ready", why, nil)
	}
	h := g.cfg.Health()
	return g.probeAnswer(c, "ready", h.ready(), func(w *jw) {
		w.key("role")
		w.str(h.Role)
		w.key("leader")
		w.num(int64(h.Leader))
		w.key("term")
		w.u64(h.Term)
		w.key("commit")
		w.u64(h.Commit)
		w.key("applied")
		w.u64(h.Applied)
	})
}

// probeAnswer answers a probe: 200 {key: true, more...} when why is "",
// else 503 {key: false, reason: why}.
func (g *Gateway) probeAnswer(c *call, key, why string, more func(w *jw)) *failure {
	status := stdhttp.StatusOK
	if why != "" {
		status = stdhttp.StatusServiceUnavailable
	}
	return c.respond(status, func(w *jw) {
		w.open()
		w.key(key)
		w.boolean(why == "")
		if why != "" {
			w.key("reason")
			w.str(why)
		} else if more != nil {
			more(w)
		}
		w.close()
	})
}

// pingFromHealth answers GET /ping from Config.Health, as the replica's
// ping operation would (pong while it leads or heard its leader), but
// without a request to the loop: it never waits for a session. ok is
// false without Config.Health.
func (g *Gateway) pingFromHealth(c *call) (f *failure, ok bool) {
	if g.cfg.Health == nil {
		return nil, false
	}
	h := g.cfg.Health()
	why := h.alive()
	if why == "" && !h.LeaderHeard {
		why = h.noLeader()
	}
	return g.probeAnswer(c, "pong", why, nil), true
}
