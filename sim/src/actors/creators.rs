//! Admin clients that create topics many at a time, through whichever
//! broker they pick, grow some of them and delete older ones, all while
//! the other creator and the churning admin do the same. Every topic of
//! every request goes into the history (`Event::Admin`); the checker's
//! `create-failed` invariant holds that none fails for a reason inside the
//! cluster.

use std::collections::VecDeque;
use std::time::Duration;

use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::{
    ApiKey, CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, RequestKind,
    ResponseKind, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use madsim::rand::Rng;

use crate::actors::{Actor, Play, Role, Stage};
use crate::history::Event;
use crate::session::Session;

const TOPIC_ALREADY_EXISTS: i16 = 36;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
/// Topics a creator keeps before it deletes the oldest.
const KEEP: usize = 4;

fn name(v: &str) -> TopicName {
    TopicName(StrBytes::from_string(v.to_owned()))
}

/// A topic this creator made: its name, id (empty when only known to
/// exist), partitions, and whether a deletion of it went unanswered.
struct Made {
    name: String,
    id: String,
    partitions: i32,
    delete_in_doubt: bool,
}

pub async fn creator(mut s: Session, index: usize, until: Duration) {
    let mut next = 0u32;
    let mut retry: Vec<(String, i32)> = Vec::new();
    let mut made: VecDeque<Made> = VecDeque::new();
    let mut round = 0u32;
    while s.now() < until {
        round += 1;
        let mut batch = std::mem::take(&mut retry);
        let fresh = madsim::rand::thread_rng().gen_range(2..=4);
        for _ in 0..fresh {
            let partitions = madsim::rand::thread_rng().gen_range(1..=2);
            batch.push((format!("c{index}-{next}"), partitions));
            next += 1;
        }
        for ((topic, partitions), answer) in batch.iter().zip(create(&mut s, &batch).await) {
            match answer {
                Some((0, id)) => made.push_back(Made {
                    name: topic.clone(),
                    id,
                    partitions: *partitions,
                    delete_in_doubt: false,
                }),
                Some((TOPIC_ALREADY_EXISTS, _)) => made.push_back(Made {
                    name: topic.clone(),
                    id: String::new(),
                    partitions: *partitions,
                    delete_in_doubt: false,
                }),
                // No answer, or a failure (the checker judges it): it may
                // exist; asking again settles that.
                _ => retry.push((topic.clone(), *partitions)),
            }
        }
        if round % 3 == 0 {
            if let Some(m) = made.back_mut() {
                if grow(&mut s, &m.name, m.partitions + 1).await {
                    m.partitions += 1;
                }
            }
        }
        let mut deletions = 0;
        while made.len() > KEEP && deletions < 2 && s.now() < until {
            deletions += 1;
            let Some(oldest) = made.front_mut() else {
                break;
            };
            if !delete(&mut s, oldest).await {
                break;
            }
            made.pop_front();
        }
        let pause = madsim::rand::thread_rng().gen_range(1_500..4_000);
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
}

/// One CreateTopics request for all of `batch`: per topic, the error code
/// and topic id, or `None` without an answer.
async fn create(s: &mut Session, batch: &[(String, i32)]) -> Vec<Option<(i16, String)>> {
    let req = CreateTopicsRequest::default()
        .with_topics(
            batch
                .iter()
                .map(|(t, p)| {
                    CreatableTopic::default()
                        .with_name(name(t))
                        .with_num_partitions(*p)
                        .with_replication_factor(1)
                })
                .collect(),
        )
        // As confluent-kafka's admin by default: no wait for leaders, so
        // creates come as fast as the broker stages them.
        .with_timeout_ms(0);
    let (to, sent, answer, volume_errors) =
        call(s, ApiKey::CreateTopics, 7, RequestKind::CreateTopics(req)).await;
    let results = match answer {
        Ok(ResponseKind::CreateTopics(r)) => r.topics,
        _ => Vec::new(),
    };
    batch
        .iter()
        .map(|(topic, _)| {
            let r = results.iter().find(|r| r.name.as_str() == topic.as_str());
            let answer = r.map(|r| {
                (
                    r.error_code,
                    r.error_message
                        .as_ref()
                        .map_or(String::new(), |m| m.to_string()),
                )
            });
            s.history.record(
                s.now(),
                Event::Admin {
                    client: s.name.clone(),
                    topic: topic.clone(),
                    grow: false,
                    broker: to,
                    sent,
                    answer: answer.clone(),
                    volume_errors,
                },
            );
            r.map(|r| (r.error_code, r.topic_id.to_string()))
        })
        .collect()
}

/// Grows `topic` to `count` partitions; whether it has them now.
async fn grow(s: &mut Session, topic: &str, count: i32) -> bool {
    let req = CreatePartitionsRequest::default()
        .with_topics(vec![
            CreatePartitionsTopic::default()
                .with_name(name(topic))
                .with_count(count),
        ])
        .with_timeout_ms(crate::workload::create_timeout_ms());
    let (to, sent, answer, volume_errors) = call(
        s,
        ApiKey::CreatePartitions,
        3,
        RequestKind::CreatePartitions(req),
    )
    .await;
    let answer = match answer {
        Ok(ResponseKind::CreatePartitions(r)) => r.results.first().map(|r| {
            (
                r.error_code,
                r.error_message
                    .as_ref()
                    .map_or(String::new(), |m| m.to_string()),
            )
        }),
        _ => None,
    };
    s.history.record(
        s.now(),
        Event::Admin {
            client: s.name.clone(),
            // Keyed by the count asked for: a retry after no answer may
            // find it done already.
            topic: format!("{topic}:{count}"),
            grow: true,
            broker: to,
            sent,
            answer: answer.clone(),
            volume_errors,
        },
    );
    matches!(answer, Some((0, _)))
}

/// Deletes `m`; whether it is gone. A deletion of a topic whose id is
/// known goes into the history for the end-of-run checks of the volume.
async fn delete(s: &mut Session, m: &mut Made) -> bool {
    let mark = s.volume_mark.as_ref().map_or(0, |f| f());
    let req = DeleteTopicsRequest::default()
        .with_topic_names(vec![name(&m.name)])
        .with_timeout_ms(5000);
    let to = s.any_broker();
    let code = match s
        .client
        .call(to, ApiKey::DeleteTopics, 4, RequestKind::DeleteTopics(req))
        .await
    {
        Ok(ResponseKind::DeleteTopics(r)) => r.responses.first().map(|t| t.error_code),
        _ => None,
    };
    let deleted = code == Some(0);
    // Only this client deletes its topics: gone after an unanswered
    // attempt of ours means that attempt went through.
    let gone = code == Some(UNKNOWN_TOPIC_OR_PARTITION);
    if (deleted || (gone && m.delete_in_doubt)) && !m.id.is_empty() {
        s.history.record(
            s.now(),
            Event::Deleted {
                topic_id: m.id.clone(),
                mark,
                acknowledged: deleted,
            },
        );
    }
    m.delete_in_doubt |= code.is_none();
    deleted || gone
}

/// One admin request to a random broker: the broker, when it was sent, the
/// answer, and how many I/O errors the volume injected meanwhile.
async fn call(
    s: &mut Session,
    api: ApiKey,
    version: i16,
    req: RequestKind,
) -> (
    u32,
    Duration,
    Result<ResponseKind, crate::client::CallError>,
    u64,
) {
    let to = s.any_broker();
    let sent = s.now();
    let before = volume_errors(s);
    let answer = s.client.call(to, api, version, req).await;
    (to, sent, answer, volume_errors(s) - before)
}

fn volume_errors(s: &Session) -> u64 {
    s.volume_errors.as_ref().map_or(0, |f| f())
}

/// Two admins creating, growing and deleting topics many at a time.
pub struct Creators;
pub static CREATORS: Creators = Creators;

impl Actor for Creators {
    fn name(&self) -> &'static str {
        "creators"
    }

    fn roles(&self) -> Vec<Role> {
        vec![Role::client("creator-0"), Role::client("creator-1")]
    }

    fn play(&self, role: &'static str, s: Session, stage: &Stage) -> Play {
        let index = if role == "creator-0" { 0 } else { 1 };
        Box::pin(creator(s, index, stage.faults_end))
    }
}
