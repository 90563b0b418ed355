//! The `Vfs` contract: what every backend must do, written once.
//!
//! Each check takes a fresh, empty volume. Run them all with
//! [`vfs_contract_tests!`](crate::vfs_contract_tests). The checks use only
//! what the trait promises, so they hold for a local directory, the in-memory
//! volume and the model NFS alike (one host at a time).

#![allow(clippy::unwrap_used)] // assertions: a failed step is a failed contract

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use super::Interrupting;
use crate::durable::{
    Claim, ClaimToken, EnvelopeError, atomic_replace, claim, converge_remove, open_envelope,
    read_claim, seal, sweep_temps,
};
use crate::{Create, FileKind, OpenOptions, Vfs, read_file};

fn p(s: &str) -> &Path {
    Path::new(s)
}

async fn write_file(vfs: &dyn Vfs, path: &str, data: &[u8]) {
    let f = vfs
        .open(p(path), OpenOptions::create_new())
        .await
        .expect("create");
    f.write_at(0, Bytes::copy_from_slice(data))
        .await
        .expect("write");
    f.fsync().await.expect("fsync");
    f.close().await.expect("close");
}

async fn kind_of(fut: impl std::future::Future<Output = std::io::Result<()>>) -> ErrorKind {
    fut.await.expect_err("operation must fail").kind()
}

pub async fn write_read_round_trip(vfs: Arc<dyn Vfs>) {
    let f = vfs.open(p("f"), OpenOptions::create_new()).await.unwrap();
    f.write_at(0, Bytes::from_static(b"hello")).await.unwrap();
    f.write_at(10, Bytes::from_static(b"world")).await.unwrap();
    f.fsync().await.unwrap();
    assert_eq!(f.stat().await.unwrap().len, 15);
    assert_eq!(
        &f.read_at(0, 100).await.unwrap()[..],
        b"hello\0\0\0\0\0world"
    );
    assert_eq!(&f.read_at(3, 4).await.unwrap()[..], b"lo\0\0");
    assert!(f.read_at(15, 10).await.unwrap().is_empty(), "read at EOF");
    assert!(
        f.read_at(1000, 10).await.unwrap().is_empty(),
        "read past EOF"
    );
    f.close().await.unwrap();

    let again = vfs.open(p("f"), OpenOptions::write()).await.unwrap();
    again.write_at(0, Bytes::from_static(b"J")).await.unwrap();
    again.close().await.unwrap();
    assert_eq!(
        read_file(vfs.as_ref(), p("f")).await.unwrap(),
        b"Jello\0\0\0\0\0world"
    );

    let t = vfs
        .open(p("f"), OpenOptions::write().with_truncate())
        .await
        .unwrap();
    assert_eq!(t.stat().await.unwrap().len, 0);
    t.close().await.unwrap();

    let c = vfs
        .open(p("g"), OpenOptions::read().with_create(Create::IfMissing))
        .await
        .unwrap();
    c.close().await.unwrap();
    assert_eq!(vfs.stat(p("g")).await.unwrap().len, 0);
}

pub async fn error_kinds(vfs: Arc<dyn Vfs>) {
    let v = vfs.as_ref();
    let open_missing = v.open(p("missing"), OpenOptions::read()).await;
    assert_eq!(
        open_missing.err().map(|e| e.kind()),
        Some(ErrorKind::NotFound)
    );
    write_file(v, "f", b"x").await;
    let excl = v.open(p("f"), OpenOptions::create_new()).await;
    assert_eq!(excl.err().map(|e| e.kind()), Some(ErrorKind::AlreadyExists));
    let in_missing_dir = v.open(p("nodir/f"), OpenOptions::create_new()).await;
    assert_eq!(
        in_missing_dir.err().map(|e| e.kind()),
        Some(ErrorKind::NotFound)
    );

    assert_eq!(kind_of(v.unlink(p("missing"))).await, ErrorKind::NotFound);
    assert_eq!(
        kind_of(v.rename(p("missing"), p("x"))).await,
        ErrorKind::NotFound
    );
    assert_eq!(kind_of(v.rmdir(p("missing"))).await, ErrorKind::NotFound);
    assert_eq!(kind_of(v.mkdir(p("a/b"))).await, ErrorKind::NotFound);
    assert_eq!(
        v.stat(p("missing")).await.err().map(|e| e.kind()),
        Some(ErrorKind::NotFound)
    );

    v.mkdir(p("d")).await.unwrap();
    assert_eq!(kind_of(v.mkdir(p("d"))).await, ErrorKind::AlreadyExists);
    write_file(v, "d/inner", b"y").await;
    assert_eq!(kind_of(v.rmdir(p("d"))).await, ErrorKind::DirectoryNotEmpty);
    assert_eq!(kind_of(v.unlink(p("d"))).await, ErrorKind::IsADirectory);
    assert_eq!(kind_of(v.rmdir(p("f"))).await, ErrorKind::NotADirectory);
    assert_eq!(
        v.read_dir(p("f")).await.err().map(|e| e.kind()),
        Some(ErrorKind::NotADirectory)
    );
    let open_dir = v.open(p("d"), OpenOptions::read()).await;
    assert_eq!(
        open_dir.err().map(|e| e.kind()),
        Some(ErrorKind::IsADirectory)
    );
    assert_eq!(kind_of(v.mkdir(p("f/sub"))).await, ErrorKind::NotADirectory);
}

pub async fn paths_outside_the_volume_are_rejected(vfs: Arc<dyn Vfs>) {
    for bad in ["/etc/passwd", "../outside", "a/../../outside", "./x"] {
        let open = vfs.open(p(bad), OpenOptions::read()).await;
        assert_eq!(
            open.err().map(|e| e.kind()),
            Some(ErrorKind::InvalidInput),
            "{bad}"
        );
        let mk = vfs.mkdir(p(bad)).await;
        assert_eq!(
            mk.err().map(|e| e.kind()),
            Some(ErrorKind::InvalidInput),
            "{bad}"
        );
        let rn = vfs.rename(p("x"), p(bad)).await;
        assert_eq!(
            rn.err().map(|e| e.kind()),
            Some(ErrorKind::InvalidInput),
            "{bad}"
        );
        let rd = vfs.read_dir(p(bad)).await;
        assert_eq!(
            rd.err().map(|e| e.kind()),
            Some(ErrorKind::InvalidInput),
            "{bad}"
        );
    }
}

pub async fn read_dir_is_sorted_and_typed(vfs: Arc<dyn Vfs>) {
    let v = vfs.as_ref();
    assert!(v.read_dir(p("")).await.unwrap().is_empty());
    for name in ["c", "a", "b"] {
        write_file(v, name, b"").await;
    }
    v.mkdir(p("dir")).await.unwrap();
    let listing: Vec<_> = v
        .read_dir(p(""))
        .await
        .unwrap()
        .into_iter()
        .map(|e| (e.name, e.kind))
        .collect();
    assert_eq!(
        listing,
        vec![
            ("a".to_owned(), FileKind::File),
            ("b".to_owned(), FileKind::File),
            ("c".to_owned(), FileKind::File),
            ("dir".to_owned(), FileKind::Dir),
        ]
    );
    assert_eq!(v.stat(p("dir")).await.unwrap().kind, FileKind::Dir);
    v.sync_dir(p("dir")).await.unwrap();
    v.sync_dir(p("")).await.unwrap();
}

pub async fn rename_replaces_the_target(vfs: Arc<dyn Vfs>) {
    let v = vfs.as_ref();
    write_file(v, "old", b"old contents").await;
    write_file(v, "new", b"new").await;
    v.rename(p("new"), p("old")).await.unwrap();
    assert_eq!(read_file(v, p("old")).await.unwrap(), b"new");
    let gone = v.stat(p("new")).await;
    assert_eq!(gone.err().map(|e| e.kind()), Some(ErrorKind::NotFound));
    v.mkdir(p("d")).await.unwrap();
    v.rename(p("old"), p("d/moved")).await.unwrap();
    assert_eq!(read_file(v, p("d/moved")).await.unwrap(), b"new");
    v.rename(p("d"), p("e")).await.unwrap();
    assert_eq!(read_file(v, p("e/moved")).await.unwrap(), b"new");
}

pub async fn exclusive_create_has_one_winner(vfs: Arc<dyn Vfs>) {
    for round in 0..20 {
        let path = PathBuf::from(format!("slot-{round}"));
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let (vfs, path) = (vfs.clone(), path.clone());
                tokio::spawn(async move {
                    match vfs.open(&path, OpenOptions::create_new()).await {
                        Ok(f) => {
                            f.close().await.expect("close");
                            true
                        }
                        Err(e) if e.kind() == ErrorKind::AlreadyExists => false,
                        Err(e) => panic!("unexpected error {e}"),
                    }
                })
            })
            .collect();
        let mut winners = 0;
        for t in tasks {
            winners += usize::from(t.await.expect("task"));
        }
        assert_eq!(winners, 1, "round {round}");
    }
}

pub async fn claim_has_one_winner(vfs: Arc<dyn Vfs>) {
    for round in 0..10 {
        let slot = PathBuf::from(format!("epoch-{round}"));
        let tokens: Vec<_> = (0..6)
            .map(|i| ClaimToken::fresh(&format!("broker-{i}")))
            .collect();
        let tasks: Vec<_> = tokens
            .iter()
            .cloned()
            .map(|token| {
                let (vfs, slot) = (vfs.clone(), slot.clone());
                tokio::spawn(async move {
                    claim(vfs.as_ref(), &slot, &token, b"payload")
                        .await
                        .expect("claim")
                })
            })
            .collect();
        let mut outcomes = Vec::new();
        for t in tasks {
            outcomes.push(t.await.expect("task"));
        }
        let won: Vec<_> = (0..tokens.len())
            .filter(|&i| outcomes[i] == Claim::Won)
            .collect();
        assert_eq!(won.len(), 1, "round {round}: {outcomes:?}");
        let winner = &tokens[won[0]];
        // Once the winner's write is complete, every other token sees it.
        for (i, token) in tokens.iter().enumerate() {
            let seen = read_claim(vfs.as_ref(), &slot, token).await.expect("read");
            if i == won[0] {
                assert_eq!(seen, Claim::Won);
            } else {
                assert_eq!(
                    seen,
                    Claim::Lost {
                        holder: Bytes::copy_from_slice(winner.as_bytes()),
                        payload: Bytes::from_static(b"payload"),
                    }
                );
            }
        }
    }
}

pub async fn claim_redrive_recognises_own_win(vfs: Arc<dyn Vfs>) {
    let v = vfs.as_ref();
    let a = ClaimToken::fresh("a");
    let b = ClaimToken::fresh("b");
    assert_eq!(claim(v, p("slot"), &a, b"1").await.unwrap(), Claim::Won);
    // The same claimant re-driving (say after a timeout) still holds the slot.
    assert_eq!(claim(v, p("slot"), &a, b"1").await.unwrap(), Claim::Won);
    assert!(matches!(
        claim(v, p("slot"), &b, b"2").await.unwrap(),
        Claim::Lost { ref payload, .. } if &payload[..] == b"1"
    ));

    // A created but never written slot (lost reply, crash) decides nobody.
    v.open(p("empty-slot"), OpenOptions::create_new())
        .await
        .unwrap()
        .close()
        .await
        .unwrap();
    assert_eq!(
        claim(v, p("empty-slot"), &a, b"1").await.unwrap(),
        Claim::Undecided(EnvelopeError::Empty)
    );
    // A slot holding something else entirely is an error, not a loss.
    write_file(v, "foreign-slot", b"not a claim").await;
    let err = claim(v, p("foreign-slot"), &a, b"1").await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidData);
}

pub async fn atomic_replace_readers_see_whole_versions(vfs: Arc<dyn Vfs>) {
    const VERSIONS: u32 = 150;
    let version = |n: u32| {
        // Sizes vary so a torn mix of two versions cannot pass a length check.
        let body: Vec<u8> = std::iter::repeat_n((n % 251) as u8, 64 + (n as usize * 397) % 20_000)
            .chain(n.to_be_bytes())
            .collect();
        seal("contract-version", &body)
    };
    atomic_replace(vfs.as_ref(), p("meta"), version(0))
        .await
        .unwrap();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..3)
        .map(|_| {
            let (vfs, done) = (vfs.clone(), done.clone());
            tokio::spawn(async move {
                let mut last = 0u32;
                let mut reads = 0u32;
                while !done.load(std::sync::atomic::Ordering::SeqCst) || reads == 0 {
                    let data = read_file(vfs.as_ref(), p("meta")).await.expect("read");
                    let body = open_envelope("contract-version", &data)
                        .unwrap_or_else(|e| panic!("reader saw a torn file: {e}"));
                    let n = u32::from_be_bytes(body[body.len() - 4..].try_into().expect("4"));
                    assert_eq!(&data[..], &version(n)[..], "content of version {n}");
                    assert!(n >= last, "went back from version {last} to {n}");
                    last = n;
                    reads += 1;
                    tokio::task::yield_now().await;
                }
                reads
            })
        })
        .collect();
    for n in 1..=VERSIONS {
        atomic_replace(vfs.as_ref(), p("meta"), version(n))
            .await
            .unwrap();
    }
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    for r in readers {
        assert!(r.await.expect("reader") > 0);
    }
    let names: Vec<_> = vfs
        .read_dir(p(""))
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.name)
        .collect();
    assert_eq!(names, ["meta"], "no temp files left behind");
}

pub async fn atomic_replace_interrupted_leaves_old_or_new(vfs: Arc<dyn Vfs>) {
    let old = seal("contract", b"old version");
    let new = seal("contract", b"the new version, longer than the old one");
    for budget in 0.. {
        let dir = format!("run-{budget}");
        vfs.mkdir(p(&dir)).await.unwrap();
        let target = PathBuf::from(&dir).join("meta");
        atomic_replace(vfs.as_ref(), &target, old.clone())
            .await
            .unwrap();
        let cut = Interrupting::new(vfs.clone(), budget);
        let result = atomic_replace(&cut, &target, new.clone()).await;
        let seen = read_file(vfs.as_ref(), &target).await.unwrap();
        assert!(seen == old || seen == new, "budget {budget}: torn target");
        if result.is_ok() {
            assert_eq!(seen, new, "budget {budget}: success must mean new content");
        }
        sweep_temps(vfs.as_ref(), &target).await.unwrap();
        let names: Vec<_> = vfs
            .read_dir(p(&dir))
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(
            names,
            ["meta"],
            "budget {budget}: sweep leaves only the target"
        );
        // Re-driving the interrupted change reaches the new version.
        atomic_replace(vfs.as_ref(), &target, new.clone())
            .await
            .unwrap();
        assert_eq!(read_file(vfs.as_ref(), &target).await.unwrap(), new);
        if !cut.tripped() {
            assert!(result.is_ok(), "budget {budget}: {result:?}");
            break;
        }
    }
}

async fn build_tree(vfs: &dyn Vfs, root: &str) {
    vfs.mkdir(p(root)).await.unwrap();
    for part in 0..3 {
        let dir = format!("{root}/{part}");
        vfs.mkdir(p(&dir)).await.unwrap();
        for seg in 0..2 {
            write_file(vfs, &format!("{dir}/{seg:020}-1.log"), b"records").await;
        }
        vfs.mkdir(p(&format!("{dir}/empty"))).await.unwrap();
    }
    write_file(vfs, &format!("{root}/topic.meta"), b"meta").await;
}

pub async fn converge_remove_reaches_end_state_after_any_interruption(vfs: Arc<dyn Vfs>) {
    for budget in 0.. {
        let root = format!("topic-{budget}");
        build_tree(vfs.as_ref(), &root).await;
        let cut = Interrupting::new(vfs.clone(), budget);
        let first = converge_remove(&cut, p(&root)).await;
        if !cut.tripped() {
            assert!(
                first.expect("uninterrupted pass").is_gone(),
                "budget {budget}"
            );
        }
        // Re-driving from whatever was left reaches the end state, twice over.
        for pass in 0..2 {
            let removal = converge_remove(vfs.as_ref(), p(&root)).await.unwrap();
            assert!(
                removal.is_gone(),
                "budget {budget}, pass {pass}: {removal:?}"
            );
        }
        let gone = vfs.stat(p(&root)).await;
        assert_eq!(gone.err().map(|e| e.kind()), Some(ErrorKind::NotFound));
        if !cut.tripped() {
            break;
        }
    }
    let listing = vfs.read_dir(p("")).await.unwrap();
    assert!(listing.is_empty(), "left behind: {listing:?}");
    // A single file is a tree too, and an absent path is already gone.
    write_file(vfs.as_ref(), "lone", b"x").await;
    assert!(
        converge_remove(vfs.as_ref(), p("lone"))
            .await
            .unwrap()
            .is_gone()
    );
    assert!(
        converge_remove(vfs.as_ref(), p("lone"))
            .await
            .unwrap()
            .is_gone()
    );
    let root = converge_remove(vfs.as_ref(), p("")).await;
    assert_eq!(root.err().map(|e| e.kind()), Some(ErrorKind::InvalidInput));
}

pub async fn envelope_errors_are_reported_as_invalid_data(vfs: Arc<dyn Vfs>) {
    let v = vfs.as_ref();
    let sealed = seal("assignment", b"{}");
    write_file(v, "torn", &sealed[..sealed.len() - 3]).await;
    let data = read_file(v, p("torn")).await.unwrap();
    let err = open_envelope("assignment", &data)
        .map_err(|e| e.at("torn"))
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidData);
    assert!(matches!(
        EnvelopeError::find(&err),
        Some(EnvelopeError::Truncated { .. })
    ));
    assert!(err.to_string().contains("torn: truncated"), "{err}");
}
