"""Security with real clients: three brokers on one data directory, each
with an internal PLAINTEXT listener (between brokers), an external
SASL_SSL one and an external SSL one that asks for client certificates;
ACLs enforced, `User:admin` the super user, bootstrapped on the empty
volume with `kaas scram-user`.

confluent-kafka (librdkafka), kafka-python and kcat authenticate with
SCRAM-SHA-512 over TLS, and with client certificates; the admin adds
users (AlterUserScramCredentials) and ACLs (CreateAcls, DeleteAcls)
through confluent-kafka's AdminClient, each through a different broker,
and every broker applies them; a principal without rights gets Kafka's
error codes; a rotated server certificate is served to new connections
while old ones carry on."""

import os
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
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

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from kaasproc import KAAS, free_port, start  # noqa: E402

ADMIN_PASSWORD = "admin-secret"


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def issue(pki, name, subject, san=None, ca="ca"):
    """A key and a certificate signed by the test CA."""
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key",
            "-subj", subject, "-out", f"{name}.csr", cwd=pki)
    # Extensions make it an X.509 v3 certificate (webpki takes no v1 ones).
    with open(os.path.join(pki, f"{name}.ext"), "w") as f:
        if san:
            f.write(f"subjectAltName={san}\nextendedKeyUsage=serverAuth\n")
        else:
            f.write("extendedKeyUsage=clientAuth\n")
    ext = ["-extfile", f"{name}.ext"]
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
            "-CAcreateserial", "-days", "2", "-out", f"{name}.pem", *ext, cwd=pki)


_handed_out = set()


def distinct_ports(n):
    """`n` free ports, none handed out before in this run (the kernel may
    hand a released port out again at once)."""
    out = []
    while len(out) < n:
        p = free_port()
        if p not in _handed_out:
            _handed_out.add(p)
            out.append(p)
    return out


class SecuredCluster:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="kaas-sec-", dir="target")
        self.data = os.path.join(self.dir, "data")
        os.mkdir(self.data)
        self.pki = os.path.join(self.dir, "pki")
        os.mkdir(self.pki)
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key",
                "-subj", "/CN=kaas test CA", "-days", "2", "-out", "ca.pem", cwd=self.pki)
        issue(self.pki, "server", "/CN=kaas", san="IP:127.0.0.1,DNS:localhost")
        issue(self.pki, "app", "/O=shop/CN=orders-app")
        issue(self.pki, "stranger", "/CN=stranger")
        self.ports = [dict(zip(("internal", "sasl", "mtls"), distinct_ports(3)))
                      for _ in range(3)]
        self.procs = [None] * 3
        env = dict(os.environ, KAAS_SCRAM_PASSWORD=ADMIN_PASSWORD)
        subprocess.run([KAAS, "--data-dir", self.data, "scram-user", "--user", "admin"],
                       env=env, check=True, capture_output=True)

    def pem(self, name):
        return os.path.join(self.pki, name)

    def start(self, i):
        p = self.ports[i]
        args = [
            "--data-dir", self.data, "--broker-id", str(i),
            "--listeners", f"INTERNAL://127.0.0.1:{p['internal']},"
                           f"SASL://127.0.0.1:{p['sasl']},MTLS://127.0.0.1:{p['mtls']}",
            "--listener-security-protocol-map", "INTERNAL:PLAINTEXT,SASL:SASL_SSL,MTLS:SSL",
            "--inter-broker-listener-name", "INTERNAL",
            "--ssl-cert-file", self.pem("server.pem"), "--ssl-key-file", self.pem("server.key"),
            "--ssl-ca-file", self.pem("ca.pem"), "--ssl-client-auth", "requested",
            "--ssl-reload-secs", "1",
            "--authorizer", "acl", "--super-users", "User:admin",
            "--security-refresh-ms", "500",
            "--heartbeat-interval-secs", "1", "--session-timeout-secs", "4",
        ]
        env = dict(os.environ, KAAS_LOG="info")
        self.procs[i] = start(args, p["internal"], os.path.join(self.dir, f"kaas-{i}.log"),
                              env=env)

    def sasl(self, i=None):
        brokers = range(3) if i is None else [i]
        return ",".join(f"127.0.0.1:{self.ports[b]['sasl']}" for b in brokers)

    def mtls(self):
        return ",".join(f"127.0.0.1:{p['mtls']}" for p in self.ports)

    def scram(self, user, password, i=None, **extra):
        return {
            "bootstrap.servers": self.sasl(i),
            "security.protocol": "SASL_SSL",
            "sasl.mechanisms": "SCRAM-SHA-512",
            "sasl.username": user,
            "sasl.password": password,
            "ssl.ca.location": self.pem("ca.pem"),
            **extra,
        }

    def cert(self, name, **extra):
        return {
            "bootstrap.servers": self.mtls(),
            "security.protocol": "SSL",
            "ssl.ca.location": self.pem("ca.pem"),
            "ssl.certificate.location": self.pem(f"{name}.pem"),
            "ssl.key.location": self.pem(f"{name}.key"),
            **extra,
        }

    def stop(self):
        for p in self.procs:
            if p and p.poll() is None:
                p.terminate()
                p.wait(timeout=20)


@pytest.fixture(scope="module")
def cluster():
    c = SecuredCluster()
    try:
        for i in range(3):
            c.start(i)
        yield c
    finally:
        c.stop()


_clients = {}


def admin(cluster, i=None):
    """The admin's AdminClient through broker `i` (kept: a client that is
    garbage-collected fails its pending futures)."""
    key = (id(cluster), i)
    if key not in _clients:
        _clients[key] = AdminClient(cluster.scram("admin", ADMIN_PASSWORD, i))
    return _clients[key]


def done(futures, timeout=30):
    return {k: f.result(timeout=timeout) for k, f in futures.items()}


def add_user(cluster, user, password, i=0):
    upsert = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), password.encode())
    done(admin(cluster, i).alter_user_scram_credentials([upsert]))


def acl(principal, rtype, name, op, pattern=ResourcePatternType.LITERAL):
    return AclBinding(rtype, name, pattern, principal, "*", op, AclPermissionType.ALLOW)


def produce(conf, topic, values, partition=None):
    """Produces and returns the delivery errors (None for success)."""
    errors = []
    p = Producer({**conf, "message.timeout.ms": 8000, "retries": 0})
    for v in values:
        kw = {} if partition is None else {"partition": partition}
        p.produce(topic, v.encode(), on_delivery=lambda err, _m: errors.append(err), **kw)
    p.flush(15)
    settle(p)
    return errors


def ok(errors):
    """All delivered (KafkaError's == against None raises inside the C
    extension, so compare with `is`)."""
    return bool(errors) and all(e is None for e in errors)


def settle(p):
    """Drops what a producer still holds and serves its last callbacks, so
    that none runs later, from the garbage collector."""
    p.purge()
    p.flush(1)


def consume(conf, topic, group, count, limit_s=20):
    c = Consumer({**conf, "group.id": group, "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    got, deadline = [], time.monotonic() + limit_s
    try:
        while len(got) < count and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                raise KafkaException(m.error())
            got.append(m.value().decode())
    finally:
        c.close()
    return got


def eventually(check, limit_s=10.0):
    deadline = time.monotonic() + limit_s
    while True:
        last = check()
        if last or time.monotonic() > deadline:
            return last
        time.sleep(0.2)


def test_a_wrong_password_is_refused(cluster):
    p = Producer({**cluster.scram("admin", "not-it"), "message.timeout.ms": 4000})
    errors = []
    p.produce("anything", b"x", on_delivery=lambda err, _m: errors.append(err))
    p.flush(8)
    settle(p)
    assert errors and errors[0] is not None


def test_users_and_acls_set_through_one_broker_apply_on_all(cluster):
    topic = f"orders-{uuid.uuid4().hex[:6]}"
    done(admin(cluster, 0).create_topics([NewTopic(topic, 3, 1)]))
    add_user(cluster, "alice", "alice-pw", i=1)
    alice = cluster.scram("alice", "alice-pw")
    # Authenticated, but no ACL yet: refused on every partition.
    errors = produce(alice, topic, ["early"])
    assert errors[0] is not None
    assert errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # The admin grants WRITE and READ through broker 2, and READ on her groups.
    done(admin(cluster, 2).create_acls([
        acl("User:alice", ResourceType.TOPIC, "orders-", AclOperation.WRITE,
            ResourcePatternType.PREFIXED),
        acl("User:alice", ResourceType.TOPIC, "orders-", AclOperation.READ,
            ResourcePatternType.PREFIXED),
        acl("User:alice", ResourceType.GROUP, "alice-", AclOperation.READ,
            ResourcePatternType.PREFIXED),
    ]))
    # Every partition (led by different brokers) takes her writes, within
    # the refresh interval.
    for part in range(3):
        assert eventually(lambda: ok(produce(alice, topic, [f"p{part}"], part))), part
    got = consume(alice, topic, f"alice-{uuid.uuid4().hex[:6]}", 3)
    assert sorted(got) == ["p0", "p1", "p2"]
    # Metadata shows her only what she may describe.
    alice_admin = AdminClient(alice)
    md = alice_admin.list_topics(timeout=10)
    assert topic in md.topics
    assert all(t.startswith("orders-") for t in md.topics), sorted(md.topics)
    # A group she has no ACL on: GROUP_AUTHORIZATION_FAILED (kafka-python
    # says so; librdkafka's admin client keeps retrying until its timeout).
    from kafka import KafkaAdminClient
    from kafka.errors import GroupAuthorizationFailedError
    kp = KafkaAdminClient(bootstrap_servers=cluster.sasl().split(","),
                          security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512",
                          sasl_plain_username="alice", sasl_plain_password="alice-pw",
                          ssl_cafile=cluster.pem("ca.pem"))
    with pytest.raises(GroupAuthorizationFailedError):
        kp.list_group_offsets("other-group")
    kp.close()
    # The admin takes WRITE back through broker 1: refused everywhere again.
    deleted = done(admin(cluster, 1).delete_acls([AclBindingFilter(
        ResourceType.TOPIC, "orders-", ResourcePatternType.PREFIXED, "User:alice", "*",
        AclOperation.WRITE, AclPermissionType.ALLOW)]))
    assert len(list(deleted.values())[0]) == 1
    for part in range(3):
        refused = eventually(lambda: (produce(alice, topic, ["late"], part)[0] or None))
        assert refused and refused.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, part
    # She cannot change ACLs or credentials herself.
    with pytest.raises(KafkaException) as e:
        done(alice_admin.create_acls([
            acl("User:alice", ResourceType.TOPIC, "*", AclOperation.ALL)]))
    assert e.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    described = done(admin(cluster, 0).describe_user_scram_credentials(["alice"]))
    infos = described["alice"].scram_credential_infos
    assert [(i.mechanism, i.iterations) for i in infos] == [(ScramMechanism.SCRAM_SHA_512, 8192)]


def test_client_certificates_name_the_principal(cluster):
    topic = f"certs-{uuid.uuid4().hex[:6]}"
    done(admin(cluster).create_topics([NewTopic(topic, 1, 1)]))
    done(admin(cluster).create_acls([
        acl("User:CN=orders-app,O=shop", ResourceType.TOPIC, topic, AclOperation.WRITE)]))
    app = cluster.cert("app")
    assert eventually(lambda: ok(produce(app, topic, ["by-cert"])))
    errors = produce(cluster.cert("stranger"), topic, ["nope"])
    assert errors[0] is not None and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_kafka_python_over_sasl_ssl_and_with_a_client_certificate(cluster):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.errors import TopicAuthorizationFailedError
    topic = f"orders-kp-{uuid.uuid4().hex[:6]}"
    done(admin(cluster).create_topics([NewTopic(topic, 1, 1)]))
    add_user(cluster, "bob", "bob-pw")
    done(admin(cluster).create_acls([
        acl("User:bob", ResourceType.TOPIC, topic, AclOperation.ALL),
        acl("User:bob", ResourceType.GROUP, "bob-g", AclOperation.READ)]))
    common = dict(bootstrap_servers=cluster.sasl().split(","), security_protocol="SASL_SSL",
                  sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="bob",
                  sasl_plain_password="bob-pw", ssl_cafile=cluster.pem("ca.pem"))

    def send():
        p = KafkaProducer(**common)
        try:
            p.send(topic, b"kp-1").get(timeout=10)
            return True
        finally:
            p.close()
    assert eventually(send)
    c = KafkaConsumer(topic, group_id="bob-g", auto_offset_reset="earliest",
                      consumer_timeout_ms=8000, **common)
    assert [m.value for m in c] == [b"kp-1"]
    c.close()
    # A client certificate without rights: kafka-python's error for it.
    p = KafkaProducer(bootstrap_servers=cluster.mtls().split(","), security_protocol="SSL",
                      ssl_cafile=cluster.pem("ca.pem"), ssl_certfile=cluster.pem("stranger.pem"),
                      ssl_keyfile=cluster.pem("stranger.key"), max_block_ms=8000)
    with pytest.raises(TopicAuthorizationFailedError):
        p.send(topic, b"x").get(timeout=10)
    p.close()


def librdkafka_of_kcat():
    r = subprocess.run(["kcat", "-V"], capture_output=True, text=True)
    version = (r.stdout + r.stderr).split("librdkafka ")[1].split()[0]
    return tuple(int(x) for x in version.split(".")[:3])


def test_kcat_over_sasl_ssl(cluster):
    """SCRAM-SHA-512 where kcat's librdkafka has the SCRAM nonce fix
    (2.6.1, librdkafka#4895); older ones (Debian 12 ships 2.0.2) send the
    client nonce twice, which kaas refuses as Kafka 4 does and names in the
    log: they go over PLAIN on the same SASL_SSL listener."""
    topic = f"orders-kcat-{uuid.uuid4().hex[:6]}"
    done(admin(cluster).create_topics([NewTopic(topic, 1, 1)]))
    fixed = librdkafka_of_kcat() >= (2, 6, 1)
    common = ["-X", "security.protocol=SASL_SSL", "-X", "sasl.username=admin",
              "-X", f"sasl.password={ADMIN_PASSWORD}",
              "-X", f"ssl.ca.location={cluster.pem('ca.pem')}", "-b", cluster.sasl()]
    scram = ["-X", "sasl.mechanisms=SCRAM-SHA-512", *common]
    sasl = scram if fixed else ["-X", "sasl.mechanisms=PLAIN", *common]
    subprocess.run(["kcat", *sasl, "-P", "-t", topic], input=b"one\ntwo\n", check=True,
                   timeout=30)
    out = subprocess.run(["kcat", *sasl, "-C", "-t", topic, "-e", "-o", "beginning"],
                         check=True, capture_output=True, timeout=30).stdout
    assert out.split() == [b"one", b"two"]
    if not fixed:
        r = subprocess.run(["kcat", *scram, "-L", "-m", "3"], capture_output=True, timeout=30)
        assert r.returncode != 0
        logs = "".join(open(os.path.join(cluster.dir, f"kaas-{i}.log")).read() for i in range(3))
        assert "librdkafka#4895" in logs


def served_serial(port):
    ctx = ssl.create_default_context(cafile=None)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        with ctx.wrap_socket(s) as t:
            der = t.getpeercert(binary_form=True)
    return der


def test_a_rotated_certificate_is_served_without_dropping_connections(cluster):
    topic = f"orders-rot-{uuid.uuid4().hex[:6]}"
    done(admin(cluster).create_topics([NewTopic(topic, 1, 1)]))
    port = cluster.ports[0]["sasl"]
    before = served_serial(port)
    p = Producer({**cluster.scram("admin", ADMIN_PASSWORD), "message.timeout.ms": 8000})
    p.produce(topic, b"before")
    assert p.flush(10) == 0
    # Rotate in place, as a Secret update does: a new key and certificate.
    issue(cluster.pki, "server-next", "/CN=kaas", san="IP:127.0.0.1,DNS:localhost")
    for ext in ("pem", "key"):
        os.replace(cluster.pem(f"server-next.{ext}"), cluster.pem(f"server.{ext}"))
    assert eventually(lambda: served_serial(port) != before, limit_s=10)
    # The producer's connections, opened before, still work.
    p.produce(topic, b"after")
    assert p.flush(10) == 0
    c = Consumer({**cluster.scram("admin", ADMIN_PASSWORD), "group.id": "rot",
                  "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.monotonic() + 15
    while len(got) < 2 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    assert got == [b"before", b"after"]
