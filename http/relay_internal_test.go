package http

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestRelay drives the feed window's relay of sleeping streams with
// random sleeps, changes of the window, turns passed on and streams that
// leave, against a model: sleepers are woken in the order they slept,
// at most width hold a turn at once, no turn is lost (while any sleeper
// waits for one, width streams hold one), and each stream that holds a
// turn has exactly one token.
func TestRelay(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		width := rapid.IntRange(1, 3).Draw(rt, "width")
		tail := &feedTail{valid: true, width: width}
		ws := make([]*tailWaiter, rapid.IntRange(1, 8).Draw(rt, "streams"))
		for i := range ws {
			ws[i] = newTailWaiter()
		}
		// The model: who sleeps until the next change, who waits for a
		// turn (in order), who holds one.
		var asleep, queued []int
		holds := map[int]bool{}
		running := func(i int) bool { return !slices.Contains(asleep, i) && !slices.Contains(queued, i) && !holds[i] }
		give := func() {
			for len(holds) < width && len(queued) > 0 {
				holds[queued[0]] = true
				queued = queued[1:]
			}
		}
		check := func(rt *rapid.T) {
			for i, w := range ws {
				tokens := len(w.turn)
				if holds[i] != (w.state == waiterWoken) || tokens != b2i(holds[i]) {
					rt.Fatalf("stream %d: state %d with %d tokens, model holds %v", i, w.state, tokens, holds[i])
				}
			}
			if tail.turns != len(holds) || tail.turns > width {
				rt.Fatalf("%d turns held, model %d, width %d", tail.turns, len(holds), width)
			}
		}
		rt.Repeat(map[string]func(*rapid.T){
			"sleep": func(rt *rapid.T) {
				i := rapid.IntRange(0, len(ws)-1).Draw(rt, "i")
				if !running(i) {
					rt.Skip("not running")
				}
				if !tail.sleep(ws[i], 0) {
					rt.Fatalf("a caught-up stream did not sleep")
				}
				asleep = append(asleep, i)
			},
			"change": func(rt *rapid.T) {
				tail.mu.Lock()
				tail.broadcast()
				tail.mu.Unlock()
				queued = append(queued, asleep...)
				asleep = nil
				give()
			},
			"wake and pass on": func(rt *rapid.T) {
				i := rapid.IntRange(0, len(ws)-1).Draw(rt, "i")
				if !holds[i] {
					rt.Skip("holds no turn")
				}
				<-ws[i].turn // the stream's select
				tail.release(ws[i])
				delete(holds, i)
				give()
			},
			"leave": func(rt *rapid.T) {
				i := rapid.IntRange(0, len(ws)-1).Draw(rt, "i")
				tail.release(ws[i])
				asleep = slices.DeleteFunc(asleep, func(j int) bool { return j == i })
				queued = slices.DeleteFunc(queued, func(j int) bool { return j == i })
				delete(holds, i)
				give()
				select { // a turn given and not taken is dropped with the stream
				case <-ws[i].turn:
				default:
				}
			},
			"": check,
		})
	})
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestRelayDoesNotSleepBehind: a stream does not sleep when the window
// already holds more than it has taken, or does not cover it.
func TestRelayDoesNotSleepBehind(t *testing.T) {
	tail := &feedTail{valid: true, from: 10, upto: 20, width: 1}
	w := newTailWaiter()
	for _, after := range []uint64{5, 10, 19} {
		if tail.sleep(w, after) {
			t.Fatalf("slept after %d with the window at (10, 20]", after)
		}
	}
	if !tail.sleep(w, 20) {
		t.Fatal("a caught-up stream did not sleep")
	}
	tail.valid = false
	if w2 := newTailWaiter(); tail.sleep(w2, 20) {
		t.Fatal("slept on a window that is not valid")
	}
}
