//! The workload topic's producers: idempotent or plain, a few requests
//! in flight at once as librdkafka sends them.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use madsim::rand::Rng;

use crate::actors::{Actor, Play, Role, Stage};
use crate::history::{Event, Outcome};
use crate::session::{KAFKA_REQUEST_TIMEOUT, Session};
use crate::workload::{PARTITIONS, TOPIC};

/// Retriable produce errors: the client refreshes metadata and retries the
/// same batch (same sequence number).
fn retriable(code: i16) -> bool {
    // NOT_LEADER_OR_FOLLOWER, LEADER_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION,
    // REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR, NOT_ENOUGH_REPLICAS.
    matches!(code, 6 | 5 | 3 | 7 | 56 | 19)
}

/// A producer writing unique values until `until`, idempotent or plain
/// (no producer id: retries may duplicate, as in Kafka). As librdkafka, it
/// sends a few produce requests at a time, all in flight at once on each
/// leader's connection (an idempotent producer's batches to one partition
/// with consecutive sequences), and retries the unanswered ones alone, in
/// order.
pub async fn producer(mut s: Session, until: Duration, idempotent: bool) {
    let (mut pid, mut epoch) = if idempotent {
        s.init_producer_id().await
    } else {
        (-1, -1)
    };
    let mut seq: BTreeMap<i32, i32> = BTreeMap::new();
    let mut n = 0u64;
    while s.now() < until {
        let burst = madsim::rand::thread_rng().gen_range(1..=4u64);
        let mut sent = Vec::new();
        for k in n..n + burst {
            let partition = (k % PARTITIONS as u64) as i32;
            let value = format!("{}-{k}", s.name);
            let sequence = if idempotent {
                let next = seq.entry(partition).or_insert(0);
                let this = *next;
                *next = this.wrapping_add(1);
                this
            } else {
                -1
            };
            let batch = broker::log::batch::build(
                (pid, epoch, sequence),
                broker::clock::now_ms(),
                &[value.as_bytes()],
            );
            sent.push((partition, value, sequence, batch));
        }
        n += burst;
        let answers = s
            .produce_pipelined(
                TOPIC,
                sent.iter().map(|(p, _, _, b)| (*p, b.clone())).collect(),
            )
            .await;
        let mut restart = false;
        for ((partition, value, sequence, batch), answer) in sent.into_iter().zip(answers) {
            let outcome = match answer {
                Ok((0, offset, broker)) => Outcome::Acked { offset, broker },
                Ok((code, _, _)) if !retriable(code) => Outcome::Refused(code),
                _ => produce_until_answered(&mut s, partition, batch, until).await,
            };
            if let Outcome::Acked { offset, broker } = outcome {
                tracing::debug!(client = %s.name, partition, offset, broker, pid, epoch, sequence, "acked");
            } else {
                restart = idempotent;
            }
            s.history.record(
                s.now(),
                Event::Produce {
                    client: s.name.clone(),
                    idempotent,
                    partition,
                    value,
                    outcome,
                },
            );
        }
        if restart {
            // A batch's fate is unknown or it was refused: start over as a
            // new producer so later values never depend on it.
            (pid, epoch) = s.init_producer_id().await;
            seq.clear();
        }
        let pause = madsim::rand::thread_rng().gen_range(10..150);
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
}

/// Sends `batch` alone until it is acknowledged or refused, or retries stop
/// a while after the workload ends (so the liveness phase judges a quiet
/// cluster).
async fn produce_until_answered(
    s: &mut Session,
    partition: i32,
    batch: Bytes,
    until: Duration,
) -> Outcome {
    while s.now() < until + Duration::from_secs(15) {
        match s.produce(TOPIC, partition, batch.clone()).await {
            Ok((0, offset, broker)) => return Outcome::Acked { offset, broker },
            Ok((code, _, _)) if retriable(code) => {
                tracing::debug!(client = %s.name, partition, code, "produce retriable error");
            }
            Ok((code, _, _)) => return Outcome::Refused(code),
            Err(()) => tracing::debug!(client = %s.name, partition, "produce: no answer"),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Outcome::Unknown
}

/// The workload topic's two producers: `producer-0` idempotent (and
/// patient, when the run says so), `producer-1` plain.
pub struct Producers;
pub static PRODUCERS: Producers = Producers;

impl Actor for Producers {
    fn name(&self) -> &'static str {
        "producers"
    }

    fn roles(&self) -> Vec<Role> {
        vec![Role::client("producer-0"), Role::client("producer-1")]
    }

    fn play(&self, role: &'static str, mut s: Session, stage: &Stage) -> Play {
        let idempotent = role == "producer-0";
        if idempotent && stage.patient {
            s.request_timeout = KAFKA_REQUEST_TIMEOUT;
        }
        Box::pin(producer(s, stage.faults_end, idempotent))
    }
}
