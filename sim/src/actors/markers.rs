//! Acknowledged security changes must stay made: two admins, one per
//! document, each add markers of their own (an ACL on topic `marker-<k>`,
//! a SCRAM user `marker-<k>`), two at once every second or two through
//! brokers picked at random, concurrently with the flipping admins of
//! `guard` and `logins`. Markers are only ever added, so the newest complete version
//! of each document after the run must hold every acknowledged one
//! (security-change-lost): a writer that edits a stale copy, acknowledges
//! a change that others may already have written over, or writes over a
//! version still being written drops a marker.
//!
//! The admins wait 30 s for an answer, as Kafka's admin clients do, so a
//! broker frozen in the middle of a change still gets to answer.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::time::Duration;

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::{
    ApiKey, CreateAclsRequest, DescribeAclsRequest, RequestKind, ResponseKind,
};
use kafka_protocol::protocol::StrBytes;
use madsim::rand::Rng;
use vfs::Vfs;
use vfs::durable::{Claim, ClaimToken};

use crate::actors::{Actor, FinalRead, Finale, Play, Role, Stage};
use crate::history::Event;
use crate::hosts::OBSERVER_HOST;
use crate::session::Session;

/// The two documents, as named on the volume.
pub const ACLS: &str = "acls";
pub const CREDENTIALS: &str = "credentials";

/// The admins' addresses.
pub const ACL_ADMIN_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 3, 5);
pub const CREDENTIAL_ADMIN_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 3, 6);

/// How long an admin waits for an answer (Kafka's `request.timeout.ms`).
const ADMIN_TIMEOUT: Duration = Duration::from_secs(30);

const PREFIX: &str = "marker-";

fn text(v: String) -> StrBytes {
    StrBytes::from_string(v)
}

fn marker_of(name: &str) -> Option<u64> {
    name.strip_prefix(PREFIX)?.parse().ok()
}

async fn add_acl(s: &mut Session, k: u64) -> Option<bool> {
    let creation = AclCreation::default()
        .with_resource_type(2) // TOPIC
        .with_resource_name(text(format!("{PREFIX}{k}")))
        .with_resource_pattern_type(3) // LITERAL
        .with_principal(text("User:marker".to_owned()))
        .with_host(text("*".to_owned()))
        .with_operation(3) // READ
        .with_permission_type(3); // ALLOW
    let req = CreateAclsRequest::default().with_creations(vec![creation]);
    let to = s.any_broker();
    match s
        .client
        .call_within(
            ADMIN_TIMEOUT,
            to,
            ApiKey::CreateAcls,
            3,
            RequestKind::CreateAcls(req),
        )
        .await
    {
        Ok(ResponseKind::CreateAcls(r)) => Some(r.results.iter().all(|r| r.error_code == 0)),
        _ => None,
    }
}

async fn add_user(s: &mut Session, k: u64) -> Option<bool> {
    crate::actors::logins::upsert_user(s, &format!("{PREFIX}{k}"), "marker", ADMIN_TIMEOUT).await
}

async fn add(s: &mut Session, doc: &'static str, k: u64) {
    let start = s.now();
    let answer = if doc == ACLS {
        add_acl(s, k).await
    } else {
        add_user(s, k).await
    };
    s.history.record(
        s.now(),
        Event::SecurityMarker {
            doc,
            marker: k,
            start,
            acked: answer == Some(true),
        },
    );
}

/// Adds markers to `doc` ([`ACLS`] or [`CREDENTIALS`]) until `until`, two
/// at a time through two connections (two admins at once, whose changes
/// race for the same next version).
pub async fn admin(mut s: Session, doc: &'static str, until: Duration) {
    let mut other = s.twin(&format!("{doc}-marker-twin"));
    let mut k = 0;
    while s.now() < until {
        tokio::join!(add(&mut s, doc, k + 1), add(&mut other, doc, k + 2));
        k += 2;
        let pause = madsim::rand::thread_rng().gen_range(500..2500);
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
}

/// The markers in the newest complete version of `doc` on the volume, read
/// after the run: the version and its markers (`None`: unreadable, or no
/// complete version).
pub async fn final_markers(volume: &dyn Vfs, doc: &'static str) -> Option<(u64, BTreeSet<u64>)> {
    let top = crate::actors::guard::newest_version(volume, doc).await?;
    let reader = ClaimToken::fresh("marker-checker");
    for n in (1..=top).rev() {
        match crate::actors::guard::read_version(volume, doc, n, &reader).await? {
            Claim::Lost { payload, .. } => return Some((n, markers(doc, &payload)?)),
            // Incomplete: never applied, and nobody's acknowledged change.
            Claim::Undecided(_) | Claim::Won => {}
        }
    }
    None
}

fn markers(doc: &str, payload: &[u8]) -> Option<BTreeSet<u64>> {
    if doc == ACLS {
        let set: broker::security::AclSet = serde_json::from_slice(payload).ok()?;
        Some(set.acls.iter().filter_map(|a| marker_of(&a.name)).collect())
    } else {
        let c: broker::security::Credentials = serde_json::from_slice(payload).ok()?;
        Some(c.users.keys().filter_map(|u| marker_of(u)).collect())
    }
}

/// The marker ACLs broker `to` has applied (DescribeAcls answers from the
/// set a broker applied, not from the volume); `None` without an answer.
async fn applied_acls(s: &mut Session, to: u32) -> Option<BTreeSet<u64>> {
    let req = DescribeAclsRequest::default()
        .with_resource_type_filter(2) // TOPIC
        .with_resource_name_filter(None)
        .with_pattern_type_filter(1) // ANY
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_operation(1) // ANY
        .with_permission_type(1); // ANY
    match s
        .client
        .call(to, ApiKey::DescribeAcls, 3, RequestKind::DescribeAcls(req))
        .await
    {
        Ok(ResponseKind::DescribeAcls(r)) if r.error_code == 0 => Some(
            r.resources
                .iter()
                .filter_map(|res| marker_of(&res.resource_name))
                .collect(),
        ),
        _ => None,
    }
}

/// Once the faults healed: asks every broker, once a second until each
/// holds every marker in `acked` or `deadline` passes, which marker ACLs it
/// applied, and records each broker's last answer (acl-unapplied).
pub async fn final_applied(mut s: Session, acked: BTreeSet<u64>, deadline: Duration) {
    let healed = s.now();
    let mut last: Vec<Option<BTreeSet<u64>>> = vec![None; s.brokers() as usize];
    let mut done = vec![false; last.len()];
    while done.iter().any(|d| !d) && s.now() < deadline {
        for b in 0..last.len() {
            if done[b] {
                continue;
            }
            if let Some(applied) = applied_acls(&mut s, b as u32).await {
                done[b] = acked.is_subset(&applied);
                last[b] = Some(applied);
                if done[b] {
                    s.history.record(
                        s.now(),
                        Event::AclsApplied {
                            broker: b as u32,
                            after_heal: s.now().saturating_sub(healed),
                            missing: Some(Vec::new()),
                        },
                    );
                }
            }
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    for (b, applied) in last.into_iter().enumerate() {
        if !done[b] {
            s.history.record(
                s.now(),
                Event::AclsApplied {
                    broker: b as u32,
                    after_heal: s.now().saturating_sub(healed),
                    missing: applied.map(|a| acked.difference(&a).copied().collect()),
                },
            );
        }
    }
}

/// Admins adding ACLs and users; every acknowledged one must be applied
/// by every broker once the faults healed, and be in the final documents.
pub struct Markers;
pub static MARKERS: Markers = Markers;

impl Actor for Markers {
    fn name(&self) -> &'static str {
        "markers"
    }

    fn roles(&self) -> Vec<Role> {
        vec![
            Role::operator("acl-marker-0", ACL_ADMIN_IP),
            Role::operator("credential-marker-0", CREDENTIAL_ADMIN_IP),
        ]
    }

    fn play(&self, role: &'static str, s: Session, stage: &Stage) -> Play {
        let doc = if role == "acl-marker-0" {
            ACLS
        } else {
            CREDENTIALS
        };
        Box::pin(admin(s, doc, stage.faults_end))
    }

    fn needs_authorizer(&self) -> bool {
        true
    }

    fn finale(&self, stage: &Stage, deadline: Duration) -> Vec<Finale> {
        let acked = stage
            .history
            .events()
            .into_iter()
            .filter_map(|(_, e)| match e {
                Event::SecurityMarker {
                    doc: ACLS,
                    marker,
                    acked: true,
                    ..
                } => Some(marker),
                _ => None,
            })
            .collect();
        let s = stage.session("final-acl-reader");
        vec![Finale {
            name: "final-acl-reader",
            ip: Ipv4Addr::new(10, 0, 2, 3),
            play: Box::pin(final_applied(s, acked, deadline)),
        }]
    }

    fn final_state(&self, stage: &Stage, _deadline: Duration) -> Vec<FinalRead> {
        [ACLS, CREDENTIALS]
            .into_iter()
            .map(|doc| {
                let volume = stage.volume(OBSERVER_HOST);
                Box::pin(async move {
                    let found = final_markers(volume.as_ref(), doc)
                        .await
                        .map(|(v, m)| (v, m.into_iter().collect()));
                    Event::SecurityMarkersFinal { doc, found }
                }) as FinalRead
            })
            .collect()
    }
}
