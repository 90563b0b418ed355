//! Scenario `stuck-topic-delete`: the deletion before tombstones.

use std::io;

use vfs::Vfs;
use vfs::durable::converge_remove;

use crate::layout::topic_dir;
use crate::log::names;
use crate::log::topic::TopicMeta;

/// The historical deletion (scenario `stuck-topic-delete`): one recursive
/// delete in place, a warning if it could not finish, success reported all
/// the same. A `.nfs` file of a segment still open somewhere keeps the
/// directory, and nothing ever comes back for it.
pub(crate) async fn delete_in_place_once(vfs: &dyn Vfs, meta: &TopicMeta) -> io::Result<()> {
    match converge_remove(vfs, &topic_dir(&meta.id)).await {
        Ok(r) if r.is_gone() => {}
        Ok(r) => {
            tracing::warn!(topic_id = %meta.id, left = ?r, "could not delete the whole topic; carrying on")
        }
        Err(e) => {
            tracing::warn!(topic_id = %meta.id, error = %e, "recursive delete failed; carrying on")
        }
    }
    names::release(vfs, &meta.name, &meta.id).await.map(|_| ())
}
