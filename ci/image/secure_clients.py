"""Clients of the secured overlay's cluster (called by secure_smoke.sh):
the bootstrapped admin logs in with SCRAM-SHA-512 over TLS, creates a
topic, a user and that user's ACLs through the Kafka admin API; the user
produces and consumes with SCRAM-SHA-256; a user without ACLs is refused
with TOPIC_AUTHORIZATION_FAILED; a wrong password and a plaintext client
get nothing; Metadata names the client listener's addresses only.

Usage: python secure_clients.py CA.crt ADMIN_PASSWORD BOOTSTRAP
"""

import sys
import time
import uuid

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

ca, admin_password, bootstrap = sys.argv[1:4]
ports = {b.rsplit(":", 1)[1] for b in bootstrap.split(",")}


def conf(user, password, mechanism="SCRAM-SHA-512", **extra):
    return {"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL", "ssl.ca.location": ca,
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password, **extra}


def done(futures):
    for f in (futures.values() if isinstance(futures, dict) else futures):
        f.result(30)


def check(cond, what):
    if not cond:
        sys.exit(f"secured overlay: {what}")
    print(f"  ok: {what}")


admin = AdminClient(conf("admin", admin_password))
md = admin.list_topics(timeout=30)
advertised = {f"{b.host}:{b.port}" for b in md.brokers.values()}
check(len(md.brokers) == 3 and {a.rsplit(":", 1)[1] for a in advertised} == ports,
      f"Metadata on the client listener names its 3 addresses ({sorted(advertised)})")

done(admin.create_topics([NewTopic("secure-orders", 3)]))
app_password = uuid.uuid4().hex
done(admin.alter_user_scram_credentials([
    UserScramCredentialUpsertion("app", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), app_password.encode()),
    UserScramCredentialUpsertion("nobody", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), b"nobody-pw"),
]))
allow = [(ResourceType.TOPIC, "secure-orders", op) for op in (AclOperation.WRITE, AclOperation.READ, AclOperation.DESCRIBE)]
allow.append((ResourceType.GROUP, "app-", AclOperation.READ))
done(admin.create_acls([
    AclBinding(rtype, name, ResourcePatternType.PREFIXED if rtype == ResourceType.GROUP else ResourcePatternType.LITERAL,
               "User:app", "*", op, AclPermissionType.ALLOW)
    for rtype, name, op in allow]))
check(True, "admin (SCRAM-SHA-512) created a topic, two users and ACLs through the admin API")


def produce(c, n):
    p = Producer({**c, "acks": "all", "enable.idempotence": True})
    errors = []
    for i in range(n):
        p.produce("secure-orders", value=f"m{i}", on_delivery=lambda e, m: e and errors.append(e))
    left = p.flush(60)
    return errors, left


# Credentials and ACLs reach every broker within --security-refresh-ms.
deadline = time.monotonic() + 20
while True:
    errors, left = produce(conf("app", app_password, "SCRAM-SHA-256"), 1000)
    if (not errors and not left) or time.monotonic() > deadline:
        break
    time.sleep(1)
check(not errors and not left, f"app (SCRAM-SHA-256) produced 1000 messages, acks=all ({errors[:1]}, {left} left)")

c = Consumer(conf("app", app_password, "SCRAM-SHA-256", **{"group.id": "app-readers", "auto.offset.reset": "earliest"}))
c.subscribe(["secure-orders"])
seen, deadline = set(), time.monotonic() + 60
while len(seen) < 1000 and time.monotonic() < deadline:
    m = c.poll(1)
    if m is not None and not m.error():
        seen.add(m.value().decode())
c.close()
check(seen == {f"m{i}" for i in range(1000)}, f"app consumed them all in group app-readers ({len(seen)})")

errors, left = produce(conf("nobody", "nobody-pw"), 1)
check([e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED],
      f"a user without ACLs is refused with TOPIC_AUTHORIZATION_FAILED ({errors})")

bad = AdminClient(conf("admin", "not-the-password", log_level=2))
try:
    bad.list_topics(timeout=8)
    refused = False
except KafkaException as e:
    refused = e.args[0].code() in (KafkaError._AUTHENTICATION, KafkaError._TRANSPORT, KafkaError._TIMED_OUT)
check(refused, "a wrong password gets no metadata")

plain = AdminClient({"bootstrap.servers": bootstrap, "security.protocol": "PLAINTEXT", "log_level": 2})
try:
    plain.list_topics(timeout=5)
    refused = False
except KafkaException:
    refused = True
check(refused, "a PLAINTEXT client on the SASL_SSL listener gets nothing")
print("secured overlay: clients passed")
