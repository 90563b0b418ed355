//! Who a connection is: Kafka's `User:<name>` principals.

use std::fmt;

/// A principal as ACLs name it (`User:alice`). Connections that did not
/// authenticate (PLAINTEXT, SSL without a client certificate) are
/// `User:ANONYMOUS`, as in Kafka.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Principal {
    pub kind: String,
    pub name: String,
}

impl Principal {
    pub fn user(name: impl Into<String>) -> Self {
        Self {
            kind: "User".into(),
            name: name.into(),
        }
    }

    pub fn anonymous() -> Self {
        Self::user("ANONYMOUS")
    }

    /// `Type:name`, as ACLs and `--super-users` spell it.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.split_once(':') {
            Some((kind, name)) if !kind.is_empty() && !name.is_empty() => Ok(Self {
                kind: kind.to_owned(),
                name: name.to_owned(),
            }),
            _ => Err(format!("`{s}` is not a principal: write it as User:<name>")),
        }
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn principals_parse_and_print_as_kafka_writes_them() {
        let p = Principal::parse("User:alice").unwrap();
        assert_eq!(p, Principal::user("alice"));
        assert_eq!(p.to_string(), "User:alice");
        assert_eq!(Principal::parse("User:CN=a,O=b").unwrap().name, "CN=a,O=b");
        for bad in ["alice", "User:", ":x", ""] {
            assert!(Principal::parse(bad).is_err(), "{bad}");
        }
    }
}
