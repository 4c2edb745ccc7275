package hugepages

import (
	"bufio"
	"bytes"
	"math"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// A replica's heap grows with its state (about 150 bytes an entity) and
// its log, and every new 4 KiB page costs a fault on its first touch. In a
// virtual machine a fault is dear: on the machine where GeoEvent is
// measured one cost about 8 µs, and first touches were 28% of a 3-replica
// cluster's CPU while it ingested. With transparent huge pages in
// "madvise" mode (the common default, /sys/kernel/mm/transparent_hugepage/
// enabled), the kernel backs a region with 2 MiB pages, one fault each,
// only once the region is advised MADV_HUGEPAGE; the Go runtime advises
// only its own metadata.
//
// So Advise advises the heap's mappings:
//
//   - The runtime maps heap in 4 MiB-aligned steps of 4 MiB multiples, each
//     a fresh region without the advice, and touches new heap at once. So
//     first it maps heap ahead: it allocates a block of heapAheadBytes
//     (never touched: fresh memory needs no zeroing, so it costs address
//     space, not memory), advises the region, drops the block and collects
//     it (so that it does not raise the collector's goal). The heap then
//     grows into that advised region before it maps new ones.
//   - Beyond it, a goroutine looks every hugePageScan whether the runtime
//     has mapped more memory and if so reads /proc/self/maps and advises
//     every writable private anonymous region of the heap's shape that it
//     has not advised yet. (Thread stacks of the C library are not
//     4 MiB-aligned.) Pages touched before their region is advised stay
//     small.
//
// Where transparent huge pages are "never", or the advice fails, nothing
// changes; with "always" it is redundant. The price: memory the runtime
// gives back to the system inside an advised region may be taken again by
// the kernel's khugepaged, which fills a 2 MiB page around any page still
// in use (the reason Go stopped advising its heap itself, in 1.21.1). So a
// replica's resident memory stays nearer its heap's peak than without the
// advice; a replica's state seldom shrinks, and the runtime rarely has
// much to give back. And where the kernel compacts memory on a fault in an
// advised region (transparent_hugepage/defrag "madvise", the default), a
// fault on a host whose free memory is fragmented may stall while it does
// (golang/go#61718). Measured on 3 replicas ingesting
// 10,000-event batches (10 s runs, alternated with the build before): page
// faults fell from about 235,000 to 7,000 a replica and throughput rose
// from 0.24 to 0.37 M events/s; resident memory per event stored did not
// grow (about 390 bytes before, 350 after).

const (
	// hugePageScan is how often the goroutine looks for new heap regions.
	hugePageScan = 10 * time.Millisecond
	// maxHeapAhead bounds how much heap Advise maps ahead (see
	// heapAheadBytes for when it maps less or none).
	maxHeapAhead = 2 << 30

	heapStep        = 4 << 20 // the runtime's heap mapping granule (pallocChunkBytes)
	madviseHugePage = 14      // MADV_HUGEPAGE
)

var hugePagesOnce sync.Once

// Advise has the Go heap backed by transparent huge pages where
// the system offers them on advice (see above). A process calls it once,
// first thing, while its heap is small; later calls do nothing. It returns
// at once; the goroutine it starts runs for the life of the process.
func Advise() {
	hugePagesOnce.Do(func() {
		buf, err := readMaps(nil)
		if err != nil {
			return // no /proc: nothing to advise
		}
		advised := make(map[[2]uint64]bool)
		if n := heapAheadBytes(); n > 0 {
			ahead := make([]byte, n)
			buf, _ = readMaps(buf[:0])
			adviseNew(buf, advised)
			runtime.KeepAlive(ahead)
			runtime.GC()
		}
		go func() {
			// Reading the maps is dear (a state machine benchmark on one
			// core ran 9% slower while it was read every 10 ms): read them
			// only when the runtime has mapped more memory.
			mapped := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
			metrics.Read(mapped)
			last := mapped[0].Value.Uint64()
			for {
				time.Sleep(hugePageScan)
				if metrics.Read(mapped); mapped[0].Value.Uint64() <= last {
					continue
				}
				last = mapped[0].Value.Uint64()
				if buf, err = readMaps(buf[:0]); err != nil {
					return
				}
				adviseNew(buf, advised)
			}
		}()
	})
}

// adviseNew advises the heap regions of a /proc/self/maps text that are
// not in advised, and adds them.
func adviseNew(maps []byte, advised map[[2]uint64]bool) {
	for _, r := range heapRegions(maps) {
		if !advised[r] {
			advised[r] = true
			syscall.Syscall(syscall.SYS_MADVISE, uintptr(r[0]), uintptr(r[1]-r[0]), madviseHugePage)
		}
	}
}

// heapAheadBytes is how much heap to map ahead: maxHeapAhead or a quarter
// of the machine's memory, whichever is less; 0 in a 32-bit process, under
// strict overcommit accounting (vm.overcommit_memory 2), under a limit on
// the address space (RLIMIT_AS), or when the memory is unknown: there a
// failed allocation would stop the process.
func heapAheadBytes() int {
	if math.MaxInt == math.MaxInt32 {
		return 0 // a 32-bit address space has no room to spare
	}
	if b, err := os.ReadFile("/proc/sys/vm/overcommit_memory"); err != nil || string(bytes.TrimSpace(b)) == "2" {
		return 0
	}
	var as syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_AS, &as) != nil || as.Cur != ^uint64(0) {
		return 0 // address space is rationed (ulimit -v): spend none of it
	}
	var si syscall.Sysinfo_t
	if syscall.Sysinfo(&si) != nil {
		return 0
	}
	total := uint64(si.Totalram) * uint64(si.Unit)
	return int(min(maxHeapAhead, total/4) &^ (heapStep - 1))
}

func readMaps(buf []byte) ([]byte, error) {
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return buf, err
	}
	defer f.Close()
	b := bytes.NewBuffer(buf)
	_, err = b.ReadFrom(f)
	return b.Bytes(), err
}

// heapRegions lists the regions of a /proc/self/maps text that may be Go
// heap: rw-p, anonymous (no file, inode 0), 4 MiB-aligned and a multiple
// of 4 MiB long.
func heapRegions(maps []byte) [][2]uint64 {
	var out [][2]uint64
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		// start-end perms offset dev inode [path]
		f := bytes.Fields(sc.Bytes())
		if len(f) != 5 || string(f[1]) != "rw-p" || string(f[4]) != "0" {
			continue
		}
		lo, hi, ok := bytes.Cut(f[0], []byte("-"))
		if !ok {
			continue
		}
		start, err1 := strconv.ParseUint(string(lo), 16, 64)
		end, err2 := strconv.ParseUint(string(hi), 16, 64)
		if err1 != nil || err2 != nil || end <= start || start%heapStep != 0 || (end-start)%heapStep != 0 {
			continue
		}
		out = append(out, [2]uint64{start, end})
	}
	return out
}
