//! Topic names, claimed in generations so that a claim that never got its
//! content cannot block a name forever.
//!
//! `topics/names/<name>@<g>` are verified exclusive creates. An exclusive
//! create on NFS can leave a slot empty for good (the creator's reply was
//! lost and it never wrote, or it crashed or got EIO before writing), and
//! nobody can tell that from a creator still writing. So a creator that
//! finds generation `g` undecided moves on to `g+1`, and two rules keep one
//! owner:
//! - the creator of `g+1` looks back after creating `g+1` and before
//!   writing it: if a generation below has a complete claim by then (the
//!   newest such one, past any void ones), it leaves `g+1` empty;
//! - the writer of `g` counts as owner only if, after its content is on
//!   the volume, `g+1` does not exist.
//!
//! Whichever of the two looks second sees the other, so at most one wins.
//! Readers take the newest generation with a complete claim.

use std::io;
use std::path::PathBuf;

use vfs::Vfs;
use vfs::durable::{Claim, ClaimToken, converge_remove, create_slot, fill_slot, read_claim};

/// Generations tried before a create gives up (the client retries).
const MAX_GENERATIONS: u32 = 64;

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
}

async fn slot(vfs: &dyn Vfs, name: &str, g: u32, token: &ClaimToken) -> io::Result<Slot> {
    match read_claim(vfs, &path(name, g), token).await {
        Ok(Claim::Won) => Ok(Slot::Held {
            by_us: true,
            id: String::new(),
        }),
        Ok(Claim::Lost { payload, .. }) => Ok(Slot::Held {
            by_us: false,
            id: String::from_utf8_lossy(&payload).into_owned(),
        }),
        Ok(Claim::Undecided(_)) => Ok(Slot::Undecided),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(Slot::Missing),
        Err(e) => Err(e),
    }
}

async fn exists(vfs: &dyn Vfs, name: &str, g: u32) -> io::Result<bool> {
    vfs::exists_now(vfs, &path(name, g)).await
}

/// Claims `name` for topic `id`.
pub(crate) async fn claim_name(
    vfs: &dyn Vfs,
    name: &str,
    id: &str,
    token: &ClaimToken,
) -> io::Result<NameClaim> {
    for g in 1..=MAX_GENERATIONS {
        if let Some(file) = create_slot(vfs, &path(name, g)).await? {
            if let Some(holder) = earlier_holder(vfs, name, g, token).await? {
                // An earlier generation got its owner after all; this one
                // stays empty and void.
                let _ = file.close().await;
                return Ok(NameClaim::Taken(holder));
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
            // A successor exists, or nobody completed this one: the next
            // generation decides.
            _ => {}
        }
    }
    Err(io::Error::new(
        io::ErrorKind::WouldBlock,
        format!("topic name {name:?}: no generation decided in {MAX_GENERATIONS} tries"),
    ))
}

/// Who a reader would take as the holder if generation `g` stayed empty:
/// the newest complete generation below it, unless that is this claimant's
/// own (then filling `g` changes no reader's answer).
///
/// Looking only at `g - 1` is not enough: a creator of `g - 1` that found
/// `g - 2` complete left `g - 1` empty, and `g - 2`'s writer may have won
/// (it saw no `g - 1` yet). A void generation hides nothing.
async fn earlier_holder(
    vfs: &dyn Vfs,
    name: &str,
    g: u32,
    token: &ClaimToken,
) -> io::Result<Option<String>> {
    for earlier in (1..g).rev() {
        match slot(vfs, name, earlier, token).await? {
            Slot::Held { by_us: true, .. } => return Ok(None),
            Slot::Held { by_us: false, id } => return Ok(Some(id)),
            Slot::Undecided | Slot::Missing => {}
        }
    }
    Ok(None)
}

/// The topic id holding `name`: the newest generation with a complete
/// claim. Generations are created in order, so the walk stops at the first
/// missing one.
pub async fn holder(vfs: &dyn Vfs, name: &str) -> io::Result<Option<String>> {
    let nobody = ClaimToken::fresh("reader");
    let mut found = None;
    for g in 1..=MAX_GENERATIONS + 1 {
        match slot(vfs, name, g, &nobody).await? {
            Slot::Missing => break,
            Slot::Undecided => {}
            Slot::Held { id, .. } => found = Some(id),
        }
    }
    Ok(found)
}

/// Releases `name` (all its generations) if `id` holds it, or whoever
/// does when `id` is `None`. Idempotent: a partial release is completed by
/// calling again; what is left is ignored by [`holder`] only once all of it
/// is gone, so the release goes from the newest generation down.
pub async fn release(vfs: &dyn Vfs, name: &str, id: Option<&str>) -> io::Result<bool> {
    let current = holder(vfs, name).await?;
    if let (Some(want), Some(have)) = (id, current.as_deref()) {
        if want != have {
            return Ok(false);
        }
    }
    let mut last = 0;
    while last < MAX_GENERATIONS + 1 && exists(vfs, name, last + 1).await? {
        last += 1;
    }
    for g in (1..=last).rev() {
        converge_remove(vfs, &path(name, g)).await?;
    }
    Ok(true)
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
        assert!(!release(&v, "orders", Some("id-b")).await.unwrap());
        assert!(release(&v, "orders", Some("id-a")).await.unwrap());
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
}
