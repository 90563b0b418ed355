//! Observers beside the run's own (`run::observer`): each reads the
//! volume as a new broker would while an actor works, and reports what no
//! client could see. One starts when the actor it watches is in the cast
//! (`run::observer::start_watchers`).

pub(crate) mod controllers;
pub(crate) mod group_files;
pub(crate) mod manifests;
