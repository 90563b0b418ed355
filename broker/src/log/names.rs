//! Topic names, claimed in generations so that a claim that never got its
//! content cannot block a name forever, and released by a generation of its
//! own, so that no generation is ever removed or reused.
//!
//! `topics/names/<name>@<g>` are verified exclusive creates, made in order
//! (`g` only after `g - 1` exists). An exclusive create on NFS can leave a
//! slot empty for good (the creator's reply was lost and it never wrote, or
//! it crashed or got EIO before writing), and nobody can tell that from a
//! creator still writing. So a creator that finds generation `g` undecided
//! moves on to `g+1`, and two rules keep one owner:
//! - the creator of `g+1` looks back after creating `g+1` and before
//!   writing it: if a generation below has a complete claim by then (the
//!   newest such one, past any void ones), it leaves `g+1` empty;
//! - the writer of `g` counts as owner only if, after its content is on
//!   the volume, `g+1` does not exist.
//!
//! Whichever of the two looks second sees the other, so at most one wins.
//! Readers take the newest generation with a complete claim.
//!
//! A release is a claim like any other, whose content says "released" (and
//! which topic it released): it is written only while that topic holds the
//! name, and a reader that finds it newest sees the name free. Releases
//! used to remove the generations instead; the names then came back, and a
//! second releaser of the same holder removed the fresh claim of a creator
//! that had seen the name free, so that two creators won it (found by the
//! simulator: two topics named `events`, acknowledged records lost).
//! Generations accumulate, one per create and one per delete, which costs a
//! few dozen bytes each; the newest is found by doubling and bisecting.

use std::collections::BTreeMap;
use std::io;
use std::path::PathBuf;

use vfs::Vfs;
use vfs::durable::{Claim, ClaimToken, create_slot, fill_slot, read_claim};

/// Generations tried, from the newest, before a claim or a release gives up
/// (the client retries).
const MAX_TRIES: u32 = 64;

/// What a release generation holds, followed by the id it released.
const RELEASED: &str = "released:";

fn path(name: &str, generation: u32) -> PathBuf {
    crate::layout::name_claim(name, generation)
}

/// The outcome of [`claim_name`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum NameClaim {
    Won,
    /// Held for this topic id.
    Taken(String),
}

/// What one generation holds, by a fresh read.
enum Slot {
    Missing,
    Undecided,
    Held { by_us: bool, id: String },
    Released { by_us: bool },
}

async fn slot(vfs: &dyn Vfs, name: &str, g: u32, token: &ClaimToken) -> io::Result<Slot> {
    let (by_us, payload) = match read_claim(vfs, &path(name, g), token).await {
        Ok(Claim::Won) => (true, None),
        Ok(Claim::Lost { payload, .. }) => (false, Some(payload)),
        Ok(Claim::Undecided(_)) => return Ok(Slot::Undecided),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Slot::Missing),
        Err(e) => return Err(e),
    };
    // A token's own claim does not carry its payload back; the token tells
    // what it wrote (releases use tokens of their own).
    let released = match &payload {
        Some(p) => p.starts_with(RELEASED.as_bytes()),
        None => token.as_bytes().starts_with(RELEASE_LABEL.as_bytes()),
    };
    Ok(if released {
        Slot::Released { by_us }
    } else {
        Slot::Held {
            by_us,
            id: payload.map_or_else(String::new, |p| String::from_utf8_lossy(&p).into_owned()),
        }
    })
}

/// The label of a releaser's token: its own generations read back as
/// releases.
const RELEASE_LABEL: &str = "release-name";

async fn exists(vfs: &dyn Vfs, name: &str, g: u32) -> io::Result<bool> {
    vfs::exists_now(vfs, &path(name, g)).await
}

/// The newest generation of `name` (0: none). Generations exist from 1 up
/// to the newest without gaps, so existence can be bisected.
async fn newest(vfs: &dyn Vfs, name: &str) -> io::Result<u32> {
    if !exists(vfs, name, 1).await? {
        return Ok(0);
    }
    newest_from(vfs, name, 1).await
}

/// [`newest`] when generation `lo` is known to exist.
async fn newest_from(vfs: &dyn Vfs, name: &str, mut lo: u32) -> io::Result<u32> {
    let mut hi = lo.checked_mul(2).ok_or_else(|| too_many(name))?;
    while exists(vfs, name, hi).await? {
        lo = hi;
        hi = hi.checked_mul(2).ok_or_else(|| too_many(name))?;
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if exists(vfs, name, mid).await? {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}

fn too_many(name: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("topic name {name:?}: too many generations"),
    )
}

/// The newest complete generation at or below `g`: what a reader takes.
async fn newest_complete(
    vfs: &dyn Vfs,
    name: &str,
    g: u32,
    token: &ClaimToken,
) -> io::Result<Option<Slot>> {
    for e in (1..=g).rev() {
        match slot(vfs, name, e, token).await? {
            Slot::Missing | Slot::Undecided => {}
            complete => return Ok(Some(complete)),
        }
    }
    Ok(None)
}

/// Claims `name` for topic `id`.
pub(crate) async fn claim_name(
    vfs: &dyn Vfs,
    name: &str,
    id: &str,
    token: &ClaimToken,
) -> io::Result<NameClaim> {
    let mut g = newest(vfs, name).await?.max(1);
    for _ in 0..MAX_TRIES {
        if let Some(file) = create_slot(vfs, &path(name, g)).await? {
            // Who a reader would take as the holder if `g` stayed empty.
            // Looking only at `g - 1` is not enough: a creator of `g - 1`
            // that found `g - 2` complete left `g - 1` empty, and `g - 2`'s
            // writer may have won (it saw no `g - 1` yet).
            if let Some(Slot::Held { by_us: false, id }) =
                newest_complete(vfs, name, g - 1, token).await?
            {
                // An earlier generation got its owner after all; this one
                // stays empty and void.
                let _ = file.close().await;
                return Ok(NameClaim::Taken(id));
            }
            fill_slot(file, token, id.as_bytes()).await?;
        }
        match slot(vfs, name, g, token).await? {
            Slot::Held { by_us: true, .. } if !exists(vfs, name, g + 1).await? => {
                return Ok(NameClaim::Won);
            }
            Slot::Held { by_us: false, id } if !exists(vfs, name, g + 1).await? => {
                return Ok(NameClaim::Taken(id));
            }
            // A successor exists, nobody completed this one, or it is a
            // release (the name is free past it): the next generation decides.
            _ => {}
        }
        g += 1;
    }
    Err(io::Error::new(
        io::ErrorKind::WouldBlock,
        format!("topic name {name:?}: no generation decided in {MAX_TRIES} tries"),
    ))
}

/// The topic id holding `name`: the newest generation with a complete
/// claim, unless that is a release.
pub async fn holder(vfs: &dyn Vfs, name: &str) -> io::Result<Option<String>> {
    let nobody = ClaimToken::fresh("reader");
    // Every lookup of a topic by name comes here (each fetch and metadata
    // request): the first generation is read, not only probed, so that a
    // name claimed once costs two opens.
    let first = slot(vfs, name, 1, &nobody).await?;
    if matches!(first, Slot::Missing) {
        return Ok(None);
    }
    let newest = match newest_from(vfs, name, 1).await? {
        1 => Some(first),
        g => newest_complete(vfs, name, g, &nobody).await?,
    };
    Ok(match newest {
        Some(Slot::Held { id, .. }) => Some(id),
        _ => None,
    })
}

/// Makes `name`'s claim by topic `id` durable, if `id` holds the name:
/// true then. Its creator may have crashed between writing the claim and
/// fsyncing it, and a server restart would then take the name from a
/// topic that clients already write to (found by the simulator: `events`
/// resolved to its topic for a while, then to nothing). The controller runs
/// this before it gives a new topic leaders, so no write is acknowledged to
/// a topic whose name could vanish.
pub async fn confirm(
    vfs: &dyn Vfs,
    name: &str,
    id: &str,
    holders: &mut Holders,
) -> io::Result<bool> {
    let decided = match holders.0.get(name) {
        Some(d) => d.clone(),
        None => {
            let d = newest_holder(vfs, name).await?;
            holders.0.insert(name.to_owned(), d.clone());
            d
        }
    };
    match decided {
        Some((g, have)) if have == id => vfs::durable::make_durable(vfs, &path(name, g)).await,
        _ => Ok(false),
    }
}

/// Who holds each name, as [`confirm`] found it for one listing of the
/// topics: the topics left by creators that died may share a name, whose
/// undecided generations (an EIO storm leaves dozens) would otherwise be
/// walked again for each of them, every one a few round trips to the
/// volume (seed 224: a controller's tick took 25 s, and new topics waited
/// that long for leaders).
#[derive(Default)]
pub struct Holders(BTreeMap<String, Option<(u32, String)>>);

/// The newest complete generation of `name` and the topic it names, by
/// fresh reads; `None` when nobody holds the name.
async fn newest_holder(vfs: &dyn Vfs, name: &str) -> io::Result<Option<(u32, String)>> {
    let nobody = ClaimToken::fresh("reader");
    let g = newest(vfs, name).await?;
    for e in (1..=g).rev() {
        match slot(vfs, name, e, &nobody).await? {
            Slot::Missing | Slot::Undecided => {}
            Slot::Held { id, .. } => return Ok(Some((e, id))),
            Slot::Released { .. } => return Ok(None),
        }
    }
    Ok(None)
}

/// Releases `name` if topic `id` holds it: true once nobody holds it
/// (released now, or earlier by anyone), false when another topic does.
/// Idempotent, and safe to run by several brokers at once: the release is
/// a generation of its own, written only while `id` is the holder.
pub async fn release(vfs: &dyn Vfs, name: &str, id: &str) -> io::Result<bool> {
    let token = ClaimToken::fresh(RELEASE_LABEL);
    let mut g = newest(vfs, name).await?;
    match newest_complete(vfs, name, g, &token).await? {
        Some(Slot::Held { id: have, .. }) if have == id => {}
        Some(Slot::Held { .. }) => return Ok(false),
        _ => return Ok(true),
    }
    g += 1;
    for _ in 0..MAX_TRIES {
        if let Some(file) = create_slot(vfs, &path(name, g)).await? {
            match newest_complete(vfs, name, g - 1, &token).await? {
                Some(Slot::Held { id: have, .. }) if have == id => {}
                Some(Slot::Released { by_us: true }) => {}
                Some(Slot::Held { .. }) => {
                    let _ = file.close().await;
                    return Ok(false);
                }
                _ => {
                    let _ = file.close().await;
                    return Ok(true);
                }
            }
            fill_slot(file, &token, format!("{RELEASED}{id}").as_bytes()).await?;
        }
        match slot(vfs, name, g, &token).await? {
            Slot::Released { .. } if !exists(vfs, name, g + 1).await? => return Ok(true),
            // Someone else's claim came first: they hold the name now.
            Slot::Held { .. } if !exists(vfs, name, g + 1).await? => return Ok(false),
            _ => {}
        }
        g += 1;
    }
    Err(io::Error::new(
        io::ErrorKind::WouldBlock,
        format!("topic name {name:?}: release not decided in {MAX_TRIES} tries"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use vfs::OpenOptions;

    async fn volume() -> vfs::MemVfs {
        let v = vfs::MemVfs::new();
        v.mkdir(Path::new("topics")).await.unwrap();
        v.mkdir(Path::new(crate::layout::NAMES_DIR)).await.unwrap();
        v
    }

    #[tokio::test]
    async fn an_empty_generation_does_not_block_the_name() {
        let v = volume().await;
        // A creator whose reply was lost never wrote its slot.
        v.open(&path("orders", 1), OpenOptions::create_new())
            .await
            .unwrap();
        let a = ClaimToken::fresh("a");
        assert_eq!(
            claim_name(&v, "orders", "id-a", &a).await.unwrap(),
            NameClaim::Won
        );
        assert_eq!(holder(&v, "orders").await.unwrap().as_deref(), Some("id-a"));
        let b = ClaimToken::fresh("b");
        assert_eq!(
            claim_name(&v, "orders", "id-b", &b).await.unwrap(),
            NameClaim::Taken("id-a".into())
        );
        assert!(!release(&v, "orders", "id-b").await.unwrap());
        assert!(release(&v, "orders", "id-a").await.unwrap());
        assert_eq!(holder(&v, "orders").await.unwrap(), None);
        assert_eq!(
            claim_name(&v, "orders", "id-b", &b).await.unwrap(),
            NameClaim::Won
        );
    }

    #[tokio::test]
    async fn a_void_generation_does_not_hide_the_owner_before_it() {
        let v = volume().await;
        // `a` filled generation 1 and saw no generation 2: it won. Then a
        // rival that had found generation 1 undecided created generation 2,
        // saw `a`'s claim and left it empty.
        let a = ClaimToken::fresh("a");
        let slot1 = create_slot(&v, &path("orders", 1)).await.unwrap().unwrap();
        fill_slot(slot1, &a, b"id-a").await.unwrap();
        assert!(!exists(&v, "orders", 2).await.unwrap());
        drop(create_slot(&v, &path("orders", 2)).await.unwrap().unwrap());
        // A third creator passes the void generation 2; it must not take
        // the name from `a`.
        let c = ClaimToken::fresh("c");
        assert_eq!(
            claim_name(&v, "orders", "id-c", &c).await.unwrap(),
            NameClaim::Taken("id-a".into())
        );
        assert_eq!(holder(&v, "orders").await.unwrap().as_deref(), Some("id-a"));
    }

    #[tokio::test]
    async fn a_late_writer_of_a_generation_keeps_the_name_its_readers_see() {
        let v = volume().await;
        // Generation 1 was completed by its creator after a second creator
        // had already created generation 2 (and then, finding generation 1
        // complete, left it empty).
        let a = ClaimToken::fresh("a");
        let slot1 = create_slot(&v, &path("orders", 1)).await.unwrap().unwrap();
        let slot2 = create_slot(&v, &path("orders", 2)).await.unwrap().unwrap();
        fill_slot(slot1, &a, b"id-a").await.unwrap();
        drop(slot2);
        // `a` sees generation 2 and cannot count itself owner yet...
        assert!(matches!(
            slot(&v, "orders", 1, &a).await.unwrap(),
            Slot::Held { by_us: true, .. }
        ));
        assert!(exists(&v, "orders", 2).await.unwrap());
        // ...but readers see `a` (the newest complete generation), so a
        // newcomer going past the void generation 2 must not take the name...
        let c = ClaimToken::fresh("c");
        assert_eq!(
            claim_name(&v, "orders", "id-c", &c).await.unwrap(),
            NameClaim::Taken("id-a".into())
        );
        // ...and `a`, going on past the void generations, confirms its hold.
        assert_eq!(
            claim_name(&v, "orders", "id-a", &a).await.unwrap(),
            NameClaim::Won
        );
        assert_eq!(holder(&v, "orders").await.unwrap().as_deref(), Some("id-a"));
    }

    #[tokio::test]
    async fn a_late_second_release_of_the_same_holder_leaves_the_new_owner_alone() {
        let v = volume().await;
        let a = ClaimToken::fresh("a");
        assert_eq!(
            claim_name(&v, "orders", "id-a", &a).await.unwrap(),
            NameClaim::Won
        );
        // Two brokers found `id-a` deleted; the first releases the name and
        // a creator takes it at once.
        assert!(release(&v, "orders", "id-a").await.unwrap());
        assert_eq!(holder(&v, "orders").await.unwrap(), None);
        let c = ClaimToken::fresh("c");
        assert_eq!(
            claim_name(&v, "orders", "id-c", &c).await.unwrap(),
            NameClaim::Won
        );
        // The second releaser comes late: it must not take the name from `c`
        // (a removal of the generations used to), and nobody else wins it.
        assert!(!release(&v, "orders", "id-a").await.unwrap());
        assert_eq!(holder(&v, "orders").await.unwrap().as_deref(), Some("id-c"));
        let d = ClaimToken::fresh("d");
        assert_eq!(
            claim_name(&v, "orders", "id-d", &d).await.unwrap(),
            NameClaim::Taken("id-c".into())
        );
    }

    #[tokio::test]
    async fn a_name_survives_hundreds_of_deletes_and_recreates() {
        let v = volume().await;
        for round in 0..300 {
            let id = format!("id-{round}");
            let t = ClaimToken::fresh(&id);
            assert_eq!(
                claim_name(&v, "churn", &id, &t).await.unwrap(),
                NameClaim::Won,
                "{round}"
            );
            assert_eq!(
                holder(&v, "churn").await.unwrap().as_deref(),
                Some(id.as_str())
            );
            assert!(release(&v, "churn", &id).await.unwrap());
            assert_eq!(holder(&v, "churn").await.unwrap(), None);
        }
        assert_eq!(newest(&v, "churn").await.unwrap(), 600);
    }

    #[tokio::test]
    async fn a_release_racing_another_release_and_a_new_claim_takes_nothing() {
        let v = std::sync::Arc::new(volume().await);
        let a = ClaimToken::fresh("a");
        assert_eq!(
            claim_name(v.as_ref(), "orders", "id-a", &a).await.unwrap(),
            NameClaim::Won
        );
        // This releaser has seen `id-a` as the holder; just before it writes
        // its first generation, another broker releases the name and a
        // creator claims it.
        let racing = vfs::testkit::BeforeOpen::new(
            v.clone(),
            path("orders", 2),
            |v: std::sync::Arc<dyn Vfs>| async move {
                assert!(release(v.as_ref(), "orders", "id-a").await?);
                let c = ClaimToken::fresh("c");
                assert_eq!(
                    claim_name(v.as_ref(), "orders", "id-c", &c).await?,
                    NameClaim::Won
                );
                Ok(())
            },
        );
        assert!(!release(&racing, "orders", "id-a").await.unwrap());
        assert!(racing.fired());
        assert_eq!(
            holder(v.as_ref(), "orders").await.unwrap().as_deref(),
            Some("id-c")
        );
    }

    #[tokio::test]
    async fn looking_up_a_name_claimed_once_costs_two_opens() {
        let inner: std::sync::Arc<dyn Vfs> = std::sync::Arc::new(volume().await);
        let a = ClaimToken::fresh("a");
        assert_eq!(
            claim_name(inner.as_ref(), "orders", "id-a", &a)
                .await
                .unwrap(),
            NameClaim::Won
        );
        let counting = vfs::testkit::Counting::new(inner);
        assert_eq!(
            holder(&counting, "orders").await.unwrap().as_deref(),
            Some("id-a")
        );
        assert_eq!(counting.counts.get(&counting.counts.opens), 2);
    }

    /// A name claim whose creator crashed after writing it and before
    /// fsyncing it: other hosts see it (its pages reached the server), and
    /// a server restart takes it back unless a reader confirmed it.
    #[cfg_attr(not(madsim), tokio::test(start_paused = true))]
    #[cfg_attr(madsim, tokio::test)]
    async fn a_confirmed_name_survives_its_creators_crash_and_a_server_restart() {
        use vfs::model::{Faults, ModelNfs, NfsConfig};
        for confirmed in [false, true] {
            let config = NfsConfig {
                faults: Faults {
                    crash_landed_probability: 1.0,
                    ..Faults::default()
                },
                ..NfsConfig::default()
            };
            let nfs = ModelNfs::new(config, 1);
            let (creator, reader) = (nfs.host(1), nfs.host(2));
            for dir in ["topics", crate::layout::NAMES_DIR] {
                reader.mkdir(Path::new(dir)).await.unwrap();
            }
            // The bytes a claim of "events" for topic id-a holds, made
            // durably under another name, then written as the creator's
            // claim without an fsync.
            let scratch = path("scratch", 1);
            let token = ClaimToken::fresh("id-a");
            vfs::durable::claim(&reader, &scratch, &token, b"id-a")
                .await
                .unwrap();
            let bytes = vfs::read_file(&reader, &scratch).await.unwrap();
            let file = creator
                .open(&path("events", 1), OpenOptions::create_new())
                .await
                .unwrap();
            file.write_at(0, bytes::Bytes::from(bytes)).await.unwrap();
            nfs.crash_host(1);
            assert_eq!(
                holder(&reader, "events").await.unwrap().as_deref(),
                Some("id-a")
            );
            if confirmed {
                let mut holders = Holders::default();
                assert!(
                    confirm(&reader, "events", "id-a", &mut holders)
                        .await
                        .unwrap()
                );
                assert!(
                    !confirm(&reader, "events", "id-b", &mut holders)
                        .await
                        .unwrap()
                );
            }
            nfs.restart_server();
            let after = holder(&reader, "events").await.unwrap();
            if confirmed {
                assert_eq!(after.as_deref(), Some("id-a"));
            } else {
                assert_eq!(
                    after, None,
                    "the unconfirmed claim is gone: why confirm exists"
                );
            }
        }
    }
}
