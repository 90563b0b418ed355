//! SaslHandshake and SaslAuthenticate, the SCRAM credential APIs (KIP-554)
//! and the ACL APIs: DescribeAcls, CreateAcls, DeleteAcls.
//!
//! A change of credentials or ACLs is one new version of its document on
//! the volume (`security::versioned`): all of a request's changes land
//! together or none does.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, CreateAclsRequest,
    CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse, DescribeAclsRequest,
    DescribeAclsResponse, DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::{Api, code, lock};
use crate::security::acl::{Acl, AclFilter, PatternType, Permission};
use crate::security::versioned::ChangeError;
use crate::security::{Credential, Mechanism, Operation, ResourceType};

/// Kafka's answer to the ACL APIs on a broker without an authorizer.
const NO_AUTHORIZER: &str = "no authorizer is configured on this broker (--authorizer acl)";

fn text(s: impl Into<String>) -> Option<StrBytes> {
    Some(StrBytes::from_string(s.into()))
}

/// A failed change of a document: the error code and message to answer.
fn change_failed<E>(e: ChangeError<E>) -> (i16, String) {
    match e {
        ChangeError::Refused(_) => (code(ResponseError::InvalidRequest), "refused".into()),
        ChangeError::Volume(e) => super::document_not_changed("security", &e),
    }
}

fn filter_of(
    resource_type: i8,
    name: Option<&StrBytes>,
    pattern: i8,
    principal: Option<&StrBytes>,
    host: Option<&StrBytes>,
    operation: i8,
    permission: i8,
) -> Result<AclFilter, String> {
    Ok(AclFilter {
        resource_type: ResourceType::from_code(resource_type)
            .ok_or_else(|| format!("unknown resource type {resource_type}"))?,
        name: name.map(|n| n.to_string()),
        pattern: PatternType::from_code(pattern)
            .ok_or_else(|| format!("unknown pattern type {pattern}"))?,
        principal: principal.map(|p| p.to_string()),
        host: host.map(|h| h.to_string()),
        operation: Operation::from_code(operation)
            .ok_or_else(|| format!("unknown operation {operation}"))?,
        permission: Permission::from_code(permission)
            .ok_or_else(|| format!("unknown permission type {permission}"))?,
    })
}

impl Api {
    pub(super) async fn describe_user_scram_credentials(
        &self,
        r: DescribeUserScramCredentialsRequest,
    ) -> DescribeUserScramCredentialsResponse {
        // Fresh from the volume: a change made through another broker a
        // moment ago is seen here too.
        if let Err(e) = self.security.refresh_credentials().await {
            return DescribeUserScramCredentialsResponse::default()
                .with_error_code(code(ResponseError::KafkaStorageError))
                .with_error_message(text(e.to_string()));
        }
        let creds = self.security.credentials();
        let info = |user: &str| -> Vec<CredentialInfo> {
            creds
                .users
                .get(user)
                .into_iter()
                .flatten()
                .map(|(m, c)| {
                    CredentialInfo::default()
                        .with_mechanism(m.code())
                        .with_iterations(c.iterations as i32)
                })
                .collect()
        };
        let results = match r.users {
            None => creds
                .users
                .keys()
                .map(|u| {
                    DescribeUserScramCredentialsResult::default()
                        .with_user(StrBytes::from_string(u.clone()))
                        .with_credential_infos(info(u))
                })
                .collect(),
            Some(users) => {
                let mut seen = BTreeMap::new();
                for u in &users {
                    *seen.entry(u.name.to_string()).or_insert(0) += 1;
                }
                seen.into_iter()
                    .map(|(u, n)| {
                        let result = DescribeUserScramCredentialsResult::default()
                            .with_user(StrBytes::from_string(u.clone()));
                        if n > 1 {
                            result
                                .with_error_code(code(ResponseError::DuplicateResource))
                                .with_error_message(text(format!("user {u} asked for twice")))
                        } else if creds.users.contains_key(&u) {
                            result.with_credential_infos(info(&u))
                        } else {
                            result
                                .with_error_code(code(ResponseError::ResourceNotFound))
                                .with_error_message(text(format!(
                                    "attempt to describe a user credential that does not exist: {u}"
                                )))
                        }
                    })
                    .collect()
            }
        };
        DescribeUserScramCredentialsResponse::default().with_results(results)
    }

    pub(super) async fn alter_user_scram_credentials(
        &self,
        r: AlterUserScramCredentialsRequest,
    ) -> AlterUserScramCredentialsResponse {
        let (errors, users) = scram_change_errors(&r);
        // Deletions of credentials that do not exist fail at the edit.
        let missing: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
        let changed = self
            .security
            .change_credentials::<std::convert::Infallible>(|creds| {
                let mut missing = lock(&missing);
                missing.clear();
                for d in r
                    .deletions
                    .iter()
                    .filter(|d| !errors.contains_key(d.name.as_str()))
                {
                    let Some(m) = Mechanism::from_code(d.mechanism) else {
                        continue;
                    };
                    if creds.get(d.name.as_str(), m).is_none() {
                        missing.insert(d.name.to_string());
                    }
                }
                for d in &r.deletions {
                    let user = d.name.as_str();
                    if let (false, false, Some(m)) = (
                        errors.contains_key(user),
                        missing.contains(user),
                        Mechanism::from_code(d.mechanism),
                    ) {
                        creds.delete(user, m);
                    }
                }
                for u in &r.upsertions {
                    let user = u.name.as_str();
                    if let (false, false, Some(m)) = (
                        errors.contains_key(user),
                        missing.contains(user),
                        Mechanism::from_code(u.mechanism),
                    ) {
                        use base64::Engine;
                        let b64 = base64::engine::general_purpose::STANDARD;
                        creds.upsert(
                            user,
                            m,
                            Credential {
                                salt: b64.encode(&u.salt),
                                iterations: u.iterations as u32,
                                salted_password: b64.encode(&u.salted_password),
                            },
                        );
                    }
                }
                Ok(())
            })
            .await;
        let stored_failure = changed.err().map(change_failed);
        let missing = lock(&missing).clone();
        let results = users
            .into_iter()
            .map(|user| {
                let result = AlterUserScramCredentialsResult::default()
                    .with_user(StrBytes::from_string(user.clone()));
                if let Some((c, why)) = errors.get(&user) {
                    result
                        .with_error_code(*c)
                        .with_error_message(text(why.clone()))
                } else if missing.contains(&user) {
                    result
                        .with_error_code(code(ResponseError::ResourceNotFound))
                        .with_error_message(text(format!(
                            "attempt to delete a user credential that does not exist: {user}"
                        )))
                } else if let Some((c, why)) = &stored_failure {
                    result
                        .with_error_code(*c)
                        .with_error_message(text(why.clone()))
                } else {
                    result
                }
            })
            .collect();
        AlterUserScramCredentialsResponse::default().with_results(results)
    }

    pub(super) fn describe_acls(&self, r: DescribeAclsRequest) -> DescribeAclsResponse {
        if !self.security.enforcing() {
            return DescribeAclsResponse::default()
                .with_error_code(code(ResponseError::SecurityDisabled))
                .with_error_message(text(NO_AUTHORIZER));
        }
        let filter = match filter_of(
            r.resource_type_filter,
            r.resource_name_filter.as_ref(),
            r.pattern_type_filter,
            r.principal_filter.as_ref(),
            r.host_filter.as_ref(),
            r.operation,
            r.permission_type,
        ) {
            Ok(f) => f,
            Err(why) => {
                return DescribeAclsResponse::default()
                    .with_error_code(code(ResponseError::InvalidRequest))
                    .with_error_message(text(why));
            }
        };
        let (_, acls) = self.security.acls();
        let mut by_resource: BTreeMap<(i8, String, i8), Vec<AclDescription>> = BTreeMap::new();
        for a in acls.acls.iter().filter(|a| filter.matches(a)) {
            by_resource
                .entry((a.resource_type.code(), a.name.clone(), a.pattern.code()))
                .or_default()
                .push(
                    AclDescription::default()
                        .with_principal(StrBytes::from_string(a.principal.clone()))
                        .with_host(StrBytes::from_string(a.host.clone()))
                        .with_operation(a.operation.code())
                        .with_permission_type(a.permission.code()),
                );
        }
        let resources = by_resource
            .into_iter()
            .map(|((t, name, p), acls)| {
                DescribeAclsResource::default()
                    .with_resource_type(t)
                    .with_resource_name(StrBytes::from_string(name))
                    .with_pattern_type(p)
                    .with_acls(acls)
            })
            .collect();
        DescribeAclsResponse::default().with_resources(resources)
    }

    pub(super) async fn create_acls(&self, r: CreateAclsRequest) -> CreateAclsResponse {
        if !self.security.enforcing() {
            let results = r
                .creations
                .iter()
                .map(|_| {
                    AclCreationResult::default()
                        .with_error_code(code(ResponseError::SecurityDisabled))
                        .with_error_message(text(NO_AUTHORIZER))
                })
                .collect();
            return CreateAclsResponse::default().with_results(results);
        }
        let parsed: Vec<Result<Acl, String>> = r
            .creations
            .iter()
            .map(|c| {
                let acl = Acl {
                    resource_type: ResourceType::from_code(c.resource_type)
                        .ok_or_else(|| format!("unknown resource type {}", c.resource_type))?,
                    name: c.resource_name.to_string(),
                    pattern: PatternType::from_code(c.resource_pattern_type).ok_or_else(|| {
                        format!("unknown pattern type {}", c.resource_pattern_type)
                    })?,
                    principal: c.principal.to_string(),
                    host: c.host.to_string(),
                    operation: Operation::from_code(c.operation)
                        .ok_or_else(|| format!("unknown operation {}", c.operation))?,
                    permission: Permission::from_code(c.permission_type)
                        .ok_or_else(|| format!("unknown permission type {}", c.permission_type))?,
                };
                acl.validate()?;
                Ok(acl)
            })
            .collect();
        let valid: Vec<Acl> = parsed.iter().filter_map(|p| p.clone().ok()).collect();
        let stored = if valid.is_empty() {
            None
        } else {
            self.security
                .change_acls::<std::convert::Infallible>(|set| {
                    set.acls.extend(valid.iter().cloned());
                    Ok(())
                })
                .await
                .err()
                .map(change_failed)
        };
        let results = parsed
            .into_iter()
            .map(|p| match (p, &stored) {
                (Err(why), _) => AclCreationResult::default()
                    .with_error_code(code(ResponseError::InvalidRequest))
                    .with_error_message(text(why)),
                (Ok(_), Some((c, why))) => AclCreationResult::default()
                    .with_error_code(*c)
                    .with_error_message(text(why.clone())),
                (Ok(_), None) => AclCreationResult::default(),
            })
            .collect();
        CreateAclsResponse::default().with_results(results)
    }

    pub(super) async fn delete_acls(&self, r: DeleteAclsRequest) -> DeleteAclsResponse {
        if !self.security.enforcing() {
            let results = r
                .filters
                .iter()
                .map(|_| {
                    DeleteAclsFilterResult::default()
                        .with_error_code(code(ResponseError::SecurityDisabled))
                        .with_error_message(text(NO_AUTHORIZER))
                })
                .collect();
            return DeleteAclsResponse::default().with_filter_results(results);
        }
        let filters: Vec<Result<AclFilter, String>> = r
            .filters
            .iter()
            .map(|f| {
                filter_of(
                    f.resource_type_filter,
                    f.resource_name_filter.as_ref(),
                    f.pattern_type_filter,
                    f.principal_filter.as_ref(),
                    f.host_filter.as_ref(),
                    f.operation,
                    f.permission_type,
                )
            })
            .collect();
        let removed: Mutex<Vec<Vec<Acl>>> = Mutex::new(Vec::new());
        let changed = self
            .security
            .change_acls::<std::convert::Infallible>(|set| {
                let mut removed = lock(&removed);
                removed.clear();
                for f in &filters {
                    let matched: Vec<Acl> = match f {
                        Ok(f) => set.acls.iter().filter(|a| f.matches(a)).cloned().collect(),
                        Err(_) => Vec::new(),
                    };
                    for a in &matched {
                        set.acls.remove(a);
                    }
                    removed.push(matched);
                }
                Ok(())
            })
            .await;
        let failed = changed.err().map(change_failed);
        let removed = lock(&removed).clone();
        let results = filters
            .into_iter()
            .enumerate()
            .map(|(i, f)| match (f, &failed) {
                (Err(why), _) => DeleteAclsFilterResult::default()
                    .with_error_code(code(ResponseError::InvalidRequest))
                    .with_error_message(text(why)),
                (Ok(_), Some((c, why))) => DeleteAclsFilterResult::default()
                    .with_error_code(*c)
                    .with_error_message(text(why.clone())),
                (Ok(_), None) => DeleteAclsFilterResult::default().with_matching_acls(
                    removed
                        .get(i)
                        .into_iter()
                        .flatten()
                        .map(|a| {
                            DeleteAclsMatchingAcl::default()
                                .with_resource_type(a.resource_type.code())
                                .with_resource_name(StrBytes::from_string(a.name.clone()))
                                .with_pattern_type(a.pattern.code())
                                .with_principal(StrBytes::from_string(a.principal.clone()))
                                .with_host(StrBytes::from_string(a.host.clone()))
                                .with_operation(a.operation.code())
                                .with_permission_type(a.permission.code())
                        })
                        .collect(),
                ),
            })
            .collect();
        DeleteAclsResponse::default().with_filter_results(results)
    }
}

/// Per user, the first error of its changes: code and message.
type UserErrors = BTreeMap<String, (i16, String)>;

/// The checks of an AlterUserScramCredentials that need no document: per
/// user the first error, and every user the request names.
fn scram_change_errors(r: &AlterUserScramCredentialsRequest) -> (UserErrors, BTreeSet<String>) {
    // Checks that need no document: per user, the first error.
    let mut errors = UserErrors::new();
    let mut count: BTreeMap<(String, i8), usize> = BTreeMap::new();
    for (name, mech) in r
        .deletions
        .iter()
        .map(|d| (&d.name, d.mechanism))
        .chain(r.upsertions.iter().map(|u| (&u.name, u.mechanism)))
    {
        *count.entry((name.to_string(), mech)).or_insert(0) += 1;
    }
    let mut fail = |user: &str, c: ResponseError, why: String| {
        errors.entry(user.to_owned()).or_insert((code(c), why));
    };
    for ((user, mech), n) in &count {
        if *n > 1 {
            fail(
                user,
                ResponseError::DuplicateResource,
                format!("a change of {user}'s {mech} credential appears twice"),
            );
        }
        if user.is_empty() {
            fail(
                user,
                ResponseError::UnacceptableCredential,
                "empty user name".into(),
            );
        }
        if Mechanism::from_code(*mech).is_none() {
            fail(
                user,
                ResponseError::UnsupportedSaslMechanism,
                format!("unknown SCRAM mechanism {mech}"),
            );
        }
    }
    for u in &r.upsertions {
        let range = Mechanism::MIN_ITERATIONS..=Mechanism::MAX_ITERATIONS;
        if !range.contains(&u.iterations) {
            fail(
                u.name.as_str(),
                ResponseError::UnacceptableCredential,
                format!(
                    "iterations {} out of {}..={}",
                    u.iterations,
                    Mechanism::MIN_ITERATIONS,
                    Mechanism::MAX_ITERATIONS
                ),
            );
        }
        if u.salt.is_empty() || u.salted_password.is_empty() {
            fail(
                u.name.as_str(),
                ResponseError::UnacceptableCredential,
                "empty salt or salted password".into(),
            );
        }
    }
    let users: BTreeSet<String> = count.keys().map(|(u, _)| u.clone()).collect();
    (errors, users)
}
