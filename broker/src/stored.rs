//! Metadata files inside the checksummed envelope, replaced atomically:
//! the one format every kaas metadata file uses. Most payloads are JSON
//! (`write_json`, `read_json`); the cluster id is its bare bytes
//! (`write_bytes`, `read_bytes`).

use std::io;
use std::path::Path;

use serde::Serialize;
use serde::de::DeserializeOwned;
use vfs::Vfs;
use vfs::durable::{EnvelopeError, atomic_replace, open_envelope, seal};

/// Replaces `path` with `value` (temp, fsync, rename).
pub(crate) async fn write_json<T: Serialize>(
    vfs: &dyn Vfs,
    path: &Path,
    kind: &str,
    value: &T,
) -> io::Result<()> {
    let json = serde_json::to_vec(value).map_err(io::Error::other)?;
    write_bytes(vfs, path, kind, &json).await
}

/// Replaces `path` with `payload` (temp, fsync, rename).
pub(crate) async fn write_bytes(
    vfs: &dyn Vfs,
    path: &Path,
    kind: &str,
    payload: &[u8],
) -> io::Result<()> {
    atomic_replace(vfs, path, seal(kind, payload)).await
}

/// Reads `path`'s payload by a fresh open; `Ok(None)` if it does not
/// exist. A torn or foreign file is an `InvalidData` error naming the path.
pub(crate) async fn read_bytes(
    vfs: &dyn Vfs,
    path: &Path,
    kind: &str,
) -> io::Result<Option<Vec<u8>>> {
    let bytes = match vfs::read_file(vfs, path).await {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let payload = open_envelope(kind, &bytes).map_err(|e| e.at(path.display()))?;
    Ok(Some(payload.to_vec()))
}

/// [`read_json`] of a file that may be of any of `kinds` (a format with a
/// newer kind that older binaries must refuse, and the older one).
pub(crate) async fn read_json_of<T: DeserializeOwned>(
    vfs: &dyn Vfs,
    path: &Path,
    kinds: &[&str],
) -> io::Result<Option<T>> {
    let bytes = match vfs::read_file(vfs, path).await {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let mut opened = Err(EnvelopeError::Payload("no kind to read".into()));
    for kind in kinds {
        opened = open_envelope(kind, &bytes);
        if opened.is_ok() {
            break;
        }
    }
    let payload = opened.map_err(|e| e.at(path.display()))?;
    serde_json::from_slice(payload)
        .map(Some)
        .map_err(|e| EnvelopeError::Payload(e.to_string()).at(path.display()))
}

/// Reads `path` by a fresh open; `Ok(None)` if it does not exist. A torn,
/// foreign or unparsable file is an `InvalidData` error naming the path.
pub(crate) async fn read_json<T: DeserializeOwned>(
    vfs: &dyn Vfs,
    path: &Path,
    kind: &str,
) -> io::Result<Option<T>> {
    let Some(payload) = read_bytes(vfs, path, kind).await? else {
        return Ok(None);
    };
    serde_json::from_slice(&payload)
        .map(Some)
        .map_err(|e| EnvelopeError::Payload(e.to_string()).at(path.display()))
}
