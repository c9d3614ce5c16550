#!/usr/bin/env python3
"""deploy/ssh_cluster.sh for real: real sshd hosts, a real cluster, real requests.

Five network namespaces on one bridge (tests/deploy/deploy_hosts.py): node1 runs
the coordinator, node2 and node3 one rank each of a TP=2 target group (Gloo
between them), node4 the draft pool; `login` is where the launcher and this
test's HTTP client run. Each node runs Debian's sshd with a host key and an
authorized key made here. The launcher is driven as a user would:
start, HTTP requests (equal to `splitspec generate --drafter none`, i.e. plain
greedy), status, scale --draft +1 and -1, stop. Afterwards no process is left
on any node but its sshd. The API key travels on ssh's stdin: it must be on no
process's command line, and requests without it are refused.

Usage: ssh_cluster_test.py --bin-dir BUILD/bin --tiny-model-tool BUILD/tests/deploy_tiny_model
Exit 0 pass, 1 fail, 77 skipped (see deploy_hosts.skip).
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploy_hosts as dh  # noqa: E402

NODES = ["node1", "node2", "node3", "node4"]
API_KEY = "deploy-test-key-7f3a"
PROMPTS = ["Hello world, the", "the theory of the", "one two three four one two three"]
MAX_TOKENS = 24


def write_config(path, workdir, keys, target, draft, hosts):
    with open(path, "w") as f:
        f.write(f"""# Written by tests/deploy/ssh_cluster_test.py.
[cluster]
run_dir = "{workdir}/run"

[coordinator]
host = "node1"
control = "tcp://{hosts.address('node1')}:5555"
http = "{hosts.address('node1')}:8000"
api_key_env = "SPLITSPEC_TEST_API_KEY"

[security]
keys_dir = "{keys}"
# The group spans node2 and node3 over the test's private network namespaces.
tp_network = "trusted"

[models]
target = "{target}"
draft = "{draft}"

[[target_group]]
name = "tp"
tp = 2
hosts = ["node2", "node3"]
threads = 1
data_endpoint = "tcp://{hosts.address('node2')}:*"

[[draft_pool]]
name = "drafts"
count = 1
drafter = "model"
k = 4
threads = 1
host = "node4"
""")


def launcher(hosts, sshd, bin_dir, config, *action, timeout=200, env_extra=None):
    env = dict(os.environ, SPLITSPEC_BIN=bin_dir, SSH_OPTS=sshd.ssh_opts(), START_TIMEOUT_S="90",
               STOP_TIMEOUT_S="20")
    env.update(env_extra or {})
    argv = hosts.exec_prefix("login") + [os.path.join(dh.ROOT, "deploy", "ssh_cluster.sh"), config] + list(action)
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout, env=env)
    dh.log(f"$ ssh_cluster.sh {' '.join(action)}  (exit {r.returncode})\n{r.stdout}")
    return r


def node_processes(hosts):
    """Processes other than sshd (and its session children) on each node."""
    out = {}
    for name in NODES:
        lines = [c for c in dh.cmdlines(hosts.pids(name)) if "sshd" not in c and c.strip()]
        if lines:
            out[name] = lines
    return out


def check_curve(hosts, bin_dir, workdir, keys, cmdlines):
    """Every process loaded its CURVE key from the key files; no secret is on a command line;
    a peer without the cluster's keys (plaintext, or another keypair) gets no answer."""
    for name in ("coordinator", "tp-rank0", "tp-rank1", "drafts-0"):
        with open(os.path.join(workdir, "run", f"{name}.log")) as f:
            log = f.read()
        dh.check("CURVE on: " in log and "INSECURE" not in log, f"{name} does not run with CURVE:\n{log}")
    for role in ("coordinator", "target", "draft", "client", "admin"):
        with open(os.path.join(keys, f"{role}.key")) as f:
            secret = f.read().strip()
        dh.check(not any(secret in c for c in cmdlines), f"the {role} secret key is on a command line")
    status = [os.path.join(bin_dir, "splitspec"), "status", "--coordinator",
              f"tcp://{hosts.address('node1')}:5555", "--timeout-ms", "2000"]
    other = os.path.join(workdir, "other-keys")
    dh.run([os.path.join(bin_dir, "splitspec"), "keygen", "--out", other, "--name", "all"])
    for what, env in (("a plaintext peer", {"SPLITSPEC_SECURITY": "none"}),
                      ("a peer with another cluster's keys", {"SPLITSPEC_KEYS": other}),
                      ("the admin key", {"SPLITSPEC_KEYS": keys})):
        clean = {k: v for k, v in os.environ.items() if k not in ("SPLITSPEC_KEYS", "SPLITSPEC_SECURITY")}
        r = dh.run(hosts.exec_prefix("login") + status, check_rc=False, env=dict(clean, **env))
        if what == "the admin key":
            dh.check(r.returncode == 0 and '"worker_name":"tp-rank0"' in r.stdout, f"{what}: {r.stdout}")
        else:
            dh.check(r.returncode != 0 and "tp-rank0" not in r.stdout, f"{what} got the status: {r.stdout}")
    dh.log("CURVE: every process keyed, no secret on a command line, keyless peers refused")


def test(args, workdir):
    hosts = dh.Hosts("10.78.0", NODES + ["login"], workdir)
    sshd = None
    try:
        sshd = dh.Sshd(hosts, NODES, workdir)
        sshd.wait_ready("login", NODES)
        target, draft = dh.write_tiny_models(args.tiny_model_tool, workdir)
        keys = dh.make_keys(args.bin_dir, workdir)
        config = os.path.join(workdir, "cluster.toml")
        write_config(config, workdir, keys, target, draft, hosts)
        expected = {p: dh.plain_greedy(args.bin_dir, target, p, MAX_TOKENS) for p in PROMPTS}
        key_env = {"SPLITSPEC_TEST_API_KEY": API_KEY}

        r = launcher(hosts, sshd, args.bin_dir, config, "start", env_extra=key_env)
        dh.check(r.returncode == 0, "start failed")
        procs = node_processes(hosts)
        dh.log(f"processes per node after start: {procs}")
        dh.check(any("splitspec-coordinator" in c for c in procs.get("node1", [])), "no coordinator on node1")
        for node, rank in (("node2", 0), ("node3", 1)):
            dh.check(any(f"--tp-rank {rank}" in c for c in procs.get(node, [])), f"no TP rank {rank} on {node}")
        dh.check(any("splitspec-draft-worker" in c for c in procs.get("node4", [])), "no draft worker on node4")
        all_cmdlines = [c for cs in procs.values() for c in cs]
        dh.check(not any(API_KEY in c for c in all_cmdlines), "the API key is on a command line")
        check_curve(hosts, args.bin_dir, workdir, keys, all_cmdlines)

        dh.enter_namespace(hosts.ns("login"))
        base = f"http://{hosts.address('node1')}:8000"
        dh.wait_http(base)
        status, reply = dh.http("POST", f"{base}/v1/completions", {"prompt": "x", "max_tokens": 2})
        dh.check(status == 401, f"a request without the API key got HTTP {status}: {reply}")
        for prompt in PROMPTS:
            got = dh.completion(base, prompt, MAX_TOKENS, api_key=API_KEY)
            dh.check(got == expected[prompt], f"prompt {prompt!r}: cluster {got!r} != plain greedy {expected[prompt]!r}")
        dh.log(f"{len(PROMPTS)} requests equal plain greedy ({MAX_TOKENS} tokens each)")

        r = launcher(hosts, sshd, args.bin_dir, config, "status")
        dh.check(r.returncode == 0, "status failed")
        for line in ("coordinator on node1: running", "tp-rank0 on node2: running", "tp-rank1 on node3: running",
                     "drafts-0 on node4: running"):
            dh.check(line in r.stdout, f"status lacks '{line}'")
        dh.check("tp-rank0" in r.stdout.split("registered with the coordinator:")[-1], "status: tp-rank0 not registered")

        r = launcher(hosts, sshd, args.bin_dir, config, "scale", "--draft", "+1")
        dh.check(r.returncode == 0, "scale --draft +1 failed")
        dh.check('"event":"registered"' in r.stdout, "scale +1 printed no registered event")
        dh.check(len([c for c in node_processes(hosts).get("node4", []) if "splitspec-draft-worker" in c]) == 2,
                 "node4 does not run 2 draft workers after scale +1")
        for prompt in PROMPTS:
            dh.check(dh.completion(base, prompt, MAX_TOKENS, api_key=API_KEY) == expected[prompt],
                     f"after scale +1, prompt {prompt!r} differs from plain greedy")
        r = launcher(hosts, sshd, args.bin_dir, config, "status")
        dh.check("(scaled): running" in r.stdout, "status does not list the scaled worker as running")

        r = launcher(hosts, sshd, args.bin_dir, config, "scale", "--draft", "-1")
        dh.check(r.returncode == 0, "scale --draft -1 failed")
        dh.check('"event":"left"' in r.stdout, "scale -1 printed no left event")
        deadline = time.time() + 30
        while len([c for c in node_processes(hosts).get("node4", []) if "splitspec-draft-worker" in c]) != 1:
            dh.check(time.time() < deadline, "a drained draft worker did not exit within 30 s")
            time.sleep(0.2)
        for prompt in PROMPTS:
            dh.check(dh.completion(base, prompt, MAX_TOKENS, api_key=API_KEY) == expected[prompt],
                     f"after scale -1, prompt {prompt!r} differs from plain greedy")

        r = launcher(hosts, sshd, args.bin_dir, config, "stop")
        dh.check(r.returncode == 0, "stop failed")
        for name in ("coordinator", "tp-rank0", "tp-rank1", "drafts-0"):
            dh.check(f"{name} on " in r.stdout and "stopped" in r.stdout, f"stop did not report {name}")
        left = node_processes(hosts)
        dh.check(not left, f"processes left after stop: {left}")
        r = launcher(hosts, sshd, args.bin_dir, config, "status")
        dh.check(r.returncode != 0 and "coordinator on node1: not running" in r.stdout,
                 "status after stop should say not running and exit non-zero")
        dh.log("PASS: ssh launcher started, served, scaled and stopped a 4-host cluster")
    finally:
        if sshd is not None:
            sshd.stop()
        hosts.remove()


def main():
    return dh.run_test(test, "ssh", {"/usr/sbin/sshd": "openssh-server",
                                             "/usr/bin/ssh": "openssh-client",
                                             "/usr/bin/unshare": "util-linux"})


if __name__ == "__main__":
    sys.exit(main())
