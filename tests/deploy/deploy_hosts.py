"""Shared pieces of the deploy tests (tests/deploy/*_test.py): "hosts" as network
namespaces with real sshd, packages, HTTP against the coordinator, plain greedy.

Hosts: one switch namespace holding a bridge, one namespace per host with an
address on it (SUBNET.N/24), its own host name (sshd runs in its own UTS
namespace) and an /etc/hosts (ip netns exec bind-mounts /etc/netns/NS/hosts),
so every host resolves the others by name, as on a real cluster. Traffic
stays on the bridge; the machine's own namespace is not touched.
Namespaces are named sdt-<pid>-<host>; those of a run whose process is gone
are removed first (a run killed by its timeout leaves them behind).
"""
import argparse
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
IP = "/usr/sbin/ip"
PREFIX = "sdt-"
SKIP = 77


def log(msg):
    print(msg, flush=True)


def skip(reason):
    """Skips (ctest SKIP_RETURN_CODE 77), or fails where skipping is not allowed (CI)."""
    if os.environ.get("SPLITSPEC_REQUIRE_DEPLOY_TESTS") == "1":
        log(f"FAIL (SPLITSPEC_REQUIRE_DEPLOY_TESTS=1 forbids skipping): {reason}")
        sys.exit(1)
    log(f"SKIPPED: {reason}")
    sys.exit(SKIP)


class TestFailure(Exception):
    pass


def check(condition, message):
    if not condition:
        raise TestFailure(message)


def run(argv, timeout=60, check_rc=True, **kwargs):
    """Runs argv; returns CompletedProcess with text output (stderr merged)."""
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout,
                       **kwargs)
    if check_rc and r.returncode != 0:
        raise TestFailure(f"{' '.join(argv)} exited {r.returncode}:\n{r.stdout}")
    return r


def need_root_and_ip():
    if os.geteuid() != 0:
        skip("needs root (network namespaces); CI runs as root")
    if not os.access(IP, os.X_OK):
        skip(f"{IP} not found (Debian package iproute2)")


def ensure_binaries(binaries):
    """binaries: {path: debian package}. Installs missing ones with
    deploy/install_test_deps.sh (apt-get); skips naming the package when it cannot."""
    missing = {p: pkg for p, pkg in binaries.items() if not os.access(p, os.X_OK)}
    if not missing:
        return
    packages = sorted(set(missing.values()))
    log(f"installing {' '.join(packages)} (missing {' '.join(missing)}) with deploy/install_test_deps.sh")
    r = subprocess.run([os.path.join(ROOT, "deploy", "install_test_deps.sh")], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=900)
    still = {p: pkg for p, pkg in binaries.items() if not os.access(p, os.X_OK)}
    if still:
        skip(f"needs the Debian package(s) {' '.join(sorted(set(still.values())))} "
             f"({' '.join(still)} missing; deploy/install_test_deps.sh exited {r.returncode}:\n{r.stdout[-2000:]})")


def ns_pids(ns):
    r = run([IP, "netns", "pids", ns], check_rc=False)
    return [int(x) for x in r.stdout.split() if x.isdigit()]


def remove_namespace(ns):
    for pid in ns_pids(ns):
        if pid > 1 and pid != os.getpid():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    run([IP, "netns", "del", ns], check_rc=False)
    shutil.rmtree(f"/etc/netns/{ns}", ignore_errors=True)


def remove_leftovers():
    r = run([IP, "netns", "list"], check_rc=False)
    for line in r.stdout.splitlines():
        name = line.split(" ")[0]
        if not name.startswith(PREFIX):
            continue
        try:
            pid = int(name[len(PREFIX):].split("-")[0])
        except ValueError:
            continue
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
            continue  # a run in progress
        except ProcessLookupError:
            pass
        remove_namespace(name)


class Hosts:
    """Network-namespace hosts on one bridge; remove() kills everything in them."""

    def __init__(self, subnet, names, workdir, extra_hosts=None):
        self.subnet = subnet          # e.g. "10.78.0"
        self.tag = f"{PREFIX}{os.getpid()}-"
        self.workdir = workdir
        self.made = []
        self.octets = {}
        remove_leftovers()
        sw = self.ns("sw")
        self._ip(["netns", "add", sw], made=sw)
        self._ip(["-n", sw, "link", "add", "br0", "type", "bridge"])
        self._ip(["-n", sw, "link", "set", "br0", "up"])
        for i, name in enumerate(names, start=1):
            self.add(name, i)
        hosts_file = "127.0.0.1 localhost\n" + "".join(f"{self.address(n)} {n}\n" for n in names)
        # Names with an address on the bridge where nothing answers (unreachable hosts).
        hosts_file += "".join(f"{addr} {n}\n" for n, addr in (extra_hosts or {}).items())
        for name in names:
            os.makedirs(f"/etc/netns/{self.ns(name)}", exist_ok=True)
            with open(f"/etc/netns/{self.ns(name)}/hosts", "w") as f:
                f.write(hosts_file)

    def ns(self, name):
        return self.tag + name

    def address(self, name):
        return f"{self.subnet}.{self.octets[name]}"

    def _ip(self, args, made=None):
        r = run([IP] + args, check_rc=False)
        if made is not None and r.returncode == 0:
            self.made.append(made)
        if r.returncode != 0:
            raise TestFailure(f"ip {' '.join(args)} failed ({r.returncode}): {r.stdout}")

    def add(self, name, octet):
        ns, sw, port = self.ns(name), self.ns("sw"), f"v{octet}"
        self.octets[name] = octet
        self._ip(["netns", "add", ns], made=ns)
        self._ip(["-n", ns, "link", "set", "lo", "up"])
        self._ip(["-n", sw, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns])
        self._ip(["-n", sw, "link", "set", port, "master", "br0", "up"])
        self._ip(["-n", ns, "addr", "add", f"{self.address(name)}/24", "dev", "eth0"])
        self._ip(["-n", ns, "link", "set", "eth0", "up"])

    def exec_prefix(self, name):
        """Runs a command on host `name` (its network namespace and /etc/hosts)."""
        return [IP, "netns", "exec", self.ns(name)]

    def pids(self, name):
        return ns_pids(self.ns(name))

    def remove(self):
        for ns in reversed(self.made):
            remove_namespace(ns)
        self.made = []


def enter_namespace(ns):
    """Moves this (single-threaded) process's network namespace to `ns`, for HTTP."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(f"/var/run/netns/{ns}", os.O_RDONLY)
    try:
        if libc.setns(fd, 0x40000000) != 0:  # CLONE_NEWNET
            raise TestFailure(f"setns {ns}: errno {ctypes.get_errno()}")
    finally:
        os.close(fd)


class Sshd:
    """A real sshd on each host: throw-away host keys, one authorized client key."""

    def __init__(self, hosts, names, workdir):
        self.hosts = hosts
        self.dir = os.path.join(workdir, "ssh")
        os.makedirs(self.dir, mode=0o700)
        self.key = os.path.join(self.dir, "id_ed25519")
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "splitspec-deploy-test", "-f", self.key])
        with open(self.key + ".pub") as f, open(os.path.join(self.dir, "authorized_keys"), "w") as out:
            out.write(f.read())
        os.chmod(os.path.join(self.dir, "authorized_keys"), 0o600)
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege-separation directory
        self.processes = []
        known = []
        for name in names:
            host_key = os.path.join(self.dir, f"host_{name}")
            run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", host_key])
            with open(host_key + ".pub") as f:
                known.append(f"{name},{hosts.address(name)} {' '.join(f.read().split()[:2])}\n")
            conf = os.path.join(self.dir, f"sshd_{name}.conf")
            with open(conf, "w") as f:
                f.write(f"ListenAddress {hosts.address(name)}:22\nHostKey {host_key}\n"
                        f"PidFile {self.dir}/sshd_{name}.pid\nAuthorizedKeysFile {self.dir}/authorized_keys\n"
                        "PermitRootLogin prohibit-password\nPubkeyAuthentication yes\nPasswordAuthentication no\n"
                        "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nLogLevel VERBOSE\n")
            log_path = os.path.join(self.dir, f"sshd_{name}.log")
            # Its own UTS namespace: `hostname` (and Gloo's address lookup) give the host's name.
            argv = hosts.exec_prefix(name) + ["unshare", "--uts", "sh", "-c",
                                              f"hostname {name} && exec /usr/sbin/sshd -D -e -f {conf}"]
            self.processes.append(subprocess.Popen(argv, stdout=open(log_path, "w"), stderr=subprocess.STDOUT,
                                                   start_new_session=True))
        with open(os.path.join(self.dir, "known_hosts"), "w") as f:
            f.writelines(known)
        self.config = os.path.join(self.dir, "ssh_config")
        with open(self.config, "w") as f:
            f.write(f"Host *\n  User root\n  IdentityFile {self.key}\n  IdentitiesOnly yes\n"
                    f"  UserKnownHostsFile {self.dir}/known_hosts\n  StrictHostKeyChecking yes\n"
                    "  BatchMode yes\n  ConnectTimeout 5\n  LogLevel ERROR\n")

    def ssh_opts(self):
        return f"-F {self.config}"

    def wait_ready(self, client, names, timeout_s=30):
        deadline = time.time() + timeout_s
        for name in names:
            while True:
                r = run(self.hosts.exec_prefix(client) + ["ssh", "-F", self.config, name, "hostname"],
                        check_rc=False, timeout=30)
                if r.returncode == 0 and r.stdout.strip() == name:
                    break
                if time.time() > deadline:
                    with open(os.path.join(self.dir, f"sshd_{name}.log")) as f:
                        raise TestFailure(f"sshd on {name} not reachable: {r.stdout}\nsshd log:\n{f.read()}")
                time.sleep(0.2)

    def stop(self):
        for p in self.processes:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGTERM)
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()


def write_tiny_models(tool, workdir):
    """The TP=2-shardable tiny target, and a draft with other weights (same vocabulary)."""
    target = os.path.join(workdir, "tiny-target.gguf")
    draft = os.path.join(workdir, "tiny-draft.gguf")
    run([tool, target, "1"])
    run([tool, draft, "7"])
    return target, draft


def make_keys(bin_dir, workdir):
    """CURVE keys for every role (`splitspec keygen`), in a folder every "host" sees."""
    keys = os.path.join(workdir, "keys")
    run([os.path.join(bin_dir, "splitspec"), "keygen", "--out", keys, "--name", "all"])
    return keys


def plain_greedy(bin_dir, model, prompt, max_tokens):
    """What `splitspec generate --drafter none` (the target alone) decodes."""
    r = run([os.path.join(bin_dir, "splitspec"), "generate", "--target", model, "--drafter", "none", "--prompt",
             prompt, "--max-tokens", str(max_tokens), "--threads", "1", "--json"], timeout=120)
    lines = [line for line in r.stdout.splitlines() if line.startswith("{")]
    check(len(lines) == 1, f"splitspec generate printed no JSON line:\n{r.stdout}")
    return json.loads(lines[0])["text"]


def http(method, url, body=None, api_key=None, timeout=60):
    """Returns (status, parsed JSON or text)."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    request.add_header("Content-Type", "application/json")
    if api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            raw = response.read().decode()
            status = response.status
    except urllib.error.HTTPError as e:
        raw, status = e.read().decode(), e.code
    try:
        return status, json.loads(raw)
    except ValueError:
        return status, raw


def served_model(base_url, api_key=None):
    status, reply = http("GET", f"{base_url}/v1/models", api_key=api_key)
    check(status == 200, f"GET {base_url}/v1/models: HTTP {status}: {reply}")
    return reply["data"][0]["id"]


def completion(base_url, prompt, max_tokens, api_key=None):
    status, reply = http("POST", f"{base_url}/v1/completions",
                         {"model": served_model(base_url, api_key), "prompt": prompt, "max_tokens": max_tokens,
                          "temperature": 0},
                         api_key=api_key)
    check(status == 200, f"POST {base_url}/v1/completions: HTTP {status}: {reply}")
    return reply["choices"][0]["text"]


def wait_http(base_url, timeout_s=60):
    deadline = time.time() + timeout_s
    while True:
        try:
            status, _ = http("GET", f"{base_url}/health", timeout=5)
            if status < 500:
                return
        except OSError:
            pass
        if time.time() > deadline:
            raise TestFailure(f"{base_url} did not answer within {timeout_s}s")
        time.sleep(0.3)


def cmdlines(pids):
    out = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                out.append(f.read().replace(b"\0", b" ").decode(errors="replace"))
        except OSError:
            pass
    return out


def run_test(test, name, binaries, log_suffixes=(".log",), skip_prefix=None):
    """A deploy test's main: parses --bin-dir / --tiny-model-tool, checks root and the
    `binaries` ({path: Debian package}), runs test(args, workdir) in a fresh work folder, and on
    failure prints the error and the tail of every log in that folder. Returns the exit code."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin-dir", required=True)
    parser.add_argument("--tiny-model-tool", required=True)
    args = parser.parse_args()
    args.bin_dir = os.path.abspath(args.bin_dir)
    args.tiny_model_tool = os.path.abspath(args.tiny_model_tool)
    need_root_and_ip()
    ensure_binaries(binaries)
    workdir = tempfile.mkdtemp(prefix=f"splitspec-deploy-{name}-")
    os.chmod(workdir, 0o755)
    try:
        test(args, workdir)
    except (TestFailure, subprocess.TimeoutExpired) as e:
        log(f"FAIL: {e}")
        for root, _, files in os.walk(workdir):
            for f in sorted(files):
                if f.endswith(log_suffixes) and not (skip_prefix and f.startswith(skip_prefix)):
                    with open(os.path.join(root, f), errors="replace") as fh:
                        log(f"---- {os.path.join(root, f)}\n{fh.read()[-3000:]}")
        return 1
    return 0

