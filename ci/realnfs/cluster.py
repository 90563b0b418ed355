"""A real-NFS kaas cluster of QEMU guests: one NFS server host (kernel
nfsd, NFSv4.1/4.2, a `sync` export of ext4 on its own virtual disk) and
client hosts that mount the export with deploy/README.md's options and run
a kaas broker each from the release binary. Runs inside the network
namespace `ci/realnfs/run` made (a bridge at 10.77.0.1 with one tap per
guest), so Kafka clients in this process reach the brokers and nothing
touches the machine's own interfaces.

The guests boot the Debian kernel on the host's own root (initramfs.sh,
guest.sh) and obey agent.py; a power loss is kill -9 of a guest's QEMU."""

import glob
import json
import os
import re
import shutil
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

NET = "10.77.0"
SERVER_IP = f"{NET}.2"
MOUNT_OPTIONS = "vers=4.1,hard,lookupcache=positive,acdirmax=5"
AGENT_PORT = 7000
KAFKA_PORT = 9092
HEALTH_PORT = 9644
BOOT_DEADLINE = 300  # four guests under software emulation: ~50 s here


def kernel():
    """The newest Debian kernel in /boot and its version."""
    images = sorted(glob.glob("/boot/vmlinuz-*-amd64"))
    if not images:
        raise RuntimeError("no /boot/vmlinuz-*-amd64: run ci/realnfs/install.sh")
    path = images[-1]
    return path, os.path.basename(path)[len("vmlinuz-"):]


def accel():
    """Hardware virtualization where it works, else software emulation.
    `REALNFS_ACCEL=kvm|tcg` decides; the default is tcg, since /dev/kvm on
    machines of this kind is paravirtual and Debian's kernel hangs on it."""
    if os.environ.get("REALNFS_ACCEL") == "kvm":
        return ["-accel", "kvm", "-cpu", "host"]
    return ["-accel", "tcg", "-cpu", "max"]


class Host:
    def __init__(self, cluster, name, ip, role, tap, mac, broker_id=None):
        self.cluster, self.name, self.ip, self.role = cluster, name, ip, role
        self.tap, self.mac, self.broker_id = tap, mac, broker_id
        self.proc = None
        self.boots = 0

    @property
    def kafka(self):
        return f"{self.ip}:{KAFKA_PORT}"

    def launch(self):
        c = self.cluster
        image, _ = c.kernel
        append = (f"console=ttyS0 panic=-1 quiet kaas.role={self.role} kaas.ip={self.ip} "
                  f"kaas.name={self.name} kaas.dir={c.root} ")
        if self.role == "server":
            append += f"kaas.mkfs={int(self.boots == 0)} "
            if c.lease is not None:
                append += f"kaas.lease={c.lease} "
            if c.grace is not None:
                append += f"kaas.grace={c.grace} "
        else:
            # Each client its own NFSv4 identity, or the server takes the
            # clients for one.
            append += f"nfs.nfs4_unique_id=kaas-{self.name} "
        args = ["qemu-system-x86_64", *accel(), "-smp", "1", "-m", "1536",
                "-display", "none", "-monitor", "none", "-no-reboot", "-nodefaults",
                "-serial", "stdio",
                "-kernel", image, "-initrd", c.initrd, "-append", append,
                "-virtfs", "local,path=/,mount_tag=hostroot,security_model=none,"
                           "readonly=on,multidevs=remap",
                "-virtfs", f"local,path={c.logs},mount_tag=logs,security_model=none",
                "-netdev", f"tap,id=n0,ifname={self.tap},script=no,downscript=no",
                "-device", f"virtio-net-pci,netdev=n0,mac={self.mac}"]
        if self.role == "server":
            args += ["-drive", f"file={c.export_image},if=virtio,format=raw,cache=none,aio=threads"]
        console = open(os.path.join(c.logs, f"{self.name}.console"), "ab")
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=console,
                                     stderr=console, start_new_session=True)
        console.close()
        self.boots += 1

    def power_off(self):
        """Power loss: the whole host stops at once (kill -9 of its QEMU)."""
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def sh(self, cmd, timeout=60):
        """Runs `cmd` on the host; (rc, stdout, stderr)."""
        a = self._ask({"sh": cmd, "timeout": timeout}, timeout + 10)
        return a["rc"], a["out"], a["err"]

    def must(self, cmd, timeout=60):
        rc, out, err = self.sh(cmd, timeout)
        if rc != 0:
            raise RuntimeError(f"{self.name}: `{cmd}` exited {rc}: {err.strip() or out.strip()}")
        return out

    def spawn(self, cmd, log):
        """Starts `cmd` in the background, its output appended to `log`
        (a path in the guest, e.g. under /logs); its pid."""
        return self._ask({"sh": cmd, "bg": log}, 30)["pid"]

    def _ask(self, req, timeout):
        with socket.create_connection((self.ip, AGENT_PORT), timeout=timeout) as s:
            s.sendall(json.dumps(req).encode() + b"\n")
            f = s.makefile("rb")
            line = f.readline()
        if not line:
            raise RuntimeError(f"{self.name}: the agent closed the connection")
        return json.loads(line)

    def wait_agent(self, deadline):
        while True:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"{self.name}: QEMU exited with {self.proc.returncode}; "
                                   f"see {self.cluster.logs}/{self.name}.console")
            try:
                self.sh("true", timeout=10)
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.name}: no agent at {self.ip} after boot; see "
                                       f"{self.cluster.logs}/{self.name}.console and .guest.log")
                time.sleep(1)


class Cluster:
    """`Cluster(root, clients=3)`; `up()`, then the hosts and brokers;
    `down()` leaves no guest behind."""

    def __init__(self, root, clients=3, export_mib=2048, lease=None, grace=None):
        self.root = os.path.abspath(root)
        # nfsd's lease and grace time in seconds; None keeps its defaults.
        self.lease, self.grace = lease, grace
        self.work = os.path.join(self.root, "target", "realnfs")
        self.logs = os.path.join(self.work, "logs")
        self.kernel = kernel()
        self.initrd = os.path.join(self.work, f"initrd-{self.kernel[1]}.img")
        self.export_image = os.path.join(self.work, "export.img")
        self.export_mib = export_mib
        self.kaas = os.path.join(self.root, "target", "release", "kaas")
        self.broker_args = ""
        self.server = Host(self, "nfs-server", SERVER_IP, "server", "tap0", "52:54:00:77:00:02")
        self.clients = [Host(self, f"kaas-{i}", f"{NET}.{11 + i}", "client", f"tap{i + 1}",
                             f"52:54:00:77:00:{11 + i:02x}", broker_id=i)
                        for i in range(clients)]

    @property
    def hosts(self):
        return [self.server, *self.clients]

    def bootstrap(self):
        return ",".join(h.kafka for h in self.clients)

    def prepare(self):
        shutil.rmtree(self.logs, ignore_errors=True)
        os.makedirs(self.logs)
        script = os.path.join(self.root, "ci", "realnfs", "initramfs.sh")
        if (not os.path.exists(self.initrd)
                or os.path.getmtime(self.initrd) < os.path.getmtime(script)):
            subprocess.run(["bash", script, self.initrd, self.kernel[1]], check=True)
        if os.path.exists(self.export_image):
            os.remove(self.export_image)
        subprocess.run(["truncate", "-s", f"{self.export_mib}M", self.export_image], check=True)

    def up(self):
        """Boots every host, mounts the export on the clients and starts a
        broker on each; seconds it took."""
        began = time.monotonic()
        self.up_without_brokers()
        for c in self.clients:
            self.start_broker(c)
        for c in self.clients:
            self.wait_broker(c)
        return time.monotonic() - began

    def up_without_brokers(self):
        """Boots every host and mounts the export on the clients."""
        self.prepare()
        for h in self.hosts:
            h.launch()
        deadline = time.monotonic() + BOOT_DEADLINE
        for h in self.hosts:
            h.wait_agent(deadline)
        for c in self.clients:
            self.mount(c)

    def boot(self, host):
        """Powers a host on again (after power_off) and waits for its
        agent; a client also mounts the export and starts its broker."""
        host.launch()
        host.wait_agent(time.monotonic() + BOOT_DEADLINE)
        if host.role == "client":
            self.mount(host)
            self.start_broker(host)
            self.wait_broker(host)

    def mount(self, client, deadline_s=120):
        deadline = time.monotonic() + deadline_s
        while True:
            rc, _, err = client.sh(
                f"mountpoint -q /mnt/kaas || mount -t nfs4 -o {MOUNT_OPTIONS} "
                f"{SERVER_IP}:/ /mnt/kaas", timeout=60)
            if rc == 0:
                client.sh(TRACE_ON, timeout=30)
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{client.name}: mount failed: {err.strip()}")
            time.sleep(2)

    def start_broker(self, client, extra=""):
        cmd = (f"exec env KAAS_LOG=info {self.kaas} --data-dir /mnt/kaas "
               f"--broker-id {client.broker_id} --listen {client.kafka} "
               f"--health-listen {client.ip}:{HEALTH_PORT} {self.broker_args} {extra}")
        return client.spawn(cmd, f"/logs/broker-{client.broker_id}.log")

    def kill_broker(self, client):
        """kill -9 of the broker process (its host lives on)."""
        client.sh("pkill -9 -x kaas; true")

    def broker_running(self, client):
        return client.proc is not None and client.sh("pgrep -x kaas", timeout=20)[0] == 0

    def wait_broker(self, client, deadline_s=120):
        deadline = time.monotonic() + deadline_s
        while True:
            try:
                socket.create_connection((client.ip, KAFKA_PORT), timeout=2).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"broker {client.broker_id} did not listen; see "
                                       f"{self.logs}/broker-{client.broker_id}.log")
                time.sleep(1)

    def fsck(self, via=None):
        """`kaas fsck` of the export from a client host: (exit code, report)."""
        host = via or next(c for c in self.clients if c.proc is not None)
        rc, out, err = host.sh(f"{self.kaas} fsck --data-dir /mnt/kaas", timeout=600)
        return rc, out + err

    def delegations(self):
        """{client name: delegations the server holds for it}, from nfsd's
        own table (/proc/fs/nfsd/clients/*/). kaas opens its files with
        O_DIRECT so that it is handed none; a delegation held by a host
        that loses power stalls every other host's rename or removal of
        that file for the server's lease."""
        out = self.server.must(
            "for d in /proc/fs/nfsd/clients/*/; do "
            "echo \"$(sed -n 's/^name: .*kaas-\\(kaas-[0-9]*\\).*/\\1/p' $d/info) "
            "$(grep -c 'type: deleg' $d/states)\"; done")
        held = {}
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 2:
                held[parts[0]] = held.get(parts[0], 0) + int(parts[1])
        return held

    def evidence(self, label):
        """Saves what each live client's kernel recorded since the last
        call (TRACE_ON's NFS events) and which files its broker holds open
        under cluster/ or deleted, as logs/evidence-<host>-<label>.txt; the
        files of a round with a stale file handle say whether an open was
        served from cached state and by whom it was held."""
        def save(c):
            rc, out, _ = c.sh(EVIDENCE, timeout=60)
            if rc == 0 and out.strip():
                with open(os.path.join(self.logs, f"evidence-{c.name}-{label}.txt"), "w") as f:
                    f.write(out)

        # Side by side: formatting a guest's trace buffer takes seconds
        # under emulation, and one host after another was a round's
        # largest cost.
        with ThreadPoolExecutor(len(self.clients)) as pool:
            list(pool.map(save, [c for c in self.clients if c.proc is not None]))

    def down(self):
        for h in self.hosts:
            h.power_off()

    def broker_log(self, client):
        path = os.path.join(self.logs, f"broker-{client.broker_id}.log")
        try:
            with open(path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""


# The NFS client's events that tell a stale name from a stale open: an
# open served from state the client already held (no OPEN sent), opens,
# GETATTRs and revalidations that failed, and the state manager's
# recovery after a server restart or a lease lost. Best effort: a kernel
# without them runs the campaign all the same.
TRACE_EVENTS = [("nfs4/nfs4_cached_open", ""), ("nfs4/nfs4_open_file", "error != 0"),
                ("nfs4/nfs4_getattr", "error != 0"), ("nfs4/nfs4_open_reclaim", ""),
                ("nfs4/nfs4_open_expired", ""), ("nfs4/nfs4_state_mgr_failed", ""),
                ("nfs4/nfs4_close", "error != 0"),
                ("nfs/nfs_revalidate_inode_exit", "error != 0")]
TRACE_ON = ("T=/sys/kernel/tracing; mountpoint -q $T || mount -t tracefs tracefs $T; "
            "echo 8192 > $T/buffer_size_kb; " + "".join(
                f"if [ -d $T/events/{e} ]; then "
                + (f"echo '{f}' > $T/events/{e}/filter; " if f else "")
                + f"echo 1 > $T/events/{e}/enable; fi; " for e, f in TRACE_EVENTS) + "true")
# Opens of names that do not exist and the grace period's refusals are
# every round's normal traffic; left out.
EVIDENCE = ("T=/sys/kernel/tracing; grep -v '^#' $T/trace 2>/dev/null "
            "| grep -vE 'error=-2 [(]ENOENT[)]|error=-10013 [(]GRACE[)]'; echo > $T/trace; "
            "for p in $(pgrep -x kaas); do ls -l /proc/$p/fd 2>/dev/null "
            "| grep -E 'cluster/|deleted' | sed 's/^/kaas holds: /'; done; true")


def mount_line(client):
    """The export's line of the client's /proc/mounts (its options as the
    kernel applied them)."""
    out = client.must("grep ' /mnt/kaas ' /proc/mounts")
    return re.sub(r"\s+", " ", out.strip())


def check_setup(cluster):
    """Each client mounted the export as deploy/README.md says, each
    broker saw NFS, and the server delegated no file to any broker host
    (files opened with O_DIRECT ask for none; a delegation held by a host
    that loses power stalls the others' renames for the server's lease)."""
    for c in cluster.clients:
        line = mount_line(c)
        assert "vers=4.1" in line and "lookupcache=pos" in line, line
        log = cluster.broker_log(c)
        assert "data directory on NFS" in log, f"broker {c.broker_id} saw no NFS mount:\n{log}"
    held = cluster.delegations()
    assert set(held) == {c.name for c in cluster.clients}, held
    assert not any(held.values()), f"the server delegated files to brokers: {held}"
    print(f"realnfs: mount {mount_line(cluster.clients[0])}; delegations held: {held}",
          flush=True)
