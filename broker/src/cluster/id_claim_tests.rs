use super::*;
use crate::cluster::heartbeat::Heartbeat;
use std::sync::Arc;
use vfs::OpenOptions;

const WAIT: Duration = Duration::from_secs(3);

async fn volume() -> Arc<dyn Vfs> {
    let vfs: Arc<dyn Vfs> = Arc::new(vfs::MemVfs::new());
    crate::node::prepare_volume(vfs.as_ref()).await.unwrap();
    vfs
}

fn hb(sequence: u64) -> Heartbeat {
    Heartbeat {
        broker_id: 1,
        incarnation: 0xfeed,
        sequence,
        advertised: "kaas-1.kaas:9092".into(),
        endpoints: Default::default(),
        leaving: false,
        stuck: Vec::new(),
        claimed_past: Vec::new(),
        offline: Vec::new(),
        created: Vec::new(),
    }
}

fn token(label: &str) -> ClaimToken {
    ClaimToken::fresh(label)
}

#[test]
fn claim_names_parse_only_for_their_broker() {
    assert_eq!(parse_slot(1, "1.claim-0000000007"), Some(7));
    assert_eq!(parse_slot(1, "11.claim-0000000007"), None);
    assert_eq!(parse_slot(1, "1.claim-7"), None);
    assert_eq!(parse_slot(1, "1"), None);
    assert!(is_claim_name("11.claim-0000000007"));
    assert!(!is_claim_name(".1.tmp-00ff"));
    assert!(!is_claim_name("1"));
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_restart_claims_the_next_slot_and_supersedes_the_last() {
    let vfs = volume().await;
    let first = claim_id(vfs.as_ref(), 1, WAIT, &token("first"))
        .await
        .unwrap();
    assert_eq!(first.slot, 0);
    assert_eq!(superseded_by(vfs.as_ref(), &first).await.unwrap(), None);
    // The first process stopped: its heartbeat stays still.
    heartbeat::write(vfs.as_ref(), &hb(7)).await.unwrap();
    let second = claim_id(vfs.as_ref(), 1, WAIT, &token("second"))
        .await
        .unwrap();
    assert_eq!(second.slot, 1);
    let by = superseded_by(vfs.as_ref(), &first).await.unwrap().unwrap();
    assert!(by.starts_with("second#"), "{by}");
    assert_eq!(superseded_by(vfs.as_ref(), &second).await.unwrap(), None);
    // Another broker id has slots of its own.
    let other = claim_id(vfs.as_ref(), 11, WAIT, &token("eleven"))
        .await
        .unwrap();
    assert_eq!(other.slot, 0);
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_redriven_claim_finds_its_own_win() {
    let vfs = volume().await;
    let me = token("me");
    let won = claim_id(vfs.as_ref(), 1, WAIT, &me).await.unwrap();
    let again = claim_id(vfs.as_ref(), 1, WAIT, &me).await.unwrap();
    assert_eq!(again.slot, won.slot);
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn of_two_processes_started_together_exactly_one_runs() {
    for round in 0..50u64 {
        let vfs = volume().await;
        // Every second round the id ran before (a claim and a still
        // heartbeat), so both starters wait before they claim.
        if round % 2 == 1 {
            claim_id(vfs.as_ref(), 1, WAIT, &token("before"))
                .await
                .unwrap();
            heartbeat::write(vfs.as_ref(), &hb(3)).await.unwrap();
        }
        // A process that wins heartbeats from then on, as a broker does.
        let start = |label: &'static str, incarnation: u64| {
            let vfs = vfs.clone();
            tokio::spawn(async move {
                // Stagger the two by up to a few milliseconds.
                tokio::time::sleep(Duration::from_micros(round * 97 % 5000)).await;
                let won = claim_id(vfs.as_ref(), 1, WAIT, &token(label)).await;
                let beating = won.is_ok().then(|| {
                    let vfs = vfs.clone();
                    tokio::spawn(async move {
                        for sequence in 0.. {
                            let beat = Heartbeat {
                                incarnation,
                                ..hb(sequence)
                            };
                            heartbeat::write(vfs.as_ref(), &beat).await.unwrap();
                            tokio::time::sleep(Duration::from_secs(1)).await;
                        }
                    })
                });
                (won, beating)
            })
        };
        let (a, b) = (start("a", 0xa), start("b", 0xb));
        let (a, b) = (a.await.unwrap(), b.await.unwrap());
        for beating in [&a.1, &b.1].into_iter().flatten() {
            beating.abort();
        }
        let outcomes = [a.0, b.0];
        let won: Vec<_> = outcomes.iter().filter_map(|o| o.as_ref().ok()).collect();
        assert_eq!(won.len(), 1, "round {round}: {outcomes:?}");
        let refused = outcomes.iter().find_map(|o| o.as_ref().err()).unwrap();
        assert_eq!(refused.kind(), io::ErrorKind::AddrInUse, "{refused}");
        assert!(
            refused.to_string().contains("broker id 1 is already taken"),
            "{refused}"
        );
    }
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn a_live_heartbeat_refuses_the_newcomer() {
    let vfs = volume().await;
    claim_id(vfs.as_ref(), 1, WAIT, &token("live"))
        .await
        .unwrap();
    heartbeat::write(vfs.as_ref(), &hb(7)).await.unwrap();
    let beating = {
        let vfs = vfs.clone();
        tokio::spawn(async move {
            for s in 8..20 {
                tokio::time::sleep(Duration::from_secs(1)).await;
                heartbeat::write(vfs.as_ref(), &hb(s)).await.unwrap();
            }
        })
    };
    let err = claim_id(vfs.as_ref(), 1, WAIT, &token("late"))
        .await
        .unwrap_err();
    assert_eq!(err.kind(), io::ErrorKind::AddrInUse);
    assert!(err.to_string().contains("kaas-1.kaas:9092"), "{err}");
    beating.abort();
}

/// A claimant that crashed between its exclusive create and filling the
/// slot leaves it undecided for good: the next start looks past it.
#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn an_abandoned_half_made_slot_is_looked_past() {
    let vfs = volume().await;
    let first = claim_id(vfs.as_ref(), 1, WAIT, &token("first"))
        .await
        .unwrap();
    let half = vfs
        .open(&slot_path(1, 1), OpenOptions::create_new())
        .await
        .unwrap();
    half.close().await.unwrap();
    assert_eq!(superseded_by(vfs.as_ref(), &first).await.unwrap(), None);
    let next = claim_id(vfs.as_ref(), 1, WAIT, &token("next"))
        .await
        .unwrap();
    assert_eq!(next.slot, 2);
    assert!(superseded_by(vfs.as_ref(), &first).await.unwrap().is_some());
}

#[cfg_attr(not(madsim), tokio::test(start_paused = true))]
#[cfg_attr(madsim, tokio::test)]
async fn old_slots_are_swept_but_recent_ones_stay() {
    let vfs = volume().await;
    let mut last = None;
    for i in 0..(KEEP + 5) {
        last = Some(
            claim_id(vfs.as_ref(), 1, WAIT, &token(&format!("run-{i}")))
                .await
                .unwrap(),
        );
    }
    let last = last.unwrap();
    let slots = listed_slots(vfs.as_ref(), 1).await.unwrap();
    assert_eq!(slots.first().copied(), Some(last.slot - KEEP));
    assert_eq!(slots.last().copied(), Some(last.slot));
}
