package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"go.uber.org/zap"
)

const pprofUsage = "serve Go's profiling endpoints (net/http/pprof, under /debug/pprof/) on `HOST:PORT`, for `go tool pprof`; a debugging aid: keep it on loopback (default: none)"

// servePprof serves net/http/pprof's handlers on addr until the returned
// function is called. They are registered on a mux of their own, never on
// the HTTP JSON API.
func servePprof(addr string, log *zap.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Warn("the profiling endpoint stopped", zap.Error(err))
		}
	}()
	log.Info("profiling endpoint listening (net/http/pprof)", zap.String("pprof", ln.Addr().String()))
	return func() { hs.Close() }, nil
}
