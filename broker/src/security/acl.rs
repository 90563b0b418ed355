//! ACLs with Kafka's resource types, pattern types, operations and
//! permission types, and the decision Kafka's authorizer makes from them.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::Principal;

macro_rules! codes {
    ($(#[$m:meta])* $name:ident { $($v:ident = $c:literal),* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum $name { $($v),* }
        impl $name {
            pub fn from_code(c: i8) -> Option<Self> {
                match c { $($c => Some(Self::$v),)* _ => None }
            }
            pub fn code(self) -> i8 {
                match self { $(Self::$v => $c),* }
            }
        }
    };
}

codes!(
    /// Kafka's `ResourceType`.
    ResourceType { Any = 1, Topic = 2, Group = 3, Cluster = 4, TransactionalId = 5, DelegationToken = 6, User = 7 }
);
codes!(
    /// Kafka's `PatternType`.
    PatternType { Any = 1, Match = 2, Literal = 3, Prefixed = 4 }
);
codes!(
    /// Kafka's `AclOperation`.
    Operation {
        Any = 1, All = 2, Read = 3, Write = 4, Create = 5, Delete = 6, Alter = 7, Describe = 8,
        ClusterAction = 9, DescribeConfigs = 10, AlterConfigs = 11, IdempotentWrite = 12,
        CreateTokens = 13, DescribeTokens = 14,
    }
);
codes!(
    /// Kafka's `AclPermissionType`.
    Permission { Any = 1, Deny = 2, Allow = 3 }
);

/// The cluster resource's only name.
pub const CLUSTER_NAME: &str = "kafka-cluster";
/// A literal resource name that matches every name, and the host or
/// principal name that matches any.
pub const WILDCARD: &str = "*";

/// One ACL: `principal` is `permission`ed to `operation` on the resources
/// `(resource_type, name, pattern)` from `host`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Acl {
    pub resource_type: ResourceType,
    pub name: String,
    pub pattern: PatternType,
    pub principal: String,
    pub host: String,
    pub operation: Operation,
    pub permission: Permission,
}

/// The cluster's ACLs, as one document.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AclSet {
    pub acls: BTreeSet<Acl>,
}

impl Acl {
    /// The checks CreateAcls makes; `Err` is Kafka's INVALID_REQUEST message.
    pub fn validate(&self) -> Result<(), String> {
        if matches!(self.resource_type, ResourceType::Any) {
            return Err("an ACL names one resource type, not ANY".into());
        }
        if !matches!(self.pattern, PatternType::Literal | PatternType::Prefixed) {
            return Err("an ACL's pattern type is LITERAL or PREFIXED".into());
        }
        if matches!(self.operation, Operation::Any) {
            return Err("an ACL names one operation (or ALL), not ANY".into());
        }
        if matches!(self.permission, Permission::Any) {
            return Err("an ACL's permission is ALLOW or DENY".into());
        }
        if self.name.is_empty() {
            return Err("an ACL's resource name is not empty".into());
        }
        if self.resource_type == ResourceType::Cluster && self.name != CLUSTER_NAME {
            return Err(format!("the cluster resource is named {CLUSTER_NAME}"));
        }
        Principal::parse(&self.principal)?;
        if self.host.is_empty() {
            return Err("an ACL's host is an address or *".into());
        }
        Ok(())
    }

    /// Whether this ACL's resource pattern covers the resource `name`.
    fn covers(&self, resource_type: ResourceType, name: &str) -> bool {
        self.resource_type == resource_type
            && match self.pattern {
                PatternType::Literal => self.name == name || self.name == WILDCARD,
                PatternType::Prefixed => name.starts_with(&self.name),
                PatternType::Any | PatternType::Match => false,
            }
    }

    fn applies_to(&self, principal: &Principal, host: &str) -> bool {
        let p = &self.principal;
        let principal_ok = *p == principal.to_string()
            || p.split_once(':')
                .is_some_and(|(k, n)| k == principal.kind && n == WILDCARD);
        principal_ok && (self.host == WILDCARD || self.host == host)
    }
}

/// Whether an ACL allowing `granted` allows `wanted` (Kafka's implications:
/// ALL implies everything; READ, WRITE, DELETE and ALTER imply DESCRIBE;
/// ALTER_CONFIGS implies DESCRIBE_CONFIGS).
fn allows(granted: Operation, wanted: Operation) -> bool {
    use Operation::*;
    granted == wanted
        || granted == All
        || (wanted == Describe && matches!(granted, Read | Write | Delete | Alter))
        || (wanted == DescribeConfigs && granted == AlterConfigs)
}

/// What a filter in DescribeAcls and DeleteAcls matches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AclFilter {
    pub resource_type: ResourceType,
    pub name: Option<String>,
    pub pattern: PatternType,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: Operation,
    pub permission: Permission,
}

impl AclFilter {
    pub fn matches(&self, acl: &Acl) -> bool {
        let resource_ok = match (self.pattern, &self.name) {
            (PatternType::Match, Some(name)) => {
                (self.resource_type == ResourceType::Any || acl.resource_type == self.resource_type)
                    && match acl.pattern {
                        PatternType::Literal => acl.name == *name || acl.name == WILDCARD,
                        PatternType::Prefixed => name.starts_with(&acl.name),
                        _ => false,
                    }
            }
            _ => {
                (self.resource_type == ResourceType::Any || acl.resource_type == self.resource_type)
                    && self.name.as_ref().is_none_or(|n| *n == acl.name)
                    && match self.pattern {
                        PatternType::Any | PatternType::Match => true,
                        p => p == acl.pattern,
                    }
            }
        };
        resource_ok
            && self.principal.as_ref().is_none_or(|p| *p == acl.principal)
            && self.host.as_ref().is_none_or(|h| *h == acl.host)
            && (self.operation == Operation::Any || self.operation == acl.operation)
            && (self.permission == Permission::Any || self.permission == acl.permission)
    }
}

/// How requests are authorized on this broker.
#[derive(Clone, Debug, Default)]
pub struct AuthorizerConfig {
    /// ACLs are enforced (`--authorizer acl`); otherwise everything is
    /// allowed, as in Kafka without an authorizer.
    pub enabled: bool,
    pub super_users: BTreeSet<Principal>,
    /// Kafka's `allow.everyone.if.no.acl.found`.
    pub allow_if_no_acl: bool,
}

impl AuthorizerConfig {
    /// Kafka's decision: super users may do anything; a matching DENY wins
    /// over any ALLOW; without any ACL on the resource, the configured
    /// default.
    pub fn allowed(
        &self,
        acls: &AclSet,
        principal: &Principal,
        host: &str,
        operation: Operation,
        resource_type: ResourceType,
        name: &str,
    ) -> bool {
        if !self.enabled || self.super_users.contains(principal) {
            return true;
        }
        let mut any = false;
        let mut allow = false;
        for acl in acls.acls.iter().filter(|a| a.covers(resource_type, name)) {
            any = true;
            if !acl.applies_to(principal, host) {
                continue;
            }
            match acl.permission {
                Permission::Deny
                    if acl.operation == operation || acl.operation == Operation::All =>
                {
                    return false;
                }
                Permission::Allow if allows(acl.operation, operation) => allow = true,
                _ => {}
            }
        }
        allow || (!any && self.allow_if_no_acl)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acl(name: &str, pattern: PatternType, who: &str, op: Operation, perm: Permission) -> Acl {
        Acl {
            resource_type: ResourceType::Topic,
            name: name.into(),
            pattern,
            principal: who.into(),
            host: "*".into(),
            operation: op,
            permission: perm,
        }
    }

    fn on() -> AuthorizerConfig {
        AuthorizerConfig {
            enabled: true,
            super_users: [Principal::user("admin")].into(),
            allow_if_no_acl: false,
        }
    }

    #[test]
    fn kafkas_rules_decide() {
        use Operation::*;
        use PatternType::*;
        use Permission::*;
        let set = AclSet {
            acls: [
                acl("orders", Literal, "User:alice", Write, Allow),
                acl("pay", Prefixed, "User:*", Read, Allow),
                acl("payroll", Literal, "User:bob", All, Deny),
            ]
            .into(),
        };
        let a = on();
        let ok = |who: &str, op, topic: &str| {
            a.allowed(
                &set,
                &Principal::user(who),
                "10.0.0.1",
                op,
                ResourceType::Topic,
                topic,
            )
        };
        assert!(ok("alice", Write, "orders"));
        assert!(ok("alice", Describe, "orders"), "WRITE implies DESCRIBE");
        assert!(!ok("alice", Read, "orders"));
        assert!(!ok("bob", Write, "orders"));
        assert!(ok("bob", Read, "payments"), "prefixed, any user");
        assert!(!ok("bob", Read, "payroll"), "DENY wins over ALLOW");
        assert!(ok("carol", Read, "payroll"));
        assert!(!ok("carol", Read, "other"), "no ACL: denied by default");
        assert!(ok("admin", Delete, "anything"), "super user");
        let open = AuthorizerConfig {
            allow_if_no_acl: true,
            ..on()
        };
        assert!(open.allowed(
            &set,
            &Principal::user("x"),
            "h",
            Read,
            ResourceType::Topic,
            "other"
        ));
        assert!(!open.allowed(
            &set,
            &Principal::user("x"),
            "h",
            Write,
            ResourceType::Topic,
            "orders"
        ));
        assert!(AuthorizerConfig::default().allowed(
            &set,
            &Principal::user("bob"),
            "h",
            Read,
            ResourceType::Topic,
            "payroll"
        ));
    }

    #[test]
    fn filters_match_as_kafka_describes() {
        use PatternType::*;
        let literal = acl(
            "orders",
            Literal,
            "User:alice",
            Operation::Write,
            Permission::Allow,
        );
        let prefixed = acl(
            "ord",
            Prefixed,
            "User:bob",
            Operation::Read,
            Permission::Allow,
        );
        let filter = |name: Option<&str>, pattern| AclFilter {
            resource_type: ResourceType::Topic,
            name: name.map(str::to_owned),
            pattern,
            principal: None,
            host: None,
            operation: Operation::Any,
            permission: Permission::Any,
        };
        assert!(filter(None, Any).matches(&literal));
        assert!(filter(Some("orders"), Match).matches(&prefixed));
        assert!(!filter(Some("orders"), Prefixed).matches(&prefixed));
        assert!(filter(Some("ord"), Prefixed).matches(&prefixed));
        assert!(!filter(Some("orders"), Literal).matches(&prefixed));
        assert!(literal.validate().is_ok());
        let mut bad = literal.clone();
        bad.pattern = Match;
        assert!(bad.validate().is_err());
    }
}
