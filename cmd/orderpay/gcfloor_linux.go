package main

import (
	"syscall"
	"unsafe"
)

// releasePages hands the whole pages of b back to the kernel (MADV_DONTNEED): they read as
// zero again and are not resident until written. b must be all zero and not in use.
func releasePages(b []byte) {
	page := uintptr(syscall.Getpagesize())
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	from := ((start+page-1)&^(page-1) - start)
	to := ((start+uintptr(len(b)))&^(page-1) - start)
	if to <= from {
		return
	}
	_ = syscall.Madvise(b[from:to], syscall.MADV_DONTNEED)
}
