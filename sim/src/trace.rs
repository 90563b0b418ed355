//! The trace of a run: every observable event, in order, and its digest.
//!
//! Two runs of the same seed must produce byte-identical traces; the digest
//! (BLAKE3 over the lines) makes that easy to compare and to snapshot.

use std::sync::{Arc, Mutex};

#[derive(Clone, Default)]
pub struct Trace {
    lines: Arc<Mutex<Vec<String>>>,
}

impl Trace {
    pub fn record(&self, line: String) {
        self.lock().push(line);
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn lines(&self) -> Vec<String> {
        self.lock().clone()
    }

    /// Hex BLAKE3 of all lines, each terminated by a newline.
    pub fn digest(&self) -> String {
        let mut h = blake3::Hasher::new();
        for line in self.lock().iter() {
            h.update(line.as_bytes());
            h.update(b"\n");
        }
        h.finalize().to_hex()[..16].to_owned()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<String>> {
        self.lines.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digest_depends_on_content_and_order() {
        let a = Trace::default();
        a.record("x".into());
        a.record("y".into());
        let b = Trace::default();
        b.record("y".into());
        b.record("x".into());
        let c = Trace::default();
        c.record("xy".into());
        assert_ne!(a.digest(), b.digest());
        assert_ne!(a.digest(), c.digest(), "line boundaries count");
        assert_eq!(a.digest(), a.clone().digest());
        assert_eq!(a.len(), 2);
    }
}
