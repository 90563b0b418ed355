//! The churning admin: deletes and recreates a topic over and over.

use std::time::Duration;

use crate::actors::{Actor, Play, Role, Stage};
use crate::history::Event;
use crate::session::Session;
use crate::workload::{CHURN_PARTITIONS, CHURN_TOPIC};

const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;

/// Deletes and recreates a topic over and over; each incarnation's values
/// carry its number, and what is read right after a recreate must all be
/// of that incarnation.
pub(crate) async fn admin(mut s: Session, until: Duration) {
    let mut incarnation = 0u32;
    let mut unanswered: Vec<String> = Vec::new();
    while s.now() < until {
        let Some(topic_id) = s.create_topic_id(CHURN_TOPIC, CHURN_PARTITIONS).await else {
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        };
        incarnation += 1;
        s.refresh(CHURN_TOPIC).await;
        for k in 0..3 {
            let value = format!("churn-{incarnation}-{k}");
            let batch = broker::log::batch::build(
                (-1, -1, -1),
                broker::clock::now_ms(),
                &[value.as_bytes()],
            );
            for _ in 0..10 {
                match s.produce(CHURN_TOPIC, 0, batch.clone()).await {
                    Ok((0, _, _)) => break,
                    Err(()) if !unanswered.contains(&value) => unanswered.push(value.clone()),
                    _ => {}
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
        }
        if let Some((got, _)) = s.fetch(CHURN_TOPIC, 0, 0).await {
            s.history.record(
                s.now(),
                Event::ChurnRead {
                    incarnation,
                    values: got.into_iter().map(|(_, v, _)| v).collect(),
                    in_doubt: unanswered
                        .iter()
                        .filter(|v| !v.starts_with(&format!("churn-{incarnation}-")))
                        .cloned()
                        .collect(),
                },
            );
        }
        let mut deleted = false;
        let mut gone = false;
        let mut in_doubt = false;
        let mark = s.volume_mark.as_ref().map_or(0, |m| m());
        while s.now() < until && !deleted && !gone {
            let answer = s.delete_topic(CHURN_TOPIC).await;
            deleted = answer == Some(0);
            // Only this client deletes the topic: gone after an attempt of
            // ours that got no answer, that attempt probably went through.
            gone = in_doubt && answer == Some(UNKNOWN_TOPIC_OR_PARTITION);
            in_doubt |= answer.is_none();
            if !deleted && !gone {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
        if (deleted || gone) && !topic_id.is_empty() {
            s.history.record(
                s.now(),
                Event::Deleted {
                    topic_id: topic_id.clone(),
                    mark,
                    acknowledged: deleted,
                },
            );
        }
        if deleted {
            // Acknowledged deleted: nobody may serve its records any more.
            let values = match s.fetch(CHURN_TOPIC, 0, 0).await {
                Some((got, _)) => got.into_iter().map(|(_, v, _)| v).collect(),
                None => Vec::new(),
            };
            s.history.record(
                s.now(),
                Event::DeletedRead {
                    incarnation,
                    values,
                },
            );
        }
        tokio::time::sleep(Duration::from_millis(1_000)).await;
    }
}

/// The admin churning a topic.
pub struct Admin;
pub static ADMIN: Admin = Admin;

impl Actor for Admin {
    fn name(&self) -> &'static str {
        "admin"
    }

    fn roles(&self) -> Vec<Role> {
        vec![Role::client("admin-0")]
    }

    fn play(&self, _role: &'static str, s: Session, stage: &Stage) -> Play {
        Box::pin(admin(s, stage.faults_end))
    }
}
