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

# How long a wait for something that should happen soon may take: the CI
# box is small and busy, so it is generous; waits end as soon as the
# condition holds.
EVENTUALLY = 120


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
            # Required on the SSL listener; the SASL_SSL one asks for no
            # certificate, as in Kafka (KIP-684).
            "--ssl-ca-file", self.pem("ca.pem"), "--ssl-client-auth", "required",
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
                p.wait(timeout=60)


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


def done(futures, timeout=EVENTUALLY):
    return {k: f.result(timeout=timeout) for k, f in futures.items()}


def add_user(cluster, user, password, i=0):
    upsert = UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), password.encode())
    done(admin(cluster, i).alter_user_scram_credentials([upsert]))


def acl(principal, rtype, name, op, pattern=ResourcePatternType.LITERAL):
    return AclBinding(rtype, name, pattern, principal, "*", op, AclPermissionType.ALLOW)


def produce(conf, topic, values, partition=None):
    """Produces and returns the delivery errors (None for success). No
    retries, so that a refusal is reported as the broker's error; the
    message timeout is long so that a slow broker is not mistaken for one
    (callers check for the broker's error code, never just for an error)."""
    errors = []
    p = Producer({**conf, "message.timeout.ms": EVENTUALLY * 1000, "retries": 0})
    for v in values:
        kw = {} if partition is None else {"partition": partition}
        p.produce(topic, v.encode(), on_delivery=lambda err, _m: errors.append(err), **kw)
    p.flush(EVENTUALLY + 30)
    settle(p)
    return errors


def ok(errors):
    """All delivered (KafkaError's == against None raises inside the C
    extension, so compare with `is`)."""
    return bool(errors) and all(e is None for e in errors)


def refused(errors):
    """The first delivery failed with the broker's TOPIC_AUTHORIZATION_FAILED
    (not a local error such as a timeout)."""
    return (bool(errors) and errors[0] is not None
            and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED)


def settle(p):
    """Drops what a producer still holds and serves its last callbacks, so
    that none runs later, from the garbage collector."""
    p.purge()
    p.flush(1)


def consume(conf, topic, group, count, limit_s=EVENTUALLY):
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


def eventually(check, limit_s=EVENTUALLY, retry_on=()):
    """Calls `check` until it returns something true or `limit_s` s pass,
    and returns its last result. An exception of a type in `retry_on` counts
    as a false result; if the last call raised one, it is raised again."""
    deadline = time.monotonic() + limit_s
    while True:
        try:
            last, error = check(), None
        except retry_on as e:
            last, error = None, e
        if last or time.monotonic() > deadline:
            if not last and error is not None:
                raise error
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
    assert refused(errors), errors
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
    assert sorted(got) == ["p0", "p1", "p2"], f"read {got} in {EVENTUALLY} s"
    # Metadata shows her only what she may describe.
    alice_admin = AdminClient(alice)
    md = alice_admin.list_topics(timeout=EVENTUALLY)
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
    # Until every broker has refreshed, a write may still succeed; a local
    # error (a timeout) is no refusal either: try again.
    for part in range(3):
        seen = []

        def late():
            seen[:] = produce(alice, topic, ["late"], part)
            return refused(seen)
        assert eventually(late), (part, seen)
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
    assert refused(errors), errors


def test_ssl_client_auth_applies_to_ssl_listeners_only(cluster):
    """KIP-684: `--ssl-client-auth required` makes an SSL client present a
    certificate; a SASL_SSL client, authenticated by SASL, needs none."""
    topic = f"kip684-{uuid.uuid4().hex[:6]}"
    done(admin(cluster).create_topics([NewTopic(topic, 1, 1)]))
    assert eventually(lambda: ok(produce(cluster.scram("admin", ADMIN_PASSWORD), topic, ["sasl"])))
    with_cert = {k: v for k, v in cluster.cert("app").items()}
    assert eventually(lambda: AdminClient(with_cert).list_topics(timeout=30).brokers,
                      retry_on=(KafkaException,))
    no_cert = {k: v for k, v in with_cert.items() if not k.startswith("ssl.certificate")
               and not k.startswith("ssl.key")}
    with pytest.raises(KafkaException):
        AdminClient(no_cert).list_topics(timeout=10)


def test_a_consumer_without_a_group_acl_is_told_so(cluster):
    """FindCoordinator at the versions librdkafka sends (v2 here) refused
    with GROUP_AUTHORIZATION_FAILED, not a dropped connection ("all broker
    connections are down")."""
    topic = f"nogroup-{uuid.uuid4().hex[:6]}"
    done(admin(cluster).create_topics([NewTopic(topic, 1, 1)]))
    add_user(cluster, "reader", "r-pass")
    done(admin(cluster).create_acls([acl("User:reader", ResourceType.TOPIC, topic, AclOperation.READ)]))
    c = Consumer({**cluster.scram("reader", "r-pass"), "group.id": "not-allowed",
                  "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    seen = []
    deadline = time.monotonic() + EVENTUALLY
    while time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error():
            seen.append(m.error())
            if m.error().code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                break
    c.close()
    assert seen and seen[-1].code() == KafkaError.GROUP_AUTHORIZATION_FAILED, seen


def test_a_server_certificate_near_its_end_is_warned_of_at_start(cluster):
    # The fixture's certificates are issued for 2 days.
    with open(os.path.join(cluster.dir, "kaas-0.log")) as f:
        log = f.read()
    assert "TLS certificate expires in " in log, "no expiry warning at start-up"


def test_kafka_python_over_sasl_ssl_and_with_a_client_certificate(cluster):
    from kafka import KafkaConsumer, KafkaProducer
    from kafka.errors import KafkaError as KpError, TopicAuthorizationFailedError
    topic = f"orders-kp-{uuid.uuid4().hex[:6]}"
    done(admin(cluster).create_topics([NewTopic(topic, 1, 1)]))
    add_user(cluster, "bob", "bob-pw")
    done(admin(cluster).create_acls([
        acl("User:bob", ResourceType.TOPIC, topic, AclOperation.ALL),
        acl("User:bob", ResourceType.GROUP, "bob-g", AclOperation.READ)]))
    common = dict(bootstrap_servers=cluster.sasl().split(","), security_protocol="SASL_SSL",
                  sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="bob",
                  sasl_plain_password="bob-pw", ssl_cafile=cluster.pem("ca.pem"))

    # Refused until the brokers have refreshed the ACLs: try again then.
    # One attempt waits for as long as the whole (a send that timed out
    # might still be delivered, and the record be read twice).
    def send():
        p = KafkaProducer(**common)
        try:
            p.send(topic, b"kp-1").get(timeout=EVENTUALLY)
            return True
        finally:
            p.close()
    assert eventually(send, retry_on=(KpError,))
    c = KafkaConsumer(topic, group_id="bob-g", auto_offset_reset="earliest", **common)
    got, last_error = [], None
    deadline = time.monotonic() + EVENTUALLY
    try:
        while not got and time.monotonic() < deadline:
            try:
                for records in c.poll(timeout_ms=1000).values():
                    got.extend(m.value for m in records)
            except KpError as e:
                last_error = e
                time.sleep(0.5)
        # And nothing more (a second copy) follows.
        for records in c.poll(timeout_ms=2000).values():
            got.extend(m.value for m in records)
    finally:
        c.close()
    assert got == [b"kp-1"], f"read {got} in {EVENTUALLY} s; last error: {last_error!r}"
    # A client certificate without rights: kafka-python's error for it. The
    # block time is long so that a slow metadata answer is not a timeout.
    p = KafkaProducer(bootstrap_servers=cluster.mtls().split(","), security_protocol="SSL",
                      ssl_cafile=cluster.pem("ca.pem"), ssl_certfile=cluster.pem("stranger.pem"),
                      ssl_keyfile=cluster.pem("stranger.key"), max_block_ms=EVENTUALLY * 1000)
    with pytest.raises(TopicAuthorizationFailedError):
        p.send(topic, b"x").get(timeout=EVENTUALLY)
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
                   timeout=EVENTUALLY)
    out = subprocess.run(["kcat", *sasl, "-C", "-t", topic, "-e", "-o", "beginning"],
                         check=True, capture_output=True, timeout=EVENTUALLY).stdout
    assert out.split() == [b"one", b"two"]
    if not fixed:
        r = subprocess.run(["kcat", *scram, "-L", "-m", "3"], capture_output=True, timeout=EVENTUALLY)
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
    p = Producer({**cluster.scram("admin", ADMIN_PASSWORD),
                  "message.timeout.ms": EVENTUALLY * 1000})
    p.produce(topic, b"before")
    assert p.flush(EVENTUALLY + 30) == 0
    # Rotate in place, as a Secret update does: a new key and certificate.
    issue(cluster.pki, "server-next", "/CN=kaas", san="IP:127.0.0.1,DNS:localhost")
    for ext in ("pem", "key"):
        os.replace(cluster.pem(f"server-next.{ext}"), cluster.pem(f"server.{ext}"))
    assert eventually(lambda: served_serial(port) != before)
    # The producer's connections, opened before, still work.
    p.produce(topic, b"after")
    assert p.flush(EVENTUALLY + 30) == 0
    c = Consumer({**cluster.scram("admin", ADMIN_PASSWORD), "group.id": "rot",
                  "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, 0, 0)])
    got = []
    deadline = time.monotonic() + EVENTUALLY
    while len(got) < 2 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got.append(m.value())
    c.close()
    assert got == [b"before", b"after"], f"read {got} in {EVENTUALLY} s"
