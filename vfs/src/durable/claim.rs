//! Verified exclusive create: deciding one winner through the volume.

use std::io;
use std::path::Path;

use bytes::{BufMut, Bytes, BytesMut};

use super::envelope::{EnvelopeError, open_envelope, seal};
use super::names::nonce;
use crate::{OpenOptions, Vfs, read_file};

const KIND: &str = "claim";

/// Who is claiming: a label (for people reading the volume) and a random
/// nonce that makes this claimant unique. Re-driving a claim with the same
/// token recognises an earlier win of that token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimToken {
    bytes: Bytes,
}

impl ClaimToken {
    pub fn fresh(label: &str) -> Self {
        let mut b = BytesMut::with_capacity(label.len() + 17);
        b.put_slice(label.as_bytes());
        b.put_slice(format!("#{:016x}", nonce()).as_bytes());
        Self { bytes: b.freeze() }
    }

    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// The outcome of [`claim`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// This token holds the slot, confirmed by a fresh read.
    Won,
    /// Another token holds the slot; here is its token and payload.
    Lost { holder: Bytes, payload: Bytes },
    /// The slot exists but holds no complete claim: its winner is still
    /// writing, crashed after creating it, or is this caller whose create
    /// succeeded but whose reply was lost (NFS then answers `AlreadyExists`
    /// to the winner, and content alone cannot tell those cases apart). No one
    /// may act as holder; callers retry later and, if it stays undecided, move
    /// on to the next slot (the next epoch, the next id block). A claimant
    /// that later completes such a slot loses nothing: a newer epoch outranks it.
    Undecided(EnvelopeError),
}

/// Claims `slot` by exclusive create, writing `token` and `payload` into it,
/// then reads the slot back by path to learn who really holds it.
pub async fn claim(
    vfs: &dyn Vfs,
    slot: &Path,
    token: &ClaimToken,
    payload: &[u8],
) -> io::Result<Claim> {
    Ok(claim_noting_creation(vfs, slot, token, payload).await?.0)
}

/// [`claim`], and whether this call created the slot: a `Won` slot this
/// call did not create was filled by an earlier call with the same token.
pub async fn claim_noting_creation(
    vfs: &dyn Vfs,
    slot: &Path,
    token: &ClaimToken,
    payload: &[u8],
) -> io::Result<(Claim, bool)> {
    let created = match create_slot(vfs, slot).await? {
        Some(file) => {
            crate::fault_point!(vfs, "claim.slot-created");
            fill_slot(file, token, payload).await?;
            crate::fault_point!(vfs, "claim.slot-filled");
            true
        }
        None => false,
    };
    Ok((read_claim(vfs, slot, token).await?, created))
}

/// The first half of [`claim`]: the exclusive create. `None` if the slot
/// already exists (or this create's reply was lost). For protocols that
/// must look at something between creating a slot and filling it.
pub async fn create_slot(
    vfs: &dyn Vfs,
    slot: &Path,
) -> io::Result<Option<Box<dyn crate::VfsFile>>> {
    match vfs.open(slot, OpenOptions::create_new()).await {
        Ok(file) => Ok(Some(file)),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(None),
        Err(e) => Err(e),
    }
}

/// The second half of [`claim`]: writes `token` and `payload` into a slot
/// this caller created, durably, and closes it.
pub async fn fill_slot(
    file: Box<dyn crate::VfsFile>,
    token: &ClaimToken,
    payload: &[u8],
) -> io::Result<()> {
    let mut body = BytesMut::with_capacity(4 + token.bytes.len() + payload.len());
    body.put_u32(token.bytes.len() as u32);
    body.put_slice(&token.bytes);
    body.put_slice(payload);
    let sealed = seal(KIND, &body);
    let written = async {
        file.write_at(0, sealed).await?;
        file.fsync().await
    }
    .await;
    let closed = file.close().await;
    written.and(closed)
}

/// Makes the complete claim in `slot` durable, whoever reads it. Its writer
/// may have crashed between writing and fsyncing it: other hosts see the
/// claim once the data reaches the server, and a server restart before any
/// COMMIT takes it back, after readers acted on it. Writing the same bytes
/// again and fsyncing commits them. `false`, and nothing written, when the
/// slot holds no complete claim.
pub async fn make_durable(vfs: &dyn Vfs, slot: &Path) -> io::Result<bool> {
    let data = read_file(vfs, slot).await?;
    if open_envelope(KIND, &data).is_err() {
        return Ok(false);
    }
    let file = vfs.open(slot, OpenOptions::write()).await?;
    let written = async {
        file.write_at(0, Bytes::from(data)).await?;
        file.fsync().await
    }
    .await;
    let closed = file.close().await;
    written.and(closed)?;
    Ok(true)
}

/// Reads who holds `slot`, from the point of view of `token`.
pub async fn read_claim(vfs: &dyn Vfs, slot: &Path, token: &ClaimToken) -> io::Result<Claim> {
    let data = read_file(vfs, slot).await?;
    let body = match open_envelope(KIND, &data) {
        Ok(body) => body,
        // Partial write-back shows another host a prefix or holes of zeros.
        Err(
            e @ (EnvelopeError::Empty
            | EnvelopeError::Truncated { .. }
            | EnvelopeError::Checksum { .. }),
        ) => {
            return Ok(Claim::Undecided(e));
        }
        Err(e) => return Err(e.at(slot.display())),
    };
    let (holder, payload) = split_body(body).ok_or_else(|| {
        EnvelopeError::Truncated {
            expected: 4,
            found: body.len(),
        }
        .at(slot.display())
    })?;
    if holder == token.as_bytes() {
        Ok(Claim::Won)
    } else {
        Ok(Claim::Lost {
            holder: Bytes::copy_from_slice(holder),
            payload: Bytes::copy_from_slice(payload),
        })
    }
}

fn split_body(body: &[u8]) -> Option<(&[u8], &[u8])> {
    let len = u32::from_be_bytes(body.get(..4)?.try_into().ok()?) as usize;
    let holder = body.get(4..4 + len)?;
    Some((holder, &body[4 + len..]))
}
