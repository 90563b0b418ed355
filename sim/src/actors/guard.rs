//! ACL changes under faults: an admin flips one ACL on and off while a
//! probe writes. Every broker runs with `--authorizer acl` and
//! `--allow-everyone-if-no-acl-found`, so the other clients (whose
//! resources no ACL names) are unaffected; the admin keeps `ALLOW ALL` on
//! [`ACL_TOPIC`] for everyone and flips `DENY WRITE` for the probe's host.
//! The brokers apply each change from the ACL file's versions on the volume,
//! and a refused produce names the version it was refused under.
//!
//! After each change the admin notes the newest version on the volume (no
//! version above it existed then, whoever writes them: the `markers` admins
//! change the ACLs too), and the checker holds acl-regression: a broker that
//! refused the probe under version `v` accepts it later only if a version
//! after `v` that allows it was begun before.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, CreateAclsRequest, DeleteAclsRequest, ProduceRequest, RequestKind, ResponseKind,
    TopicName,
};
use kafka_protocol::protocol::StrBytes;
use madsim::rand::Rng;
use vfs::Vfs;

use crate::actors::{Actor, FinalRead, Play, Role, Stage};
use crate::history::Event;
use crate::hosts::OBSERVER_HOST;
use crate::session::Session;

/// The topic whose ACLs change.
pub const ACL_TOPIC: &str = "guarded";
/// The probe's address: the DENY names this host.
pub const PROBE_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 3, 2);
/// The admin's address.
pub const ADMIN_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 3, 1);

fn text(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

/// ALLOW ALL for everyone (so that Metadata and the like stay allowed once
/// an ACL names the topic), or DENY WRITE for the probe's host.
fn acl(deny: bool) -> AclCreation {
    let (host, op, perm) = if deny {
        (PROBE_IP.to_string(), 4, 2) // WRITE, DENY
    } else {
        ("*".to_owned(), 2, 3) // ALL, ALLOW
    };
    AclCreation::default()
        .with_resource_type(2) // TOPIC
        .with_resource_name(text(ACL_TOPIC))
        .with_resource_pattern_type(3) // LITERAL
        .with_principal(text("User:*"))
        .with_host(text(&host))
        .with_operation(op)
        .with_permission_type(perm)
}

async fn create_acl(s: &mut Session, deny: bool) -> Option<bool> {
    let req = CreateAclsRequest::default().with_creations(vec![acl(deny)]);
    let to = s.any_broker();
    match s
        .client
        .call(to, ApiKey::CreateAcls, 3, RequestKind::CreateAcls(req))
        .await
    {
        Ok(ResponseKind::CreateAcls(r)) => Some(r.results.iter().all(|r| r.error_code == 0)),
        _ => None,
    }
}

async fn delete_deny(s: &mut Session) -> Option<bool> {
    let filter = DeleteAclsFilter::default()
        .with_resource_type_filter(2)
        .with_resource_name_filter(Some(text(ACL_TOPIC)))
        .with_pattern_type_filter(3)
        .with_principal_filter(Some(text("User:*")))
        .with_host_filter(Some(text(&PROBE_IP.to_string())))
        .with_operation(4)
        .with_permission_type(2);
    let req = DeleteAclsRequest::default().with_filters(vec![filter]);
    let to = s.any_broker();
    match s
        .client
        .call(to, ApiKey::DeleteAcls, 3, RequestKind::DeleteAcls(req))
        .await
    {
        Ok(ResponseKind::DeleteAcls(r)) => Some(r.filter_results.iter().all(|r| r.error_code == 0)),
        _ => None,
    }
}

/// The newest ACL version on the volume (complete or not).
async fn newest(volume: &dyn Vfs) -> Option<u64> {
    newest_version(volume, "acls").await
}

/// The newest version of the security document `name` on the volume
/// (complete or not), found by the observer itself: by opening the
/// versions' names from 1 up (open by name is fresh, close-to-open) until
/// three in a row are missing. Not through the broker's `Versioned`: a
/// mutant of its reader would blind the oracle that is to catch it. `None`
/// if the volume kept failing.
pub(crate) async fn newest_version(volume: &dyn Vfs, name: &str) -> Option<u64> {
    let (mut newest, mut missing, mut n) = (0, 0, 1u64);
    while missing < 3 {
        let path = std::path::PathBuf::from(format!("security/{name}-{n:012}"));
        let mut found = None;
        for _ in 0..5 {
            match vfs::exists_now(volume, &path).await {
                Ok(e) => {
                    found = Some(e);
                    break;
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
        if found? {
            (newest, missing) = (n, 0);
        } else {
            missing += 1;
        }
        n += 1;
    }
    Some(newest)
}

/// Every ACL version on the volume and whether it denies the probe, read
/// after the run (see `Event::AclVersions`).
pub async fn final_versions(volume: &dyn Vfs) -> Vec<(u64, Option<Option<bool>>)> {
    use broker::security::AclSet;
    use broker::security::acl::{Operation, Permission};
    let Some(top) = newest(volume).await else {
        return Vec::new();
    };
    read_versions(volume, "acls", top, |payload| {
        serde_json::from_slice::<AclSet>(payload).ok().map(|set| {
            set.acls.iter().any(|a| {
                a.permission == Permission::Deny
                    && a.operation == Operation::Write
                    && a.host == PROBE_IP.to_string()
            })
        })
    })
    .await
}

/// Versions 1 to `top` of the security document `name`, each judged by
/// `refuses` (whether it refuses the probe; `None`: unreadable): `None` for
/// a version with no complete claim (never applied by anyone).
pub(crate) async fn read_versions(
    volume: &dyn Vfs,
    name: &str,
    top: u64,
    refuses: impl Fn(&[u8]) -> Option<bool>,
) -> Vec<(u64, Option<Option<bool>>)> {
    use vfs::durable::{Claim, ClaimToken};
    let reader = ClaimToken::fresh("security-checker");
    let mut out = Vec::new();
    for n in 1..=top {
        let seen = match read_version(volume, name, n, &reader).await {
            Some(Claim::Lost { payload, .. }) => Some(refuses(&payload)),
            Some(_) => None,
            None => Some(None),
        };
        out.push((n, seen));
    }
    out
}

/// Version `n` of the security document `name` as `reader` finds it,
/// tried five times 100 ms apart; `None` if the volume kept failing.
pub(crate) async fn read_version(
    volume: &dyn Vfs,
    name: &str,
    n: u64,
    reader: &vfs::durable::ClaimToken,
) -> Option<vfs::durable::Claim> {
    let path = std::path::PathBuf::from(format!("security/{name}-{n:012}"));
    for _ in 0..5 {
        match vfs::durable::read_claim(volume, &path, reader).await {
            Ok(c) => return Some(c),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    None
}

/// Creates [`ACL_TOPIC`] and its ALLOW, then flips the DENY until `until`.
pub async fn admin(mut s: Session, volume: Arc<dyn Vfs>, until: Duration) {
    while !s.create_topic(ACL_TOPIC, 1).await {
        tokio::time::sleep(Duration::from_millis(500)).await;
        if s.now() >= until {
            return;
        }
    }
    let mut deny = false;
    // The ALLOW first (a change like the others, recorded as an allow).
    let mut first = true;
    while s.now() < until {
        let start = s.now();
        let acked = if first {
            create_acl(&mut s, false).await
        } else if deny {
            create_acl(&mut s, true).await
        } else {
            delete_deny(&mut s).await
        };
        let read_at = s.now();
        let top = newest(volume.as_ref()).await;
        s.history.record(
            s.now(),
            Event::AclChange {
                deny: deny && !first,
                start,
                acked: acked == Some(true),
                top,
                read_at,
            },
        );
        if first && acked != Some(true) {
            // The ALLOW must land before any DENY flips.
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        }
        first = false;
        deny = !deny;
        let pause = madsim::rand::thread_rng().gen_range(1500..4000);
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
}

/// Writes [`ACL_TOPIC`] every 300 ms until `until`, noting who accepted
/// and who refused under which version.
pub async fn probe(mut s: Session, until: Duration) {
    let mut n = 0u64;
    while s.now() < until {
        tokio::time::sleep(Duration::from_millis(300)).await;
        n += 1;
        let Some(to) = s.leader(ACL_TOPIC, 0).await else {
            continue;
        };
        let batch = broker::log::batch::build(
            (-1, -1, -1),
            broker::clock::now_ms(),
            &[format!("probe-{n}").as_bytes()],
        );
        let req = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(3000)
            .with_topic_data(vec![
                TopicProduceData::default()
                    .with_name(TopicName(text(ACL_TOPIC)))
                    .with_partition_data(vec![
                        PartitionProduceData::default()
                            .with_index(0)
                            .with_records(Some(batch)),
                    ]),
            ]);
        let sent = s.now();
        let answer = s
            .client
            .call(to, ApiKey::Produce, 8, RequestKind::Produce(req))
            .await;
        let Ok(ResponseKind::Produce(r)) = answer else {
            s.forget(ACL_TOPIC, 0);
            continue;
        };
        let Some(p) = r
            .responses
            .first()
            .and_then(|t| t.partition_responses.first())
        else {
            continue;
        };
        let version = p
            .error_message
            .as_ref()
            .and_then(|m| m.split("ACL version ").nth(1))
            .and_then(|v| v.trim_end_matches(')').parse().ok());
        match p.error_code {
            0 | 29 => s.history.record(
                s.now(),
                Event::AclProbe {
                    broker: to,
                    sent,
                    allowed: p.error_code == 0,
                    version,
                },
            ),
            _ => s.forget(ACL_TOPIC, 0),
        }
    }
}

/// An admin flipping an ACL while a probe writes the topic it guards.
pub struct Guard;
pub static GUARD: Guard = Guard;

impl Actor for Guard {
    fn name(&self) -> &'static str {
        "guard"
    }

    fn roles(&self) -> Vec<Role> {
        vec![
            Role::operator("acl-admin-0", ADMIN_IP),
            Role::operator("acl-probe-0", PROBE_IP),
        ]
    }

    fn play(&self, role: &'static str, s: Session, stage: &Stage) -> Play {
        if role == "acl-admin-0" {
            Box::pin(admin(s, stage.volume(OBSERVER_HOST), stage.faults_end))
        } else {
            Box::pin(probe(s, stage.faults_end))
        }
    }

    fn needs_authorizer(&self) -> bool {
        true
    }

    fn final_state(&self, stage: &Stage, _deadline: Duration) -> Vec<FinalRead> {
        let volume = stage.volume(OBSERVER_HOST);
        vec![Box::pin(async move {
            Event::AclVersions {
                versions: final_versions(volume.as_ref()).await,
            }
        })]
    }
}
