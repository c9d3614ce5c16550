#!/usr/bin/env python3
"""deploy/slurm/splitspec.sbatch for real, on a two-node Slurm (Debian slurm-wlm 22.05).

The nodes are network namespaces snode1 and snode2 (10.80.0.1-2, each with its
own host name through a UTS namespace; tests/deploy/deploy_hosts.py). slurmctld
runs on snode1, one slurmd per node, from a slurm.conf written here:
AuthType=auth/none and CredType=cred/none (no munge daemon), proctrack/linuxproc
and task/none (no cgroups), 8 CPUs per node declared on a 2-core machine
(SlurmdParameters=config_overrides), and bf_interval=1 (only the backfill
scheduler starts heterogeneous jobs). Two nodes, because the backfill scheduler
reserves a whole node for one component, so both components never fit on one.
deploy/slurm/submit.sh sizes the job from the cluster config (checked with
--print) and submits the batch script: the coordinator, an n-gram and a model
draft worker in component 0 (snode1), a TP=2 target group (Gloo) in component 1
(snode2). The test waits until every worker registered, checks each completion
equals plain greedy (`splitspec generate --drafter none`), scancels the job,
and checks the job is CANCELLED with no step or process left on either node.
Finally the script submitted by plain sbatch (the #SBATCH sizes in the file,
too small for this config) must stop at once, printing the lines to use.

Usage: slurm_test.py --bin-dir BUILD/bin --tiny-model-tool BUILD/tests/deploy_tiny_model
Exit 0 pass, 1 fail, 77 skipped.
"""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deploy_hosts as dh  # noqa: E402

NODES = ["snode1", "snode2"]
NODE = NODES[0]  # slurmctld, and component 0 (the coordinator and draft workers)
PROMPTS = ["Hello world, the", "one two three four one two three"]
MAX_TOKENS = 24


def write_slurm_conf(path, workdir, addresses):
    for d in ["state"] + [f"spool-{n}" for n in NODES]:
        os.makedirs(os.path.join(workdir, d), exist_ok=True)
    nodes = "".join(f"NodeName={n} NodeAddr={addresses[n]} CPUs=8 RealMemory=2000 State=UNKNOWN\n" for n in NODES)
    with open(path, "w") as f:
        f.write(f"""# Written by tests/deploy/slurm_test.py: one node, no munge, no cgroups.
ClusterName=splitspec-test
SlurmctldHost={NODE}({addresses[NODE]})
AuthType=auth/none
CredType=cred/none
SlurmUser=root
SlurmdUser=root
StateSaveLocation={workdir}/state
SlurmdSpoolDir={workdir}/spool-%n
SlurmctldPidFile={workdir}/slurmctld.pid
SlurmdPidFile={workdir}/slurmd-%n.pid
SlurmctldLogFile={workdir}/slurmctld.log
SlurmdLogFile={workdir}/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
DefMemPerCPU=100
SchedulerType=sched/backfill
# Heterogeneous jobs are started by the backfill scheduler only (every 30 s by default).
SchedulerParameters=bf_interval=1
ReturnToService=2
SlurmdParameters=config_overrides
KillWait=10
{nodes}PartitionName=debug Nodes={",".join(NODES)} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
""")


def write_cluster_config(path, workdir, target, draft):
    with open(path, "w") as f:
        f.write(f"""# Written by tests/deploy/slurm_test.py.
[models]
target = "{target}"
draft = "{draft}"

[[target_group]]
name = "tp"
tp = 2
threads = 1

[[draft_pool]]
name = "ngram"
count = 1
drafter = "ngram"
placement = "workers"

[[draft_pool]]
name = "model"
count = 1
drafter = "model"
""")


class Slurm:
    def __init__(self, hosts, workdir):
        self.hosts = hosts
        self.workdir = workdir
        self.conf = os.path.join(workdir, "slurm.conf")
        self.env = dict(os.environ, SLURM_CONF=self.conf)
        self.daemons = []

    def on_node(self, argv, timeout=60, check_rc=True):
        return dh.run(self.hosts.exec_prefix(NODE) + argv, timeout=timeout, check_rc=check_rc, env=self.env)

    def start(self):
        daemons = [("slurmctld", NODE, ["/usr/sbin/slurmctld", "-D", "-i", "-f", self.conf])]
        daemons += [(f"slurmd-{n}", n, ["/usr/sbin/slurmd", "-D", "-N", n, "-f", self.conf]) for n in NODES]
        for name, node, argv in daemons:
            # Each in its node's network namespace with the node's host name (jobs see
            # it too). nsenter, not `ip netns exec`: that mounts a fresh /sys without
            # the cgroup file systems, and slurmd 22.05 will not start without them
            # even when no cgroup plugin is used. The node's /etc/hosts is bound by hand.
            hosts_file = f"/etc/netns/{self.hosts.ns(node)}/hosts"
            argv = ["nsenter", f"--net=/var/run/netns/{self.hosts.ns(node)}", "unshare", "--mount", "--uts",
                    "--propagation", "private", "sh", "-c",
                    f"mount --bind {hosts_file} /etc/hosts && hostname {node} && exec \"$@\"", "sh"] + argv
            out = open(os.path.join(self.workdir, f"{name}.stderr"), "w")
            self.daemons.append(subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=self.env,
                                                 start_new_session=True))
        deadline = time.time() + 60
        while True:
            r = self.on_node(["sinfo", "-h", "-o", "%n %T"], check_rc=False)
            states = r.stdout.split()
            if r.returncode == 0 and len(states) == 2 * len(NODES) and all(x == "idle" for x in states[1::2]):
                return
            if time.time() > deadline:
                raise dh.TestFailure(f"the Slurm nodes are not idle after 60 s (sinfo: {r.stdout!r}){self.logs()}")
            time.sleep(0.5)

    def logs(self):
        out = ""
        names = ["slurmctld.log", "slurmctld.stderr"] + [f"slurmd-{n}{e}" for n in NODES for e in (".log", ".stderr")]
        for name in names:
            p = os.path.join(self.workdir, name)
            if os.path.exists(p):
                with open(p, errors="replace") as f:
                    out += f"\n---- {p}\n{f.read()[-4000:]}"
        return out

    def stop(self):
        for p in reversed(self.daemons):
            if p.poll() is None:
                os.killpg(p.pid, 15)
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, 9)
                    p.wait()


def job_steps(slurm, job_id):
    r = slurm.on_node(["squeue", "-h", "-s", "-j", job_id, "-o", "%i %j"], check_rc=False)
    return [line for line in r.stdout.splitlines() if line.strip()]


def test(args, workdir):
    hosts = dh.Hosts("10.80.0", NODES + ["login"], workdir)
    slurm = Slurm(hosts, workdir)
    try:
        write_slurm_conf(slurm.conf, workdir, {n: hosts.address(n) for n in NODES})
        slurm.start()
        target, draft = dh.write_tiny_models(args.tiny_model_tool, workdir)
        config = os.path.join(workdir, "cluster.toml")
        write_cluster_config(config, workdir, target, draft)
        expected = {p: dh.plain_greedy(args.bin_dir, target, p, MAX_TOKENS) for p in PROMPTS}

        submit = os.path.join(dh.ROOT, "deploy", "slurm", "submit.sh")
        env = dict(slurm.env, SPLITSPEC_BIN=args.bin_dir, SPLITSPEC_RUN_DIR=os.path.join(workdir, "run"))
        r = dh.run([submit, config, "--print"], env=env)
        dh.log(f"$ deploy/slurm/submit.sh CONFIG --print\n{r.stdout}")
        dh.check("#SBATCH --ntasks=3" in r.stdout and "#SBATCH --ntasks=2 --ntasks-per-node=2" in r.stdout,
                 "submit.sh --print did not size the components (3 tasks: coordinator + 2 drafts; 2 ranks)")
        r = dh.run(hosts.exec_prefix(NODE) + [submit, config, "--", "--chdir", workdir,
                                               "--output", os.path.join(workdir, "job-%j.out")], env=env)
        dh.log(f"$ deploy/slurm/submit.sh CONFIG\n{r.stdout}")
        job_id = r.stdout.strip().split()[-1]
        dh.check(job_id.isdigit(), f"no job id in: {r.stdout}")
        job_out = os.path.join(workdir, f"job-{job_id}.out")

        dh.enter_namespace(hosts.ns("login"))
        base = f"http://{hosts.address(NODE)}:8000"
        deadline = time.time() + 90
        while True:
            try:
                dh.wait_http(base, timeout_s=2)
                status, reply = dh.http("GET", f"{base}/v1/models")
                if status == 200:
                    break
            except dh.TestFailure:
                pass
            if time.time() > deadline:
                queue = slurm.on_node(["squeue", "-a", "-o", "%i %T %r"], check_rc=False).stdout
                raise dh.TestFailure(f"the job's coordinator does not serve at {base} after 90 s; squeue:\n{queue}")
            time.sleep(1)
        # Serving starts before every worker registered; wait for the full cluster.
        names = ""
        deadline = time.time() + 60
        while True:
            # The job made CURVE keys in its run dir (splitspec.sbatch); status needs one of them.
            keys = dict(os.environ, SPLITSPEC_KEYS=os.path.join(workdir, "run", "keys"))
            r = dh.run(hosts.exec_prefix(NODE) + [os.path.join(args.bin_dir, "splitspec"), "status",
                                                   "--coordinator", f"tcp://{NODE}:5555"],
                       check_rc=False, env=keys)
            names = r.stdout
            if all(f'"worker_name":"{n}"' in names for n in ("tp-rank0", "ngram-0", "model-0")):
                break
            if time.time() > deadline:
                raise dh.TestFailure(f"workers did not register within 60 s: {names}")
            time.sleep(1)
        ranks_node = " ".join(dh.cmdlines(hosts.pids(NODES[1])))
        dh.check("--tp-rank 0" in ranks_node and "--tp-rank 1" in ranks_node,
                 f"the TP=2 ranks are not on {NODES[1]} (component 1): {ranks_node}")
        steps = job_steps(slurm, job_id)
        dh.log(f"job {job_id} steps while serving: {steps}")
        dh.check(len(steps) >= 3, f"expected the coordinator, target and draft steps, got {steps}")
        for prompt in PROMPTS:
            got = dh.completion(base, prompt, MAX_TOKENS)
            dh.check(got == expected[prompt], f"prompt {prompt!r}: job {got!r} != plain greedy {expected[prompt]!r}")
        dh.log(f"{len(PROMPTS)} requests equal plain greedy ({MAX_TOKENS} tokens each)")

        slurm.on_node(["scancel", job_id])
        deadline = time.time() + 60
        while job_steps(slurm, job_id) or slurm.on_node(["squeue", "-h", "-j", job_id], check_rc=False).stdout.strip():
            dh.check(time.time() < deadline, f"job {job_id} still has steps 60 s after scancel")
            time.sleep(0.5)
        left = [c for n in NODES for c in dh.cmdlines(hosts.pids(n)) if args.bin_dir in c or "plan.py" in c]
        dh.check(not left, f"processes of the job left after scancel: {left}")
        r = slurm.on_node(["scontrol", "show", "job", job_id], check_rc=False)
        dh.log(f"job after scancel: {' '.join(w for w in r.stdout.split() if w.startswith('JobState'))}")
        dh.check("JobState=CANCELLED" in r.stdout, f"job {job_id} not CANCELLED: {r.stdout}")
        with open(job_out, errors="replace") as f:
            dh.log(f"---- {job_out}\n{f.read()}")

        # Submitted without sizing, the job's allocation does not fit the config:
        # it stops at once and prints the #SBATCH lines to use.
        r = dh.run(hosts.exec_prefix(NODE) + ["sbatch", "--chdir", workdir, "--output",
                                               os.path.join(workdir, "unsized-%j.out"),
                                               os.path.join(dh.ROOT, "deploy", "slurm", "splitspec.sbatch")],
                   env=dict(env, SPLITSPEC_CONFIG=config, SPLITSPEC_ROOT=dh.ROOT))
        unsized = r.stdout.strip().split()[-1]
        deadline = time.time() + 60
        while slurm.on_node(["squeue", "-h", "-j", unsized], check_rc=False).stdout.strip():
            dh.check(time.time() < deadline, f"the unsized job {unsized} still runs after 60 s")
            time.sleep(0.5)
        with open(os.path.join(workdir, f"unsized-{unsized}.out"), errors="replace") as f:
            text = f.read()
        dh.log(f"---- unsized job {unsized}:\n{text}")
        dh.check("needs 3 (coordinator + 2 draft worker(s)) + 2 (target ranks)" in text
                 and "#SBATCH --ntasks=2 --ntasks-per-node=2" in text,
                 "the unsized job did not say which #SBATCH lines to use")
        dh.log("PASS: the Slurm batch script served a heterogeneous job; scancel ended every step")
    except dh.TestFailure as e:
        raise dh.TestFailure(f"{e}{slurm.logs()}") from None
    finally:
        slurm.stop()
        hosts.remove()


def main():
    return dh.run_test(test, "slurm", {"/usr/sbin/slurmctld": "slurmctld",
                                               "/usr/sbin/slurmd": "slurmd",
                                               "/usr/bin/sbatch": "slurm-client",
                                               "/usr/bin/unshare": "util-linux"},
                       log_suffixes=(".log", ".out"), skip_prefix="slurm")


if __name__ == "__main__":
    sys.exit(main())
