package main

import (
	"fmt"
	"sync"
)

// defaultGCFloor is the Go heap below which the server's collector does not run (--gc-floor).
//
// orderpay's live heap is small, about 2 MiB under load, and Go starts a collection when the
// heap reaches twice the live heap, at least 4 MiB: a few hundred paid orders a second, some
// 190 KiB of short-lived allocations each, made the collector run some 20 times a second,
// for about a twentieth of the server's CPU. The floor is an allocation the program never
// touches: the collector counts it as live, so a collection waits for twice floor plus live
// heap; taken at the start of the process (serve sets it first), from memory never used,
// the kernel backs none of its pages, so it costs no resident memory. The heap of
// real objects can then grow to about the floor before a collection, which is what the
// floor costs in RSS. (Where Go had to clear it, its pages are handed back at once:
// releasePages.) Under a soft memory limit (GOMEMLIMIT) the floor counts against the
// limit, though it is never resident.
const defaultGCFloor = 32 << 20

// maxGCFloor bounds --gc-floor: the floor is address space, and a large one would only
// postpone collections of a heap that is really that large.
const maxGCFloor = 1 << 30

// gcFloor holds the process's floor: one per process, whatever number of servers it runs.
var gcFloor struct {
	sync.Mutex
	b []byte
}

// setGCFloor sets the process's GC floor to n bytes (0: none), replacing the one before.
func setGCFloor(n int64) {
	gcFloor.Lock()
	defer gcFloor.Unlock()
	if int64(len(gcFloor.b)) == n {
		return
	}
	gcFloor.b = nil
	if n > 0 {
		// A span fresh from the operating system is already zero and Go does not clear it;
		// but a span that starts in pages the heap used before is cleared whole, and then
		// all of it is resident (a test saw that about once in twenty fresh processes under
		// load). So its pages are handed back to the kernel once made: they stay zero, as
		// the floor is never read or written, and are not resident.
		gcFloor.b = make([]byte, n)
		releasePages(gcFloor.b)
	}
}

// parseGCFloor reads a --gc-floor: a size as GOMEMLIMIT writes it (32MiB), at most 1GiB.
func parseGCFloor(v string) (int64, error) {
	n, err := parseBytes(v)
	if err == nil && n > maxGCFloor {
		err = fmt.Errorf("%q is above the most a floor may be, 1GiB", v)
	}
	return n, err
}
