package main

import (
	"reflect"
	"testing"
	"time"

	"github.com/geoevent/geoevent/statemachine"
)

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"--cluster", "1", "--op", "mixed", "--mix", "upsert=3,radius=1,ping=2"})
	if err != nil || cfg.mix["upsert"] != 3 || cfg.mix["radius"] != 1 || cfg.mix["ping"] != 2 || cfg.procs != 1 {
		t.Fatalf("%+v %v", cfg, err)
	}
	for _, bad := range [][]string{
		{"--op", "insert"}, // no cluster
		{"--cluster", "1", "--op", "nope"},
		{"--cluster", "1", "--op", "mixed", "--mix", "upsert"},
		{"--cluster", "1", "--batch", "0"},
		{"--cluster", "1", "--procs", "-1"},
		{"--cluster", "1", "--events", "-1"},
		{"--http", "http://127.0.0.1:8080", "--http-client", "curl"},
		{"--cluster", "1", "--op", "latest-batch", "--batch", "10001"},
		{"--cluster", "1", "--subscribers", "10"}, // no --feed
		{"--cluster", "1", "--rate", "-1"},
		{"--cluster", "1", "--subscriber-procs", "-1"},
		{"--cluster", "1", "--fences", "-1"},
		{"--http", "http://127.0.0.1:8080", "--fences", "10"},
		{"--cluster", "1", "--probe-latest", "-1"},
		{"--redis", "127.0.0.1:6379", "--probe-latest", "1"},
	} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestProbeLatestFlag(t *testing.T) {
	cfg, err := parseFlags([]string{"--cluster", "1", "--op", "track", "--probe-latest", "2"})
	if err != nil || cfg.probes != 2 {
		t.Fatalf("%+v %v", cfg, err)
	}
}

func TestLatestBatchTakesUpToTheLimit(t *testing.T) {
	cfg, err := parseFlags([]string{"--cluster", "1", "--op", "latest-batch", "--batch", "10000"})
	if err != nil || cfg.mix["latest-batch"] != 1 {
		t.Fatalf("%+v %v", cfg, err)
	}
}

func TestHTTPFlagNeedsNoCluster(t *testing.T) {
	cfg, err := parseFlags([]string{"--http", "http://127.0.0.1:8080", "--op", "radius"})
	if err != nil || cfg.httpURL == "" {
		t.Fatalf("%+v %v", cfg, err)
	}
}

func TestPeerFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"--redis", "127.0.0.1:6379", "--op", "radius"})
	if err != nil || cfg.redisAddr != "127.0.0.1:6379" || cfg.peerKey != "fleet" {
		t.Fatalf("%+v %v", cfg, err)
	}
	cfg, err = parseFlags([]string{"--tile38", "127.0.0.1:9851", "--peer-key", "cars"})
	if err != nil || cfg.tile38Addr != "127.0.0.1:9851" || cfg.peerKey != "cars" {
		t.Fatalf("%+v %v", cfg, err)
	}
	for _, bad := range [][]string{
		{"--redis", "127.0.0.1:6379", "--tile38", "127.0.0.1:9851"},
		{"--redis", "127.0.0.1:6379", "--http", "http://127.0.0.1:8080"},
	} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestSubscriberFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"--cluster", "1", "--op", "track", "--subscribers", "1000", "--fences", "100",
		"--feed", "http://127.0.0.1:8080/", "--rate", "100000", "--subscriber-procs", "2"})
	if err != nil || cfg.subscribers != 1000 || cfg.fences != 100 || cfg.feedURL != "http://127.0.0.1:8080" || cfg.rate != 100000 || !cfg.baseline || cfg.subProcs != 2 {
		t.Fatalf("%+v %v", cfg, err)
	}
}

func TestLatencyHist(t *testing.T) {
	var h latencyHist
	for i := range 100 {
		h.add(time.Duration(i+1) * time.Millisecond)
	}
	h.add(time.Hour)
	if p := h.percentile(0.5); p < 50*time.Millisecond || p > 52*time.Millisecond {
		t.Fatalf("p50 %v", p)
	}
	if p := h.percentile(1); p != time.Hour {
		t.Fatalf("max %v", p)
	}
	if v, ok := jsonString([]byte(`{"seq":"5","op_ns":"1234"}`), `"op_ns":"`); !ok || v != 1234 {
		t.Fatalf("op_ns %d %v", v, ok)
	}
}

// TestBenchFences checks that --fences' fences are valid polygons in the
// box, named apart, and the same in every run.
func TestBenchFences(t *testing.T) {
	sm := statemachine.New()
	for i := range 50 {
		f := benchFence(i)
		if !reflect.DeepEqual(f, benchFence(i)) {
			t.Fatalf("fence %d differs between draws", i)
		}
		for _, v := range f.Vertices {
			if v.LatNano < 37_100_000_000 || v.LatNano > 39_120_000_000 || v.LonNano < 12_350_000_000 || v.LonNano > 14_370_000_000 {
				t.Fatalf("fence %d: vertex %v outside the box", i, v)
			}
		}
		r, err := sm.PutFence(0, f)
		if err != nil || !r.Created {
			t.Fatalf("fence %d: %+v %v", i, r, err)
		}
	}
}
