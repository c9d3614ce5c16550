#!/usr/bin/env python3
"""Failures inside deploy/ssh_cluster.sh are reported, and nothing is left running.

Real sshd hosts in network namespaces (tests/deploy/deploy_hosts.py): node1
(coordinator), node2 (target), `login` (the launcher). Two broken configs:
  1. the draft pool's host, node9, resolves to an address where nothing
     answers: start must name node9 and the log path the worker would have
     had, exit non-zero, and stop the coordinator and target it had started;
  2. the draft pool's model file does not exist, so the draft worker exits at
     start: start must name the worker, its host and its log (with the log's
     last lines, which say what is wrong), exit non-zero, and stop the rest.
After each, no process but sshd is left on any node.

Usage: launch_failure_test.py --bin-dir BUILD/bin --tiny-model-tool BUILD/tests/deploy_tiny_model
Exit 0 pass, 1 fail, 77 skipped.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploy_hosts as dh  # noqa: E402

NODES = ["node1", "node2"]


def write_config(path, workdir, keys, target, draft, draft_host, hosts):
    with open(path, "w") as f:
        f.write(f"""# Written by tests/deploy/launch_failure_test.py.
[cluster]
run_dir = "{workdir}/run"
[coordinator]
host = "node1"
control = "tcp://{hosts.address('node1')}:5555"
http = "{hosts.address('node1')}:8000"
[security]
keys_dir = "{keys}"
[models]
target = "{target}"
[[target_group]]
name = "t"
threads = 1
host = "node2"
data_endpoint = "tcp://{hosts.address('node2')}:*"
[[draft_pool]]
name = "d"
drafter = "model"
draft_model = "{draft}"
host = "{draft_host}"
""")


def launch(hosts, sshd, bin_dir, config, action):
    env = dict(os.environ, SPLITSPEC_BIN=bin_dir, SSH_OPTS=sshd.ssh_opts(), START_TIMEOUT_S="60")
    argv = hosts.exec_prefix("login") + [os.path.join(dh.ROOT, "deploy", "ssh_cluster.sh"), config, action]
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=150, env=env)
    dh.log(f"$ ssh_cluster.sh {action}  (exit {r.returncode})\n{r.stdout}")
    return r


def leftovers(hosts):
    return {n: c for n in NODES
            if (c := [x for x in dh.cmdlines(hosts.pids(n)) if "sshd" not in x and x.strip()])}


def test(args, workdir):
    hosts = dh.Hosts("10.79.0", NODES + ["login"], workdir, extra_hosts={"node9": "10.79.0.99"})
    sshd = None
    try:
        sshd = dh.Sshd(hosts, NODES, workdir)
        sshd.wait_ready("login", NODES)
        target, draft = dh.write_tiny_models(args.tiny_model_tool, workdir)
        keys = dh.make_keys(args.bin_dir, workdir)
        config = os.path.join(workdir, "cluster.toml")
        run_dir = os.path.join(workdir, "run")

        # 1. An unreachable host.
        write_config(config, workdir, keys, target, draft, "node9", hosts)
        r = launch(hosts, sshd, args.bin_dir, config, "start")
        dh.check(r.returncode != 0, "start with an unreachable host exited 0")
        dh.check("cannot reach node9 over ssh (exit 255) to start d-0" in r.stdout,
                 "start did not name the unreachable host node9")
        dh.check(f"node9:{run_dir}/d-0.log" in r.stdout, "start did not name d-0's log path")
        dh.check("coordinator on node1: stopped" in r.stdout and "t on node2: stopped" in r.stdout,
                 "start did not stop what it had started")
        dh.check(not leftovers(hosts), f"processes left after the failed start: {leftovers(hosts)}")

        # 2. A process that dies at start (its model file does not exist).
        missing = os.path.join(workdir, "no-such-draft.gguf")
        write_config(config, workdir, keys, target, missing, "node2", hosts)
        r = launch(hosts, sshd, args.bin_dir, config, "start")
        dh.check(r.returncode != 0, "start with a missing draft model exited 0")
        dh.check(f"d-0 on node2 is not running (dead); its log: node2:{run_dir}/d-0.log" in r.stdout,
                 "start did not name the dead worker with its host and log")
        dh.check(f"---- last lines of node2:{run_dir}/d-0.log" in r.stdout and missing in r.stdout,
                 "start did not show the log's lines naming the missing model")
        dh.check("coordinator on node1: stopped" in r.stdout, "start did not stop the coordinator")
        dh.check(not leftovers(hosts), f"processes left after the failed start: {leftovers(hosts)}")
        dh.log("PASS: launcher failures are reported with host and log, exit non-zero, leave nothing running")
    finally:
        if sshd is not None:
            sshd.stop()
        hosts.remove()


def main():
    return dh.run_test(test, "fail", {"/usr/sbin/sshd": "openssh-server",
                                              "/usr/bin/ssh": "openssh-client",
                                              "/usr/bin/unshare": "util-linux"})


if __name__ == "__main__":
    sys.exit(main())
