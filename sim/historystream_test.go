package sim

import "testing"

// TestCrashDuringHistoryStream crashes, in runs of the crash profile, a
// follower while it stages a leader's history stream and a leader while
// it holds one to send (once each a run, while every other replica is
// up): the restarted follower starts the stream over, a new leader
// encodes its own, and every check of the run (every acknowledged event
// in its entity's history on every replica, the digests) still passes.
func TestCrashDuringHistoryStream(t *testing.T) {
	t.Parallel()
	staging, sending := 0, 0
	for seed := int64(5001); seed < 5001+6; seed++ {
		w := newWorld(seed, clusterTicks, Options{Replicas: 3, Faults: FaultsCrash})
		crashedStaging, crashedSending := false, false
		inner := w.onTick
		w.onTick = func() {
			if inner != nil {
				inner()
			}
			for _, n := range w.nodes {
				if !n.up || !allUp(w) {
					continue
				}
				switch h := n.disk.hist; {
				case h.in != nil && !crashedStaging:
					crashedStaging = true
					staging++
					w.crash(n)
				case h.out != nil && !crashedSending:
					crashedSending = true
					sending++
					w.crash(n)
				}
			}
		}
		if r := w.result(); r.Failed() {
			t.Errorf("seed %d failed:\n%s\nconfig: %s\nreplay: %s", seed, r.Failure, r.Stats.Config, r.ReplayCommand())
		}
	}
	if staging == 0 || sending == 0 {
		t.Errorf("crashed %d followers staging a stream and %d leaders holding one in 6 runs", staging, sending)
	}
	t.Logf("crashed %d followers staging a history stream, %d leaders holding one", staging, sending)
}

func allUp(w *world) bool {
	for _, n := range w.nodes {
		if !n.up {
			return false
		}
	}
	return true
}
