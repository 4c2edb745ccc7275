package http

import (
	"bytes"
	"fmt"
	stdhttp "net/http"
	"slices"
	"strconv"

	"github.com/geoevent/geoevent/core"
)

// POST /events, POST /insert.
func (g *Gateway) insert(c *call) *failure {
	d, f := c.bodyNoParams(false)
	if f != nil {
		return f
	}
	op, req, f := parseInsert(d, c.form)
	if f != nil {
		return f
	}
	ins := core.Insert
	if op == core.OpUpsert {
		ins = core.Upsert
	}
	r, f := submit(c, ins, req)
	if f != nil {
		return f
	}
	if len(r.Results) != len(req.Events) {
		return fail(core.InternalError, "the backend answered %d results for %d events", len(r.Results), len(req.Events))
	}
	for i, res := range r.Results {
		if int(res.Index) != i {
			return fail(core.InternalError, "the backend answered result %d with index %d", i, res.Index)
		}
	}
	if !r.Committed && c.form == formA {
		return batchFailure(r)
	}
	return c.ok(func(w *jw) { w.insertResults(r, req, op, c.form) })
}

// insertResults writes a createBatch answer: {results, committed}.
func (w *jw) insertResults(r *core.InsertReply, req *core.InsertRequest, op core.Operation, fm form) {
	w.open()
	w.key("results")
	w.openArr()
	// One result takes at most 160 bytes: size the buffer once rather
	// than let a 10,000-event answer double it a dozen times.
	b := slices.Grow(w.b, 160*len(r.Results))
	for i, res := range r.Results {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"index":`...)
		b = appendUint(b, uint64(res.Index))
		if fm == formA {
			b = append(b, `,"result":`...)
			b = appendUint(b, uint64(res.Code))
		} else {
			b = append(b, `,"code":`...)
			b = appendUint(b, uint64(res.Code))
			if res.Code != 0 {
				b = append(b, `,"message":`...)
				b = appendString(b, codeName(res.Code))
			}
			if op == core.OpUpsert {
				b = append(b, `,"updated":`...)
				b = strconv.AppendBool(b, res.Updated)
			}
		}
		if r.Committed {
			b = append(b, `,"id":"`...)
			b = appendUUID(b, req.Events[res.Index].EntityID)
			b = append(b, ':')
			b = appendUint(b, res.TimestampNS)
			b = append(b, `","timestamp_ns":`...)
			b = appendU64(b, res.TimestampNS)
		}
		b = append(b, '}')
	}
	w.b = b
	w.closeArr()
	w.key("committed")
	w.boolean(r.Committed)
	w.close()
}

// batchFailure is Form A's answer to a batch that did not commit: 400 with
// the first failing event's code mapped to a batch-level code (100, 101,
// 105).
func batchFailure(r *core.InsertReply) *failure {
	first, failed := -1, 0
	for i, res := range r.Results {
		if res.Code != 0 {
			failed++
			if first < 0 {
				first = i
			}
		}
	}
	if first < 0 {
		return fail(core.InvalidEvent, "the batch was not committed")
	}
	res := r.Results[first]
	more := ""
	if failed > 1 {
		more = fmt.Sprintf(" (and %d more events failed)", failed-1)
	}
	return fail(core.BatchCode(res.Code), "events[%d] failed with %s (%d)%s; the batch was not committed",
		res.Index, codeName(res.Code), res.Code, more)
}

func codeName(c core.Code) string {
	if info, ok := c.Info(); ok {
		return info.Name
	}
	return "UNKNOWN"
}

// POST /query/radius.
func (g *Gateway) radius(c *call) *failure {
	d, f := c.bodyNoParams(false)
	if f != nil {
		return f
	}
	fm, q, f := parseRadius(d, c.form)
	c.form = fm
	if f != nil {
		return f
	}
	return query(c, core.QueryRadius, q, true) // both forms carry distance_mm
}

// query runs a paged query and writes its QueryResult, as GeoJSON when
// the request asks for it (a history with its LineString).
func query[Req any](c *call, op *core.Op[Req, core.QueryResult], q *Req, distances bool) *failure {
	r, f := submit(c, op, q)
	if f != nil {
		return f
	}
	if c.geo {
		c.geoOut = true
		return c.ok(func(w *jw) { w.geoFeatures(r, distances, op.Code == core.OpEntityHistory) })
	}
	return c.ok(func(w *jw) { w.queryResult(r, distances) })
}

// POST /query/polygon.
func (g *Gateway) polygon(c *call) *failure {
	d, f := c.bodyNoParams(false)
	if f != nil {
		return f
	}
	fm, q, f := parsePolygon(d, c.form)
	c.form = fm
	if f != nil {
		return f
	}
	return query(c, core.QueryPolygon, q, false)
}

// POST /query/latest: latest events across all entities, or with
// entity_ids a latest-position lookup answered like /entities/batch.
func (g *Gateway) latest(c *call) *failure {
	d, f := c.bodyNoParams(true)
	if f != nil {
		return f
	}
	q, ids, f := parseLatest(d, c.form)
	if f != nil {
		return f
	}
	if ids != nil {
		return c.lookup(ids, c.geo)
	}
	return query(c, core.QueryLatest, q, false)
}

// lookup runs get_latest_batch and writes {events}, or, when geo, a
// GeoJSON FeatureCollection of the entities found.
func (c *call) lookup(ids []core.Uint128, geo bool) *failure {
	list := core.IDList(ids)
	r, f := submit(c, core.GetLatestBatch, &list)
	if f != nil {
		return f
	}
	if len(*r) != len(ids) {
		return fail(core.InternalError, "the backend answered %d results for %d ids", len(*r), len(ids))
	}
	if geo {
		c.geoOut = true
		return c.ok(func(w *jw) { w.geoLatest(*r) })
	}
	return c.ok(func(w *jw) { w.latestResults(*r, c.form) })
}

// GET /entity/{entity_id}.
func (g *Gateway) getLatest(c *call) *failure {
	if _, f := c.params(); f != nil {
		return f
	}
	id, f := entityID(c.pathID, c.form)
	if f != nil {
		return f
	}
	r, f := submit(c, core.GetLatest, &id)
	if f != nil {
		return f
	}
	if !r.Found && c.form == formA {
		// Form A: 404 with the GetLatestResponse shape and the error fields.
		return c.respond(stdhttp.StatusNotFound, func(w *jw) {
			w.open()
			w.key("event")
			w.null()
			w.key("found")
			w.boolean(false)
			w.key("error_code")
			w.num(int64(core.EntityNotFound.Code))
			w.key("error_name")
			w.str(core.EntityNotFound.Name)
			w.key("message")
			w.str("entity " + id.String() + " not found")
			w.close()
		})
	}
	return c.ok(func(w *jw) {
		w.open()
		w.key("event")
		if r.Found {
			w.event(&r.Event, nil)
		} else {
			w.null()
		}
		w.key("found")
		w.boolean(r.Found)
		w.close()
	})
}

// GET /entity/{entity_id}/history?since_ns=&until_ns=&limit=&cursor=.
func (g *Gateway) history(c *call) *failure {
	p, f := c.params("since_ns", "until_ns", "limit", "cursor")
	if f != nil {
		return f
	}
	q := &core.HistoryQuery{}
	if q.EntityID, f = entityID(c.pathID, c.form); f != nil {
		return f
	}
	if q.SinceNS, f = p.u64("since_ns"); f != nil {
		return f
	}
	if q.UntilNS, f = p.u64("until_ns"); f != nil {
		return f
	}
	if q.Page, f = p.page(); f != nil {
		return f
	}
	return query(c, core.EntityHistory, q, false)
}

// POST /entities/batch.
func (g *Gateway) getLatestBatch(c *call) *failure {
	d, f := c.bodyNoParams(false)
	if f != nil {
		return f
	}
	ids, f := parseIDs(d, c.form)
	if f != nil {
		return f
	}
	return c.lookup(ids, false)
}

// DELETE /entities, POST /delete.
func (g *Gateway) delete(c *call) *failure {
	d, f := c.bodyNoParams(false)
	if f != nil {
		return f
	}
	ids, f := parseIDs(d, c.form)
	if f != nil {
		return f
	}
	r, f := submit(c, core.DeleteEntities, &core.DeleteRequest{EntityIDs: ids})
	if f != nil {
		return f
	}
	return c.ok(func(w *jw) {
		w.open()
		w.key("deleted_count")
		w.num(int64(r.Deleted))
		w.key("not_found_count")
		w.num(int64(r.NotFound))
		w.close()
	})
}

// POST /cleanup/expired (body optional).
func (g *Gateway) cleanup(c *call) *failure {
	d, f := c.bodyNoParams(true)
	if f != nil {
		return f
	}
	req, f := parseCleanup(d)
	if f != nil {
		return f
	}
	r, f := submit(c, core.CleanupExpired, req)
	if f != nil {
		return f
	}
	return c.ok(func(w *jw) {
		w.open()
		w.key("entries_scanned")
		w.num(int64(r.Scanned))
		w.key("entries_removed")
		w.num(int64(r.Removed))
		w.close()
	})
}

// GET /stats: the state machine's counts and replication lag (from the
// leader) and the topology's replica count and primary.
func (g *Gateway) stats(c *call) *failure {
	if _, f := c.params(); f != nil {
		return f
	}
	s, f := submit(c, core.StatsOp, nil)
	if f != nil {
		return f
	}
	t, f := submit(c, core.Topology, nil)
	if f != nil {
		return f
	}
	return c.ok(func(w *jw) {
		w.open()
		w.key("event_count")
		w.u64(s.EventCount)
		w.key("entity_count")
		w.u64(s.EntityCount)
		w.key("storage_bytes")
		w.u64(s.StorageBytes)
		w.key("replica_count")
		w.num(int64(t.ReplicaCount))
		w.key("primary_replica")
		w.num(int64(t.Primary))
		w.key("replication_lag_ms")
		w.u64(s.ReplicationLagMS)
		w.close()
	})
}

// GET /ping: 200 {pong: true}; 503 {pong: false, reason} when the cluster
// does not answer or says it is unhealthy. With Config.Health it answers
// from the local replica's published state (health.go), at once.
func (g *Gateway) ping(c *call) *failure {
	if _, f := c.params(); f != nil {
		return f
	}
	unhealthy := func(reason string) *failure {
		return c.respond(stdhttp.StatusServiceUnavailable, func(w *jw) {
			w.open()
			w.key("pong")
			w.boolean(false)
			w.key("reason")
			w.str(reason)
			w.close()
		})
	}
	if f, ok := g.pingFromHealth(c); ok {
		return f
	}
	r, f, bad := run(c, core.Ping, nil)
	if f != nil {
		return unhealthy(fmt.Sprintf("%s (%d): %s", f.info.Name, f.info.Code, f.msg))
	}
	if bad != nil {
		return bad
	}
	if !r.Pong {
		return unhealthy(r.Reason)
	}
	return c.ok(func(w *jw) {
		w.open()
		w.key("pong")
		w.boolean(true)
		w.close()
	})
}

// GET /status: this replica's state, with cluster_state "no_leader" when
// it knows no leader. With Config.Health, the state its loop published
// when the replica does not answer within statusWait (health.go).
func (g *Gateway) status(c *call) *failure {
	if _, f := c.params(); f != nil {
		return f
	}
	s, f := g.statusReply(c)
	if f != nil {
		return f
	}
	return c.ok(func(w *jw) {
		w.open()
		w.key("events_count")
		w.u64(s.EventsCount)
		w.key("entities_count")
		w.u64(s.EntitiesCount)
		w.key("index_bytes")
		w.u64(s.IndexBytes)
		w.key("uptime_seconds")
		w.u64(s.UptimeSeconds)
		w.key("version")
		w.str(s.Version)
		w.key("cluster_state")
		w.str(s.ClusterState)
		w.key("node_id")
		w.str(s.NodeID)
		w.key("cluster_id")
		w.id(s.ClusterID)
		w.close()
	})
}

// GET /topology: one shard (0) whose primary is the cluster's and whose
// replicas are the other replicas, each with its status, last contact and
// lag as the answering replica knows them (null: unknown), and the
// cluster id.
func (g *Gateway) topology(c *call) *failure {
	if _, f := c.params(); f != nil {
		return f
	}
	t, f := submit(c, core.Topology, nil)
	if f != nil {
		return f
	}
	node := func(w *jw, n *core.NodeInfo) {
		w.open()
		w.key("node_id")
		w.str(n.NodeID)
		w.key("address")
		w.str(n.Address)
		w.key("status")
		w.str(n.Status)
		w.key("last_contact_ms")
		w.known(n.LastContactMS)
		w.key("lag_ms")
		w.known(n.LagMS)
		w.close()
	}
	return c.ok(func(w *jw) {
		w.open()
		w.key("version")
		w.u64(t.Version)
		w.key("num_shards")
		w.num(1)
		w.key("replication_factor")
		w.num(int64(t.ReplicaCount))
		w.key("shards")
		w.openArr()
		w.open()
		w.key("shard_id")
		w.num(0)
		w.key("primary")
		if int(t.Primary) < len(t.Nodes) {
			node(w, &t.Nodes[t.Primary])
		} else {
			w.null()
		}
		w.key("replicas")
		w.openArr()
		for i := range t.Nodes {
			if i != int(t.Primary) {
				node(w, &t.Nodes[i])
			}
		}
		w.closeArr()
		w.close()
		w.closeArr()
		w.key("cluster_id")
		w.id(t.ClusterID)
		w.close()
	})
}

// POST /ttl/set.
func (g *Gateway) ttlSet(c *call) *failure {
	id, secs, f := c.ttlRequest("ttl_seconds")
	if f != nil {
		return f
	}
	r, f := submit(c, core.TTLSet, &core.TTLSetRequest{EntityID: id, TTLSeconds: secs})
	if f != nil {
		return f
	}
	return c.ok(func(w *jw) {
		w.open()
		w.key("success")
		w.boolean(true)
		w.key("expires_at_ns")
		w.u64(r.ExpiresAtNS)
		w.close()
	})
}

// POST /ttl/extend.
func (g *Gateway) ttlExtend(c *call) *failure {
	id, secs, f := c.ttlRequest("extend_by_seconds")
	if f != nil {
		return f
	}
	r, f := submit(c, core.TTLExtend, &core.TTLExtendRequest{EntityID: id, ExtendBySeconds: secs})
	if f != nil {
		return f
	}
	return c.ok(func(w *jw) {
		w.open()
		w.key("success")
		w.boolean(true)
		w.key("previous_expires_at_ns")
		w.u64(r.PreviousExpiresAtNS)
		w.key("new_expires_at_ns")
		w.u64(r.NewExpiresAtNS)
		w.close()
	})
}

// POST /ttl/clear.
func (g *Gateway) ttlClear(c *call) *failure {
	id, _, f := c.ttlRequest("")
	if f != nil {
		return f
	}
	r, f := submit(c, core.TTLClear, &core.TTLClearRequest{EntityID: id})
	if f != nil {
		return f
	}
	return c.ok(func(w *jw) {
		w.open()
		w.key("success")
		w.boolean(true)
		w.key("previous_expires_at_ns")
		if r.HadTTL {
			w.u64(r.PreviousExpiresAtNS)
		} else {
			w.null()
		}
		w.close()
	})
}

// openAPIBody is the document without its trailing newlines (write adds one).
var openAPIBody = bytes.TrimRight(openAPI, "\n")

// GET /openapi.json.
func (g *Gateway) openAPI(c *call) *failure {
	if _, f := c.params(); f != nil {
		return f
	}
	c.write(stdhttp.StatusOK, bytes.Clone(openAPIBody))
	return nil
}
