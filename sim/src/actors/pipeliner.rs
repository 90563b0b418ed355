//! The final pipeliner: once the faults healed, a client that sends its
//! requests as librdkafka does. Each of its transactions adds both
//! partitions of its topic, then sends three produce requests per
//! partition all in flight at once on the leader's connection (the first
//! to a partition opens the transaction there while the next ones wait
//! behind it), then commits or aborts; between transactions it sends plain
//! produce requests the same way. Every request it sends must be answered
//! within its timeout (`request-unanswered`), and it must finish its
//! transactions before the deadline (`liveness`): a broker that stops
//! answering a connection that pipelines (a produce's flush cycle held by
//! a future nobody polls) wedges every client of that connection, and then
//! everything else that waits on the same partition.

use std::collections::BTreeSet;
use std::time::Duration;

use bytes::Bytes;

use crate::actors::transactor::{Next, Txp, producer};
use crate::actors::{Actor, Finale, Play, Stage};
use crate::history::Event;
use crate::session::Session;
use std::net::Ipv4Addr;

pub const TOPIC: &str = "pipelined";
const PARTITIONS: i32 = 2;
const TXN_ID: &str = "sim-pipeliner";
/// Transactions it must finish.
pub const TRANSACTIONS: u32 = 4;
/// Produce requests per partition in one transaction, all in flight.
const IN_FLIGHT: i32 = 3;
/// Longer than any request of a healed cluster takes (a produce's own
/// timeout is 3 s), shorter than the liveness phase.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Runs the pipeliner until it finished [`TRANSACTIONS`] transactions or
/// `deadline` passed, and records what it saw.
pub async fn final_pipeliner(mut s: Session, deadline: Duration) {
    s.request_timeout = TIMEOUT;
    // CreateTopics may wait for the new partitions' leaders longer than
    // its call's timeout: only the requests after it are judged.
    while !s.create_topic(TOPIC, PARTITIONS).await && s.now() < deadline {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    s.client.sent = 0;
    s.client.timeouts.clear();
    let mut unanswered = BTreeSet::new();
    let mut next = Next::Fresh;
    let mut done = 0;
    let mut plain = 0u64;
    while done < TRANSACTIONS && s.now() < deadline {
        let now = std::mem::replace(&mut next, Next::Fresh);
        let Some(mut txp) = producer(&mut s, now, TXN_ID, TXN_ID, deadline, &mut unanswered).await
        else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        if transaction(&mut s, &mut txp, done % 2 == 0, done).await {
            done += 1;
            next = Next::Continue(txp);
        } else {
            next = Next::Bump(txp);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        plain_burst(&mut s, &mut plain).await;
    }
    s.history.record(
        s.now(),
        Event::FinalRequests {
            client: s.name.clone(),
            sent: s.client.sent,
            timed_out: std::mem::take(&mut s.client.timeouts),
            transactions: done,
            wanted: TRANSACTIONS,
        },
    );
}

/// One transaction: both partitions added, [`IN_FLIGHT`] produce requests
/// to each pipelined, then EndTxn. Whether it ended cleanly.
async fn transaction(s: &mut Session, txp: &mut Txp, commit: bool, n: u32) -> bool {
    let partitions: Vec<i32> = (0..PARTITIONS).collect();
    if s.add_partitions(txp, TOPIC, &partitions).await != Some(0) {
        return false;
    }
    s.transactional_id = Some(txp.id.to_owned());
    let mut batches = Vec::new();
    for &p in &partitions {
        let first = txp.seq.get(&p).copied().unwrap_or(0);
        for k in 0..IN_FLIGHT {
            let value = format!("pipelined-{n}-{p}-{k}");
            let batch = broker::log::batch::build_transactional(
                (txp.pid, txp.epoch, first.wrapping_add(k)),
                broker::clock::now_ms(),
                &[value.as_bytes()],
            );
            batches.push((p, batch));
        }
    }
    let answers = s.produce_pipelined(TOPIC, batches.clone()).await;
    s.transactional_id = None;
    let mut all = true;
    for ((p, _), answer) in batches.iter().zip(answers) {
        if matches!(answer, Ok((0, _, _))) {
            let next = txp.seq.entry(*p).or_insert(0);
            *next = next.wrapping_add(1);
        } else {
            all = false;
        }
    }
    if !all {
        return false;
    }
    matches!(
        s.end(txp, commit).await,
        crate::history::Outcome::Acked { .. }
    )
}

/// A few plain produce requests, all in flight at once.
async fn plain_burst(s: &mut Session, n: &mut u64) {
    let batches: Vec<(i32, Bytes)> = (0..4)
        .map(|k| {
            *n += 1;
            let value = format!("pipelined-plain-{n}");
            let batch = broker::log::batch::build(
                (-1, -1, -1),
                broker::clock::now_ms(),
                &[value.as_bytes()],
            );
            ((k % PARTITIONS as u64) as i32, batch)
        })
        .collect();
    let _ = s.produce_pipelined(TOPIC, batches).await;
}

/// Once the faults healed, requests pipelined as librdkafka sends them,
/// on a node of its own: every one must be answered.
pub struct Pipeliner;
pub static PIPELINER: Pipeliner = Pipeliner;

impl Actor for Pipeliner {
    fn name(&self) -> &'static str {
        "pipeliner"
    }

    fn play(&self, _role: &'static str, _s: Session, _stage: &Stage) -> Play {
        Box::pin(async {})
    }

    fn finale(&self, stage: &Stage, deadline: Duration) -> Vec<Finale> {
        let s = stage.session("final-pipeliner");
        vec![Finale {
            name: "final-pipeliner",
            ip: Ipv4Addr::new(10, 0, 2, 6),
            play: Box::pin(final_pipeliner(s, deadline)),
        }]
    }
}
