//! The control socket: one command a line, one answer a line.
//!
//! ```text
//! cut [mount=N] [seed=S] [keep=F]   lose power (all mounts, or one); the
//!                                   cut mounts answer EIO until `on`
//! on [mount=N]                      power back on
//! fail op=OP errno=E [count=N] [mount=N]
//!                                   OP: read write fsync create mkdir rename
//!                                   unlink rmdir any; E: EIO ENOSPC ESTALE
//! full on|off                       every write, create and mkdir: ENOSPC
//! clear                             no more faults, not full
//! latency [commit_ms=F] [metadata_ms=F]
//! stats                             counters, pending changes
//! quit                              unmount and exit
//! ```
//! An answer starts with `ok` or `error`, then `key=value` pairs.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::mpsc::Sender;
use std::thread;
use std::time::Duration;

use crate::mount::{Shared, lock};
use crate::volume::{Fault, Op};

/// Serves `listener` until a `quit`, which it passes on to `quit`.
pub fn serve(listener: UnixListener, volume: Shared, quit: Sender<()>) {
    for stream in listener.incoming().flatten() {
        let (volume, quit) = (volume.clone(), quit.clone());
        thread::spawn(move || session(stream, volume, quit));
    }
}

fn session(stream: UnixStream, volume: Shared, quit: Sender<()>) {
    let Ok(mut out) = stream.try_clone() else {
        return;
    };
    for line in BufReader::new(stream).lines() {
        let Ok(line) = line else { return };
        let answer = match command(&line, &volume) {
            Ok(Some(a)) => format!("ok{a}"),
            Ok(None) => {
                let _ = writeln!(out, "ok");
                let _ = quit.send(());
                return;
            }
            Err(e) => format!("error {e}"),
        };
        if writeln!(out, "{answer}").is_err() {
            return;
        }
    }
}

fn errno_named(name: &str) -> Option<i32> {
    Some(match name {
        "EIO" => libc::EIO,
        "ENOSPC" => libc::ENOSPC,
        "ESTALE" => libc::ESTALE,
        _ => return None,
    })
}

fn ms(v: &str) -> Result<Duration, String> {
    let f: f64 = v.parse().map_err(|_| format!("not milliseconds: {v}"))?;
    if !(0.0..=60_000.0).contains(&f) {
        return Err(format!("milliseconds out of range: {v}"));
    }
    Ok(Duration::from_secs_f64(f / 1000.0))
}

/// Runs one command; `Ok(None)` is `quit`.
fn command(line: &str, volume: &Shared) -> Result<Option<String>, String> {
    let mut words = line.split_whitespace();
    let verb = words.next().unwrap_or("");
    let mut args = BTreeMap::new();
    let mut bare = Vec::new();
    for w in words {
        match w.split_once('=') {
            Some((k, v)) => {
                args.insert(k, v);
            }
            None => bare.push(w),
        }
    }
    let num = |k: &str| -> Result<Option<u64>, String> {
        args.get(k)
            .map(|v| v.parse().map_err(|_| format!("{k}: not a number: {v}")))
            .transpose()
    };
    let mount = num("mount")?.map(|m| m as u32);
    let mut v = lock(volume);
    match verb {
        "cut" => {
            let seed = num("seed")?.unwrap_or(0);
            let keep: f64 = match args.get("keep") {
                Some(k) => k.parse().map_err(|_| format!("keep: not a number: {k}"))?,
                None => 0.0,
            };
            if !(0.0..=1.0).contains(&keep) {
                return Err("keep: a probability, 0 to 1".into());
            }
            let r = v
                .power_cut(mount, seed, keep)
                .map_err(|e| format!("the cut failed: {e}"))?;
            Ok(Some(format!(
                " pages_lost={} pages_kept={} changes_undone={} changes_kept={} undo_conflicts={} dark=1",
                r.pages_lost, r.pages_kept, r.changes_undone, r.changes_kept, r.undo_conflicts
            )))
        }
        "on" => {
            v.power_on(mount);
            Ok(Some(String::new()))
        }
        "fail" => {
            let op = match args.get("op").copied() {
                None | Some("any") => None,
                Some(o) => Some(Op::parse(o).ok_or(format!("unknown op {o}"))?),
            };
            let name = args.get("errno").copied().unwrap_or("EIO");
            let errno = errno_named(name).ok_or(format!("unknown errno {name}"))?;
            let left = num("count")?;
            if left == Some(0) {
                return Err("count: at least 1 (leave it out for every operation)".into());
            }
            v.faults.push(Fault {
                op,
                errno,
                left,
                mount,
            });
            Ok(Some(String::new()))
        }
        "full" => {
            v.full = match bare.first().copied() {
                Some("on") => true,
                Some("off") => false,
                _ => return Err("full on|off".into()),
            };
            Ok(Some(String::new()))
        }
        "clear" => {
            v.faults.clear();
            v.full = false;
            Ok(Some(String::new()))
        }
        "latency" => {
            if let Some(c) = args.get("commit_ms") {
                v.latency.commit = ms(c)?;
            }
            if let Some(m) = args.get("metadata_ms") {
                v.latency.metadata = ms(m)?;
            }
            Ok(Some(format!(
                " commit_ms={} metadata_ms={}",
                v.latency.commit.as_secs_f64() * 1000.0,
                v.latency.metadata.as_secs_f64() * 1000.0
            )))
        }
        "stats" => {
            let s = v.stats.clone();
            let (files, changes) = v.pending();
            Ok(Some(format!(
                " silly_renames={} silly_removed={} estale={} faults_injected={} cuts={} pages_lost={} changes_undone={} undo_conflicts={} fsyncs={} dir_fsyncs={} pending_files={files} pending_changes={changes}",
                s.silly_renames,
                s.silly_removed,
                s.estale,
                s.faults_injected,
                s.cuts,
                s.pages_lost,
                s.changes_undone,
                s.undo_conflicts,
                s.fsyncs,
                s.dir_fsyncs
            )))
        }
        "quit" => Ok(None),
        "" => Err("empty command".into()),
        other => Err(format!("unknown command {other}")),
    }
}
