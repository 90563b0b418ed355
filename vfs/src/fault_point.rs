//! Fault points: the step boundaries of multi-step volume changes, where
//! the simulator may hold the calling task or crash its broker (the idea
//! of FoundationDB's BUGGIFY, aimed at the windows a fixed fault timeline
//! hits only by luck: a zombie flushing between two steps of a takeover, a
//! crash between a manifest write and the unlink it allows).
//!
//! `fault_point!(vfs, "takeover.epoch-claimed")` marks one. In the production
//! build it expands to nothing (`ci/test` checks the release binary for
//! point names); in the simulation build it awaits the hook the simulator
//! installed for this thread (each seed runs its runtime on a thread of its
//! own), passing the volume host of the caller, so the hook knows which
//! broker is there. Without a hook (unit tests), a point does nothing.

#[cfg(madsim)]
mod hook {
    use std::cell::RefCell;
    use std::future::Future;
    use std::pin::Pin;
    use std::sync::Arc;

    /// Called at every fault point reached: the caller's volume host (if
    /// the volume knows it) and the point's name.
    pub type Hook = Arc<
        dyn Fn(Option<u32>, &'static str) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync,
    >;

    thread_local! {
        static HOOK: RefCell<Option<Hook>> = const { RefCell::new(None) };
    }

    /// Installs (or, with `None`, removes) this thread's hook.
    pub fn install(hook: Option<Hook>) {
        HOOK.with(|h| *h.borrow_mut() = hook);
    }

    #[doc(hidden)]
    pub async fn reached(host: Option<u32>, name: &'static str) {
        let hook = HOOK.with(|h| h.borrow().clone());
        if let Some(hook) = hook {
            hook(host, name).await;
        }
    }
}

#[cfg(madsim)]
pub use hook::{Hook, install, reached};

/// A step boundary of a multi-step volume change (see the module docs).
/// `$vfs` is the volume the step works on (`&dyn Vfs` or anything that
/// derefs to it); `$name` is `"<change>.<step done>"`.
#[macro_export]
macro_rules! fault_point {
    ($vfs:expr, $name:literal) => {{
        #[cfg(madsim)]
        {
            $crate::fault_point::reached($crate::Vfs::fault_host(&*$vfs), $name).await;
        }
    }};
}
