//! The twin fault: a second process started with a broker id that already
//! has one, as when a StatefulSet pod is recreated while its old pod still
//! runs on a partitioned node, or an operator copies a broker's settings.
//! The broker id claim (`broker::cluster::id_claim`) must leave exactly one
//! of them running; the observer's `id-shared` invariant sees two that
//! both publish heartbeats.
//!
//! Three shapes, drawn per fault:
//! - beside: the twin starts while the broker runs; it must stop itself;
//! - zombie: the broker is paused (past its heartbeat check) and the twin
//!   starts, claims the id and runs; the broker then wakes up and must
//!   stop on seeing the newer claim, before it publishes again;
//! - together: the broker restarts at the same instant as the twin starts:
//!   the two claim the same slot, and one of them must give up.
//!
//! At the heal the twin is killed, and the broker restarted if it stopped
//! (or was the zombie), so the run goes on with one process per id.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use madsim::runtime::{Handle, NodeHandle};

use crate::frozen::Frozen;
use crate::trace::Trace;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TwinMode {
    Beside,
    Zombie,
    Together,
}

impl TwinMode {
    pub(crate) const ALL: [TwinMode; 3] = [TwinMode::Beside, TwinMode::Zombie, TwinMode::Together];

    pub fn name(self) -> &'static str {
        match self {
            TwinMode::Beside => "beside",
            TwinMode::Zombie => "zombie",
            TwinMode::Together => "together",
        }
    }
}

/// A process of a broker: its node, and whether its `broker::node::run`
/// returned (a start-up refusal, or superseded).
#[derive(Clone)]
pub(crate) struct Process {
    pub node: NodeHandle,
    pub exited: Arc<AtomicBool>,
}

impl Process {
    pub fn exited(&self) -> bool {
        self.exited.load(Ordering::SeqCst)
    }
}

/// Starts a twin process of broker `id` on a node and NFS host of its own.
pub(crate) type TwinStarter = Arc<dyn Fn(u32) -> Process + Send + Sync>;

/// What a twin fault acts on.
pub(crate) struct Twin<'a> {
    pub handle: &'a Handle,
    pub broker: u32,
    pub original: &'a Process,
    pub start: &'a TwinStarter,
    pub frozen: &'a Frozen,
    pub trace: &'a Trace,
    pub stamp: &'a (dyn Fn() -> String + Sync),
    /// Long enough for the twin to pass its start-up checks.
    pub lasts: Duration,
    /// A few heartbeat intervals: how long a woken zombie gets to notice.
    pub notice: Duration,
}

impl Twin<'_> {
    pub async fn inject(&self, mode: TwinMode) {
        let b = self.broker;
        let original = self.original.node.id();
        self.frozen.set(b, true);
        let twin = match mode {
            TwinMode::Beside => (self.start)(b),
            TwinMode::Zombie => {
                self.handle.pause(original);
                (self.start)(b)
            }
            TwinMode::Together => {
                self.handle.kill(original);
                self.handle.restart(original);
                (self.start)(b)
            }
        };
        tokio::time::sleep(self.lasts).await;
        if mode == TwinMode::Zombie {
            self.handle.resume(original);
            tokio::time::sleep(self.notice).await;
        }
        self.record(mode, &twin);
        self.handle.kill(twin.node.id());
        if mode == TwinMode::Zombie || self.original.exited() {
            // A stopped broker's tasks and sockets live on in its node
            // (a process would have exited): a restart needs the kill.
            self.handle.kill(original);
            self.handle.restart(original);
        }
        self.frozen.set(b, false);
    }

    fn record(&self, mode: TwinMode, twin: &Process) {
        let state = |p: &Process| if p.exited() { "stopped" } else { "running" };
        self.trace.record(format!(
            "{} twin {} of broker-{}: broker {}, twin {}",
            (self.stamp)(),
            mode.name(),
            self.broker,
            state(self.original),
            state(twin)
        ));
    }
}
