package main

import (
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// The GC floor raises the heap size at which the collector starts to at least twice the
// floor, costs no resident memory, and goes away when set to 0. Go clears a span that starts
// in pages the heap used before, all of it: the floor is made here just above such pages,
// as it can be at serve's start (CI saw it resident once in a long run), and its own pages
// (mincore) must still not be resident. The check runs in a fresh process, this test binary
// again running this test alone, so that the heap below is small and known.
func TestGCFloorRaisesTheHeapGoalWithoutResidentMemory(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/self/statm")
	}
	if os.Getenv(gcFloorChildEnv) != "1" {
		cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v")
		cmd.Env = append(os.Environ(), gcFloorChildEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
			t.Fatalf("in a fresh process: %v\n%s", err, out)
		}
		return
	}
	const floor = 256 << 20
	defer setGCFloor(0)
	setGCFloor(0)
	runtime.GC()
	if goal := heapGoal(); goal >= floor {
		t.Fatalf("heap goal %d MiB before any floor; the test needs it below %d MiB", goal>>20, floor>>20)
	}
	// Pages the heap used and freed, at its top: a span that starts in them is cleared
	// whole by Go, and the floor's may.
	dirty := make([]byte, 16<<20)
	for i := range dirty {
		dirty[i] = 1
	}
	runtime.KeepAlive(dirty)
	dirty = nil
	runtime.GC()
	before := residentBytes(t)
	setGCFloor(floor)
	runtime.GC()
	if goal := heapGoal(); goal < 2*floor {
		t.Fatalf("with a %d MiB floor the heap goal is %d MiB; want at least %d MiB", floor>>20, goal>>20, 2*floor>>20)
	}
	grew := residentBytes(t) - before
	gcFloor.Lock()
	own := residentIn(t, gcFloor.b)
	gcFloor.Unlock()
	t.Logf("process resident set grew by %d MiB; the floor's own pages resident: %d MiB", grew>>20, own>>20)
	if own > 64<<20 {
		t.Fatalf("a %d MiB floor made %d MiB resident; it must stay untouched", floor>>20, own>>20)
	}
	setGCFloor(0)
	runtime.GC()
	if goal := heapGoal(); goal >= floor {
		t.Fatalf("after the floor is taken away the heap goal is still %d MiB", goal>>20)
	}
}

func TestParseGCFloor(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{{"32MiB", 32 << 20, true}, {"0", 0, true}, {"none", 0, true}, {"1GiB", 1 << 30, true},
		{"2GiB", 0, false}, {"-1MiB", 0, false}, {"lots", 0, false}} {
		got, err := parseGCFloor(tc.in)
		if (err == nil) != tc.ok || (tc.ok && got != tc.want) {
			t.Errorf("parseGCFloor(%q) = %d, %v; want %d, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
	m := NewMain()
	m.Stderr = io.Discard
	if m.Config.GCFloor != defaultGCFloor {
		t.Fatalf("serve's default floor is %d; want %d", m.Config.GCFloor, defaultGCFloor)
	}
	if err := m.ParseFlags([]string{"--gc-floor", "8MiB"}); err != nil || m.Config.GCFloor != 8<<20 {
		t.Fatalf("--gc-floor 8MiB: floor %d, %v", m.Config.GCFloor, err)
	}
	m = NewMain()
	m.Stderr = io.Discard
	if err := m.ParseFlags([]string{"--gc-floor", "4GiB"}); err == nil {
		t.Fatal("a 4GiB floor was taken")
	}
}

// gcFloorChildEnv marks the fresh process of TestGCFloorRaisesTheHeapGoalWithoutResidentMemory.
const gcFloorChildEnv = "GC_FLOOR_TEST_CHILD"

func heapGoal() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// residentIn is how much of b is resident, by mincore(2) over its pages.
func residentIn(t *testing.T, b []byte) int64 {
	t.Helper()
	page := uintptr(os.Getpagesize())
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b))) &^ (page - 1)
	end := uintptr(unsafe.Pointer(unsafe.SliceData(b))) + uintptr(len(b))
	vec := make([]byte, (end-start+page-1)/page)
	if _, _, errno := syscall.Syscall(syscall.SYS_MINCORE, start, end-start, uintptr(unsafe.Pointer(unsafe.SliceData(vec)))); errno != 0 {
		t.Fatalf("mincore: %v", errno)
	}
	var n int64
	for _, v := range vec {
		n += int64(v & 1)
	}
	return n * int64(page)
}

// residentBytes is the process's resident set, from /proc/self/statm.
func residentBytes(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	pages, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return pages * int64(os.Getpagesize())
}
