//! The broker's periodic chores, each round a task of its own so that a
//! slow volume call in one never holds up heartbeats and takeovers.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::config::Config;
use crate::leaders::Leaders;
use crate::log::partition::CleanerLimits;

/// A chore that runs in rounds, each a task of its own, one round at a time.
#[derive(Default)]
pub(super) struct Chore {
    round: Option<JoinHandle<()>>,
    running: Arc<std::sync::atomic::AtomicBool>,
}

impl Chore {
    fn running(&self) -> bool {
        self.running.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Starts `round` unless the previous round is still running.
    pub(super) fn start(&mut self, round: impl Future<Output = ()> + Send + 'static) {
        use std::sync::atomic::Ordering;
        if self.running() {
            return;
        }
        self.running.store(true, Ordering::Relaxed);
        let running = self.running.clone();
        self.round = Some(tokio::spawn(async move {
            round.await;
            running.store(false, Ordering::Relaxed);
        }));
    }

    pub(super) fn abort(&self) {
        if let Some(round) = &self.round {
            round.abort();
        }
    }
}

/// Cleaner rounds (segment rolls by age, compaction passes), each a task
/// of its own so that a long pass never holds up heartbeats and
/// takeovers, started only when a partition has work: a broker with
/// nothing to clean runs nothing.
#[derive(Default)]
pub(super) struct Cleaner {
    pub(super) chore: Chore,
    last: Option<tokio::time::Instant>,
}

impl Cleaner {
    pub(super) fn start_if_due(&mut self, leaders: &Arc<Leaders>, config: &Config) {
        let backoff = Duration::from_millis(config.log_cleaner_backoff_ms);
        if self.chore.running()
            || self.last.is_some_and(|l| l.elapsed() < backoff)
            || !leaders.cleaning_due(config.wall_clock.now_ms())
        {
            return;
        }
        self.last = Some(tokio::time::Instant::now());
        let limits = CleanerLimits {
            dedupe_buffer_bytes: config.log_cleaner_dedupe_buffer_size,
            io_bytes_per_second: Some(config.log_cleaner_io_max_bytes_per_second)
                .filter(|r| *r > 0),
        };
        let (leaders, clock) = (leaders.clone(), config.wall_clock.clone());
        self.chore
            .start(async move { leaders.clean(&limits, clock.now_ms()).await });
    }
}
