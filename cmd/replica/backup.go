package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap"

	geoio "github.com/geoevent/geoevent/io"
)

// backupSocket is the Unix socket in the data directory on which a running
// replica serves its backups (GET /backup: a tar stream, see
// io.Server.Backup) to `replica backup` on the same machine. It is reached
// only through the file system: the data directory's permissions guard it.
const backupSocket = "backup.sock"

// backupErrorTrailer carries the error that cut a backup stream short.
const backupErrorTrailer = "X-Backup-Error"

// serveBackups serves srv's backups on DIR/backup.sock until the returned
// stop is called. Where the socket cannot be made (a path too long for
// one), it logs why, and backups need the replica stopped.
func serveBackups(srv *geoio.Server, dir string, log *zap.Logger) (stop func()) {
	path := filepath.Join(dir, backupSocket)
	os.Remove(path) // one left by a process that was killed: the directory's lock is ours
	ln, err := net.Listen("unix", path)
	if err != nil {
		log.Warn("cannot serve backups while running (replica backup needs the replica stopped)", zap.String("socket", path), zap.Error(err))
		return func() {}
	}
	os.Chmod(path, 0o600)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /backup", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", backupErrorTrailer)
		bw := &startedWriter{w: w}
		m, err := srv.Backup(r.Context(), bw, nil)
		if err != nil {
			log.Warn("backup failed", zap.Error(err))
			if !bw.started {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			w.Header().Set(backupErrorTrailer, err.Error())
			return
		}
		log.Info("backup served", zap.Uint64("snapshot_index", m.SnapshotIndex), zap.Uint64("last_index", m.LastIndex), zap.Int64("bytes", bw.n))
	})
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	return func() { hs.Close() }
}

// startedWriter notes whether anything was written, and how much.
type startedWriter struct {
	w       io.Writer
	started bool
	n       int64
}

func (s *startedWriter) Write(p []byte) (int, error) {
	s.started = true
	n, err := s.w.Write(p)
	s.n += int64(n)
	return n, err
}

func backup(args []string, stdout, stderr io.Writer, terminal bool) int {
	fset := flag.NewFlagSet("backup", flag.ContinueOnError)
	data := fset.String("data", "", "the data directory `DIR` of the replica to back up, running or not")
	to := fset.String("to", "", "write the backup to `FILE` (replaced only once the backup is whole)")
	if code, ok := parse(fset, args, stderr, "data", "to"); !ok {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	f, err := os.CreateTemp(filepath.Dir(*to), "."+filepath.Base(*to)+".partial-")
	if err != nil {
		fmt.Fprintf(stderr, "replica backup: --to: %v\n", err)
		return exitError
	}
	keep := false
	defer func() {
		if !keep {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	p := newByteProgress(stderr, terminal, "backing up")
	var m geoio.BackupManifest
	how := "from the stopped replica's files"
	m, err = geoio.BackupDir(ctx, *data, f, p.update)
	if errors.Is(err, geoio.ErrLocked) {
		how = "from the running replica"
		m, err = backupRunning(ctx, *data, f, p.update)
	}
	p.finish()
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = f.Close()
	}
	if err == nil {
		err = os.Rename(f.Name(), *to)
	}
	if err != nil {
		fmt.Fprintf(stderr, "replica backup: %v\n", err)
		return exitError
	}
	keep = true
	fmt.Fprintf(stdout, "backed up %s (%s) to %s: cluster %s, replica %d of %d, state at log index %d (snapshot %d and %d entries after it), %d bytes\n",
		*data, how, *to, m.Cluster, m.ReplicaIndex, m.ReplicaCount, m.LastIndex, m.SnapshotIndex, m.LastIndex-m.SnapshotIndex, p.n)
	return exitOK
}

// backupRunning asks the replica that holds dir for its backup, over its
// backup socket, and writes it to w, checking it as it arrives.
func backupRunning(ctx context.Context, dir string, w io.Writer, progress func(int64)) (geoio.BackupManifest, error) {
	path := filepath.Join(dir, backupSocket)
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}}
	req, err := http.NewRequestWithContext(ctx, "GET", "http://replica/backup", nil)
	if err != nil {
		return geoio.BackupManifest{}, err
	}
	res, err := client.Do(req)
	if err != nil {
		return geoio.BackupManifest{}, fmt.Errorf("a replica runs on %s, but its backup socket does not answer (%v): back it up with a replica of this version, or stop it and run replica backup again", dir, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		return geoio.BackupManifest{}, fmt.Errorf("the running replica refused: %s", strings.TrimSpace(string(msg)))
	}
	in := &progressReader{r: res.Body, progress: progress}
	m, err := geoio.VerifyBackup(io.TeeReader(in, w))
	if e := res.Trailer.Get(backupErrorTrailer); e != "" {
		return m, fmt.Errorf("the running replica: %s", e)
	}
	return m, err
}

func restore(args []string, stdout, stderr io.Writer, terminal bool) int {
	fset := flag.NewFlagSet("restore", flag.ContinueOnError)
	from := fset.String("from", "", "the backup `FILE`, written by replica backup")
	data := fset.String("data", "", "the new data directory `DIR` (must not exist or be empty); replica start or dev then serves it")
	index := fset.Int("replica", -1, "make DIR replica `I` of the backup's cluster (default: the replica backed up)")
	whole := fset.Bool("whole-cluster", false, "every replica of the cluster is restored (its old members are gone): the restored replica votes at once; without it a replica of a cluster of several rejoins its running cluster and neither votes nor campaigns until a leader has brought it up to date")
	if code, ok := parse(fset, args, stderr, "from", "data"); !ok {
		return code
	}
	opts := geoio.RestoreOptions{WholeCluster: *whole}
	if *index >= 0 {
		i := uint32(*index)
		opts.Replica = &i
	}
	f, err := os.Open(*from)
	if err != nil {
		fmt.Fprintf(stderr, "replica restore: --from: %v\n", err)
		return exitError
	}
	defer f.Close()
	var size int64
	if fi, err := f.Stat(); err == nil {
		size = fi.Size()
	}
	p := newByteProgress(stderr, terminal, "restoring")
	p.size = size
	opts.Progress = p.update
	m, err := geoio.RestoreBackup(f, *data, opts)
	p.finish()
	if err != nil {
		fmt.Fprintf(stderr, "replica restore: %s: %v\n", *from, err)
		if errors.Is(err, geoio.ErrBadBackup) {
			fmt.Fprintf(stderr, "replica restore: nothing was restored into %s\n", *data)
		}
		return exitError
	}
	info, err := geoio.ReadClusterFile(*data)
	if err != nil {
		fmt.Fprintf(stderr, "replica restore: %v\n", err)
		return exitError
	}
	fmt.Fprintf(stdout, "restored %s into %s: cluster %s, replica %d of %d, state at log index %d (taken %s)\n",
		*from, *data, info.Cluster, info.ReplicaIndex, info.ReplicaCount, m.LastIndex, m.Taken)
	if info.ReplicaCount > 1 && !*whole {
		fmt.Fprintf(stdout, "it rejoins its cluster as a repairing replica: it votes again once a leader has brought it up to date\n")
	}
	return exitOK
}

// progressReader reports the bytes read through it.
type progressReader struct {
	r        io.Reader
	n        int64
	progress func(int64)
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	p.n += int64(n)
	if n > 0 && p.progress != nil {
		p.progress(p.n)
	}
	return n, err
}

// byteProgress draws a line of bytes done and their rate on a terminal
// (and with a known size, the share done), at most 5 times a second.
type byteProgress struct {
	w        io.Writer
	terminal bool
	what     string
	size     int64
	n        int64
	start    time.Time
	last     time.Time
	drawn    bool
}

func newByteProgress(w io.Writer, terminal bool, what string) *byteProgress {
	now := time.Now()
	return &byteProgress{w: w, terminal: terminal, what: what, start: now, last: now}
}

func (p *byteProgress) update(n int64) {
	p.n = n
	if !p.terminal {
		return
	}
	if now := time.Now(); now.Sub(p.last) >= 200*time.Millisecond {
		p.last = now
		p.draw(now)
	}
}

func (p *byteProgress) draw(now time.Time) {
	rate := 0.0
	if secs := now.Sub(p.start).Seconds(); secs > 0 {
		rate = float64(p.n) / secs
	}
	line := fmt.Sprintf("%s: %.1f MiB, %.1f MiB/s", p.what, float64(p.n)/(1<<20), rate/(1<<20))
	if p.size > 0 {
		line += fmt.Sprintf(", %3.0f%%", 100*min(1, float64(p.n)/float64(p.size)))
	}
	fmt.Fprintf(p.w, "\r%-78s", line)
	p.drawn = true
}

// finish ends the line, if one was drawn.
func (p *byteProgress) finish() {
	if p.terminal && p.drawn {
		p.draw(time.Now())
		fmt.Fprintln(p.w)
	}
}
