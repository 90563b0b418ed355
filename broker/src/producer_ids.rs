//! Producer ids for idempotent producers, handed out in blocks.
//!
//! A block of ids (`--producer-id-block`, 1000 by default) is owned by whoever wins the exclusive create of
//! `producers/block-<n>` (verified by reading its token back), so no two
//! brokers, and no two incarnations of one broker, ever hand out the same
//! id. A lost or undecided claim only burns a block; ids are plentiful.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use vfs::Vfs;
use vfs::durable::{Claim, ClaimToken, claim};

/// Claims tried before an allocation gives up (and the client retries).
const MAX_ATTEMPTS: u64 = 64;

fn block_path(n: u64) -> PathBuf {
    crate::layout::producer_block(n)
}

pub(crate) struct ProducerIds {
    vfs: Arc<dyn Vfs>,
    token: ClaimToken,
    block: i64,
    state: tokio::sync::Mutex<Range>,
}

#[derive(Default)]
struct Range {
    next: i64,
    end: i64,
    /// Where the next block search starts; `None` until the first search.
    hint: Option<u64>,
}

impl ProducerIds {
    pub fn new(vfs: Arc<dyn Vfs>, broker: u32, block: u32) -> Self {
        Self {
            vfs,
            block: i64::from(block.max(1)),
            token: ClaimToken::fresh(&format!("producer-ids-{broker}")),
            state: tokio::sync::Mutex::new(Range::default()),
        }
    }

    /// A producer id nobody else was or will be given.
    pub(crate) async fn allocate(&self) -> io::Result<i64> {
        let mut r = self.state.lock().await;
        if r.next >= r.end {
            let start = match r.hint {
                Some(h) => h,
                None => first_unclaimed(self.vfs.as_ref()).await?,
            };
            vfs::fault_point!(self.vfs, "producer-ids.block-chosen");
            let n = self.claim_block(start).await?;
            r.hint = Some(n + 1);
            r.next = n as i64 * self.block;
            r.end = r.next + self.block;
        }
        let id = r.next;
        r.next += 1;
        Ok(id)
    }

    async fn claim_block(&self, from: u64) -> io::Result<u64> {
        for n in from..from + MAX_ATTEMPTS {
            match claim(
                self.vfs.as_ref(),
                &block_path(n),
                &self.token,
                b"producer-ids",
            )
            .await?
            {
                Claim::Won => return Ok(n),
                Claim::Lost { .. } => {}
                Claim::Undecided(why) => {
                    tracing::info!(block = n, %why, "producer id block undecided; skipping it")
                }
            }
        }
        Err(io::Error::other(format!(
            "no producer id block won in {MAX_ATTEMPTS} attempts from block {from}"
        )))
    }
}

/// Roughly the first block nobody claimed: blocks are claimed in order, so
/// an exponential then binary search over "does block n exist" finds the
/// frontier in O(log n) opens. Claims decide; this only saves attempts.
async fn first_unclaimed(vfs: &dyn Vfs) -> io::Result<u64> {
    let exists = |n: u64| async move { vfs::exists_now(vfs, &block_path(n)).await };
    if !exists(0).await? {
        return Ok(0);
    }
    let mut hi = 1u64;
    while exists(hi).await? {
        hi = hi.saturating_mul(2);
    }
    let mut lo = hi / 2; // exists
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if exists(mid).await? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(hi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// An empty volume with the producers directory, as start-up leaves it.
    async fn volume() -> Arc<dyn Vfs> {
        let vfs: Arc<dyn Vfs> = Arc::new(vfs::MemVfs::new());
        vfs.mkdir(std::path::Path::new(crate::layout::PRODUCERS_DIR))
            .await
            .unwrap();
        vfs
    }

    #[tokio::test]
    async fn brokers_never_hand_out_the_same_id() {
        let vfs = volume().await;
        const BLOCK: u32 = 1000;
        let a = ProducerIds::new(vfs.clone(), 1, BLOCK);
        let b = ProducerIds::new(vfs.clone(), 2, BLOCK);
        let mut seen = BTreeSet::new();
        for _ in 0..1500 {
            assert!(seen.insert(a.allocate().await.unwrap()));
            assert!(seen.insert(b.allocate().await.unwrap()));
        }
        // A restarted broker finds the frontier and starts past it.
        let c = ProducerIds::new(vfs.clone(), 1, BLOCK);
        let id = c.allocate().await.unwrap();
        assert!(seen.insert(id));
        assert_eq!(id, 4 * i64::from(BLOCK), "blocks 0-3 are taken");
    }

    #[tokio::test]
    async fn small_blocks_are_claimed_one_after_another() {
        let vfs = volume().await;
        let a = ProducerIds::new(vfs.clone(), 1, 2);
        let b = ProducerIds::new(vfs.clone(), 2, 2);
        let ids = [
            a.allocate().await.unwrap(),
            a.allocate().await.unwrap(),
            b.allocate().await.unwrap(),
            a.allocate().await.unwrap(),
        ];
        assert_eq!(ids, [0, 1, 2, 4], "a: block 0, b: block 1, a: block 2");
    }
}
