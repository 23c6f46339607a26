package fleetjit

// Builds that do not block (since 1.1): fj_module_build_async and
// fj_build_poll/wait/take/destroy as a *Build with Poll, Wait(ctx), Take,
// Done() (a channel) and Close.

/*
#include <fleetjit/fleetjit.h>
*/
import "C"

import (
	"context"
	"runtime"
	"sync"
	"time"
)

// waitSlice bounds each fj_build_wait / fj_cache_flush call, so that a
// context's cancellation is seen within it and Close is never held off
// longer than that.
const waitSlice = 20 * time.Millisecond

// sliceOf is how long the next wait call of a loop bounded by ctx may
// take: waitSlice, or less when ctx's deadline is nearer (0 once past).
func sliceOf(ctx context.Context) time.Duration {
	d := waitSlice
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl); left < d {
			d = left
		}
	}
	if d < 0 {
		d = 0
	}
	return d
}

// Build is a build in flight on the runtime's build threads.
type Build struct {
	rt       *Runtime
	h        *C.fj_build
	doneOnce sync.Once
	done     chan struct{}
}

// BuildAsync starts building per opts and returns at once (the options are
// copied). Errors found before the build starts come back here; the
// build's own errors (a BuildError with its log, ...) from Take or Wait.
func (r *Runtime) BuildAsync(opts *BuildOptions) (*Build, error) {
	var h *C.fj_build
	if err := r.withBuildOptions(opts, func(b *C.fj_build_options) error {
		return statusErr(C.fj_module_build_async(r.h, b, &h))
	}); err != nil {
		return nil, err
	}
	bd := &Build{rt: r, h: h}
	runtime.SetFinalizer(bd, func(b *Build) { b.Close() })
	return bd, nil
}

func (b *Build) live() bool { return b.h != nil && b.rt.h != nil }

// readLock takes the runtime's read lock for a call on the build: a nil or
// zero-value Build is nilErr and a closed one (or one of a closed runtime)
// closedErr (the lock is then not held). On nil the caller holds the read
// lock and releases it (defer b.rt.mu.RUnlock()).
func (b *Build) readLock() error {
	if b == nil || b.rt == nil {
		return nilErr("Build")
	}
	b.rt.mu.RLock()
	if !b.live() {
		b.rt.mu.RUnlock()
		return closedErr("Build")
	}
	return nil
}

// isDone is Poll and waitSliceOnce: call (fj_build_poll or fj_build_wait)
// under the read lock of a live build, and its done flag.
func (b *Build) isDone(call func(done *C.int32_t) *C.fj_status) (bool, error) {
	if err := b.readLock(); err != nil {
		return false, err
	}
	defer b.rt.mu.RUnlock()
	var done C.int32_t
	if err := statusErr(call(&done)); err != nil {
		return false, err
	}
	return done != 0, nil
}

// Poll reports whether the build has finished (successfully or not).
// Never blocks.
func (b *Build) Poll() (bool, error) {
	return b.isDone(func(done *C.int32_t) *C.fj_status { return C.fj_build_poll(b.h, done) })
}

// waitSliceOnce waits at most d for the build; true once it has finished.
func (b *Build) waitSliceOnce(d time.Duration) (bool, error) {
	ms := d.Milliseconds()
	if ms < 0 {
		ms = 0
	}
	return b.isDone(func(done *C.int32_t) *C.fj_status { return C.fj_build_wait(b.h, C.uint32_t(ms), done) })
}

// WaitDone waits until the build has finished, or ctx is done (then it
// returns ctx.Err(); the build goes on).
func (b *Build) WaitDone(ctx context.Context) error {
	if b == nil || b.rt == nil {
		return nilErr("Build")
	}
	for {
		done, err := b.waitSliceOnce(sliceOf(ctx))
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// Wait waits for the build (bounded by ctx) and takes its module.
func (b *Build) Wait(ctx context.Context) (*Module, error) {
	if b == nil || b.rt == nil {
		return nil, nilErr("Build")
	}
	if err := b.WaitDone(ctx); err != nil {
		return nil, err
	}
	return b.Take()
}

// Take waits for the build and hands over its module, or its error. Once:
// a second Take is a FailedPrecondition error.
func (b *Build) Take() (*Module, error) {
	if err := b.readLock(); err != nil {
		return nil, err
	}
	defer b.rt.mu.RUnlock()
	var h *C.fj_module
	if err := statusErr(C.fj_build_take(b.h, &h)); err != nil {
		return nil, err
	}
	return newModule(b.rt, h), nil
}

// Done returns a channel closed once the build has finished (or the Build
// or its Runtime was closed), for select loops; then call Take.
func (b *Build) Done() <-chan struct{} {
	if b == nil || b.rt == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	b.doneOnce.Do(func() {
		b.done = make(chan struct{})
		go func() {
			defer close(b.done)
			for {
				done, err := b.waitSliceOnce(waitSlice)
				if done || err != nil {
					return
				}
			}
		}()
	})
	return b.done
}

// Close gives the build up (one running finishes in the background and its
// module is dropped; a module already taken is not affected). Closing
// twice, or after the runtime was closed, is a no-op.
func (b *Build) Close() error {
	if b == nil || b.rt == nil {
		return nil
	}
	b.rt.mu.Lock()
	defer b.rt.mu.Unlock()
	var err error
	if b.h != nil && b.rt.h != nil {
		err = statusErr(C.fj_build_destroy(b.h))
	}
	b.h = nil
	runtime.SetFinalizer(b, nil)
	return err
}
