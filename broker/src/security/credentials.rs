//! SCRAM credentials (KIP-554): one versioned document on the volume,
//! `security/credentials-<n>`, and the copy every broker verifies against.
//!
//! A credential is what AlterUserScramCredentials sends: the salt, the
//! iteration count and the salted password (PBKDF2 of the password). The
//! password itself never reaches the broker over SCRAM; PLAIN sends it, and
//! is checked by salting it the same way.

use std::collections::BTreeMap;
use std::num::NonZeroU32;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use scram_rs::{ScramHashing, ScramSha256RustNative, ScramSha512RustNative};
use serde::{Deserialize, Serialize};

/// Kafka's SCRAM mechanisms, by the codes the admin APIs use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Mechanism {
    #[serde(rename = "SCRAM-SHA-256")]
    Sha256,
    #[serde(rename = "SCRAM-SHA-512")]
    Sha512,
}

impl Mechanism {
    pub const ALL: [Self; 2] = [Self::Sha256, Self::Sha512];

    pub fn from_code(code: i8) -> Option<Self> {
        match code {
            1 => Some(Self::Sha256),
            2 => Some(Self::Sha512),
            _ => None,
        }
    }

    pub fn code(self) -> i8 {
        match self {
            Self::Sha256 => 1,
            Self::Sha512 => 2,
        }
    }

    pub fn sasl_name(self) -> &'static str {
        match self {
            Self::Sha256 => "SCRAM-SHA-256",
            Self::Sha512 => "SCRAM-SHA-512",
        }
    }

    pub fn from_sasl_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.sasl_name() == name)
    }

    /// Kafka's lower bound on iterations (4096), and its upper one.
    pub const MIN_ITERATIONS: i32 = 4096;
    pub const MAX_ITERATIONS: i32 = 16384;

    fn derive(self, password: &[u8], salt: &[u8], iterations: NonZeroU32) -> Option<Vec<u8>> {
        match self {
            Self::Sha256 => ScramSha256RustNative::derive(password, salt, iterations).ok(),
            Self::Sha512 => ScramSha512RustNative::derive(password, salt, iterations).ok(),
        }
    }
}

/// One user's credential for one mechanism.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credential {
    /// Base64, as SCRAM sends it.
    pub salt: String,
    pub iterations: u32,
    /// Base64 of PBKDF2(password, salt, iterations).
    pub salted_password: String,
}

impl Credential {
    /// A credential from a password (the bootstrap subcommand, tests).
    pub fn from_password(
        mechanism: Mechanism,
        password: &str,
        salt: &[u8],
        iterations: u32,
    ) -> Option<Self> {
        let salted = mechanism.derive(password.as_bytes(), salt, NonZeroU32::new(iterations)?)?;
        Some(Self {
            salt: B64.encode(salt),
            iterations,
            salted_password: B64.encode(salted),
        })
    }

    /// Whether `password` is this credential's (SASL/PLAIN).
    pub fn matches(&self, mechanism: Mechanism, password: &str) -> bool {
        let (Ok(salt), Ok(stored)) = (B64.decode(&self.salt), B64.decode(&self.salted_password))
        else {
            return false;
        };
        let Some(iterations) = NonZeroU32::new(self.iterations) else {
            return false;
        };
        mechanism
            .derive(password.as_bytes(), &salt, iterations)
            .is_some_and(|d| constant_time_eq(&d, &stored))
    }

    pub fn salted_password_bytes(&self) -> Option<Vec<u8>> {
        B64.decode(&self.salted_password).ok()
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Every user's credentials: user -> mechanism -> credential.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Credentials {
    pub users: BTreeMap<String, BTreeMap<Mechanism, Credential>>,
}

impl Credentials {
    pub fn get(&self, user: &str, mechanism: Mechanism) -> Option<&Credential> {
        self.users.get(user).and_then(|m| m.get(&mechanism))
    }

    /// SASL/PLAIN: the password checked against the user's strongest
    /// credential.
    pub fn check_plain(&self, user: &str, password: &str) -> bool {
        let Some(creds) = self.users.get(user) else {
            return false;
        };
        creds
            .iter()
            .next_back()
            .is_some_and(|(m, c)| c.matches(*m, password))
    }

    pub fn upsert(&mut self, user: &str, mechanism: Mechanism, credential: Credential) {
        self.users
            .entry(user.to_owned())
            .or_default()
            .insert(mechanism, credential);
    }

    /// Removes one credential; false if there was none.
    pub fn delete(&mut self, user: &str, mechanism: Mechanism) -> bool {
        let Some(creds) = self.users.get_mut(user) else {
            return false;
        };
        let had = creds.remove(&mechanism).is_some();
        if creds.is_empty() {
            self.users.remove(user);
        }
        had
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_checks_the_password_against_the_salted_one() {
        let mut c = Credentials::default();
        let cred = Credential::from_password(Mechanism::Sha512, "s3cret", b"salty", 4096).unwrap();
        c.upsert("alice", Mechanism::Sha512, cred);
        assert!(c.check_plain("alice", "s3cret"));
        assert!(!c.check_plain("alice", "s3cret "));
        assert!(!c.check_plain("bob", "s3cret"));
        assert!(c.delete("alice", Mechanism::Sha512));
        assert!(!c.delete("alice", Mechanism::Sha512));
        assert!(c.users.is_empty());
    }

    #[test]
    fn mechanisms_have_kafkas_codes_and_names() {
        assert_eq!(Mechanism::from_code(2), Some(Mechanism::Sha512));
        assert_eq!(Mechanism::from_code(0), None);
        assert_eq!(
            Mechanism::from_sasl_name("SCRAM-SHA-256"),
            Some(Mechanism::Sha256)
        );
        assert_eq!(Mechanism::Sha256.code(), 1);
    }
}
