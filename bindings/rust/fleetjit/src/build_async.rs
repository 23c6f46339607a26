//! Builds that do not block (since 1.1): `fj_module_build_async` gives a
//! [`PendingBuild`] to poll or wait on, or to turn into a [`BuildFuture`]
//! (a `std::future::Future`, no runtime crate needed: a waker thread waits
//! on the build and wakes the task).
use super::*;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long the waker thread waits per call, so a dropped future stops it
/// within this time.
const WAIT_SLICE_MS: u32 = 20;

/// A build in flight (`fj_build`), alive no longer than its runtime.
/// Dropping it gives the build up (`fj_build_destroy`).
pub struct PendingBuild<'rt> {
    raw: NonNull<sys::fj_build>,
    _rt: PhantomData<&'rt Runtime>,
}

// SAFETY: header conventions 2 and 4, as for Runtime: poll/wait/take are
// thread-safe calls, destroy needs ownership.
unsafe impl Send for PendingBuild<'_> {}
unsafe impl Sync for PendingBuild<'_> {}

impl Runtime {
    /// Starts building per `options` on the runtime's build threads and
    /// returns at once (the options are copied). Errors found before the
    /// build starts come back here; the build's own from
    /// [`PendingBuild::take`].
    pub fn build_async(&self, options: &BuildOptions) -> Result<PendingBuild<'_>> {
        let b = options.to_raw()?;
        let mut h = ptr::null_mut();
        check(unsafe { sys::fj_module_build_async(self.raw.as_ptr(), &b.raw, &mut h) })?;
        NonNull::new(h)
            .map(|raw| PendingBuild {
                raw,
                _rt: PhantomData,
            })
            .ok_or_else(|| Error::new(Code::Internal, "fj_module_build_async returned no build"))
    }
}

impl<'rt> PendingBuild<'rt> {
    pub fn as_raw(&self) -> *mut sys::fj_build {
        self.raw.as_ptr()
    }

    /// Whether the build has finished (successfully or not). Never blocks.
    pub fn poll(&self) -> Result<bool> {
        let mut done = 0i32;
        check(unsafe { sys::fj_build_poll(self.raw.as_ptr(), &mut done) })?;
        Ok(done != 0)
    }

    /// Waits until the build finishes (`true`) or `timeout` passes
    /// (`false`; not an error). `None` waits for ever.
    pub fn wait(&self, timeout: Option<Duration>) -> Result<bool> {
        let ms = match timeout {
            None => u32::MAX,
            Some(d) => d.as_millis().min(u32::MAX as u128 - 1) as u32,
        };
        let mut done = 0i32;
        check(unsafe { sys::fj_build_wait(self.raw.as_ptr(), ms, &mut done) })?;
        Ok(done != 0)
    }

    /// Waits for the build and hands over its module, or its error (a
    /// `BuildError` with the NVRTC log, ...). Once: a second take is
    /// `FailedPrecondition`.
    pub fn take(&self) -> Result<Module<'rt>> {
        let mut m = ptr::null_mut();
        check(unsafe { sys::fj_build_take(self.raw.as_ptr(), &mut m) })?;
        Module::from_created(m, "fj_build_take returned no module")
    }
}

impl Drop for PendingBuild<'_> {
    fn drop(&mut self) {
        let _ = check(unsafe { sys::fj_build_destroy(self.raw.as_ptr()) });
    }
}

impl fmt::Debug for PendingBuild<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PendingBuild")
            .field("raw", &self.raw)
            .finish()
    }
}

impl<'rt> IntoFuture for PendingBuild<'rt> {
    type Output = Result<Module<'rt>>;
    type IntoFuture = BuildFuture<'rt>;
    fn into_future(self) -> BuildFuture<'rt> {
        BuildFuture {
            build: Some(self),
            waiter: None,
        }
    }
}

/// The build's handle, sent to the waker thread.
struct RawBuild(*mut sys::fj_build);
// SAFETY: fj_build_wait is a thread-safe call; the future joins the thread
// before it destroys the handle.
unsafe impl Send for RawBuild {}

struct Waiter {
    waker: Arc<Mutex<Option<Waker>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// A [`PendingBuild`] as a `Future` of its module: `rt.build_async(&o)?.await`.
/// The first poll that finds the build unfinished starts one waker thread
/// (a `fj_build_wait` loop); dropping the future stops that thread and
/// gives the build up.
pub struct BuildFuture<'rt> {
    build: Option<PendingBuild<'rt>>,
    waiter: Option<Waiter>,
}

impl<'rt> Future for BuildFuture<'rt> {
    type Output = Result<Module<'rt>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let Some(build) = this.build.as_ref() else {
            return Poll::Ready(Err(Error::new(
                Code::FailedPrecondition,
                "BuildFuture polled after it completed",
            )));
        };
        match build.poll() {
            Err(e) => return Poll::Ready(Err(e)),
            Ok(true) => {
                let r = build.take();
                this.stop_waiter();
                this.build = None;
                return Poll::Ready(r);
            }
            Ok(false) => {}
        }
        match &this.waiter {
            Some(w) => *w.waker.lock().unwrap() = Some(cx.waker().clone()),
            None => {
                let waker = Arc::new(Mutex::new(Some(cx.waker().clone())));
                let stop = Arc::new(AtomicBool::new(false));
                let raw = RawBuild(build.as_raw());
                let (w2, s2) = (waker.clone(), stop.clone());
                let thread = std::thread::Builder::new()
                    .name("fleetjit-build-waker".into())
                    .spawn(move || {
                        let raw = raw;
                        loop {
                            if s2.load(Ordering::Acquire) {
                                return;
                            }
                            let mut done = 0i32;
                            let st = unsafe { sys::fj_build_wait(raw.0, WAIT_SLICE_MS, &mut done) };
                            let failed = check(st).is_err();
                            if done != 0 || failed {
                                if let Some(w) = w2.lock().unwrap().take() {
                                    w.wake();
                                }
                                return;
                            }
                        }
                    });
                match thread {
                    Ok(t) => {
                        this.waiter = Some(Waiter {
                            waker,
                            stop,
                            thread: Some(t),
                        })
                    }
                    // No thread: wake at once so the executor polls again.
                    Err(_) => cx.waker().wake_by_ref(),
                }
            }
        }
        // The build may have finished between the poll and the waker's
        // registration: the thread then sees it done and wakes at once.
        Poll::Pending
    }
}

impl BuildFuture<'_> {
    fn stop_waiter(&mut self) {
        if let Some(mut w) = self.waiter.take() {
            w.stop.store(true, Ordering::Release);
            if let Some(t) = w.thread.take() {
                let _ = t.join();
            }
        }
    }
}

impl Drop for BuildFuture<'_> {
    fn drop(&mut self) {
        // The waker thread uses the handle: stop it before the handle goes.
        self.stop_waiter();
    }
}

impl fmt::Debug for BuildFuture<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BuildFuture")
            .field("build", &self.build)
            .field("waiting", &self.waiter.is_some())
            .finish()
    }
}
