#!/usr/bin/env python3
"""Reads the plan `splitspec serve --config F --dry-run` prints (one JSON object
per process: name, role, host, log, group/tp_rank/tp_size, env, env_from, argv)
and starts one of its processes, or prints them for a launcher, so that the ssh,
Slurm and Kubernetes launchers run exactly the command lines `serve` would.

  plan.py exec PLAN (--name N | --group G --rank R | --role ROLE --index I)
               [--data-host ADDR] [--no-device-env] [--print] [-- EXTRA_ARGS...]
      exec()s the selected process in place: its env set, env_from copied from
      this environment, EXTRA_ARGS appended (the binaries take the last value
      of a repeated flag, so `-- --name pod-7` renames it). --data-host
      replaces the address in a leader's --data-endpoint and a rank's
      --tp-address (the pod or node IP, known only where it runs: ranks in
      pods of their own cannot meet on loopback); --no-device-env drops CUDA_VISIBLE_DEVICES
      where the scheduler assigns GPUs itself (Slurm, Kubernetes). --print
      prints {"argv": [...], "env": {set variables}} instead of starting it.
  plan.py count PLAN --role ROLE
      prints how many processes have that role.
  plan.py ssh PLAN
      prints one line per process for deploy/ssh_cluster.sh, fields separated
      by the byte 0x1f (not a tab: bash's read merges empty tab fields):
      host, name, role, pid file, log, the env_from source variables
      (comma-separated), and a POSIX sh script that reads those variables'
      values from stdin (one a line: secrets never appear on a command line),
      then starts the process in the background, in its own session, with its
      log and pid file.
  plan.py security-env PLAN
      prints the coordinator's security variables as shell words
      (SPLITSPEC_KEYS=DIR or SPLITSPEC_SECURITY=none; empty when the plan has
      neither, i.e. curve without security.keys_dir), for commands a launcher
      runs beside the plan (status, scale).
  plan.py slurm PLAN
      prints the #SBATCH lines that size deploy/slurm/splitspec.sbatch's
      heterogeneous job to the plan: component 0 one task for the coordinator
      plus one per draft worker (on one node), component 1 one task per target
      rank with --ntasks-per-node = the groups' tp, and --cpus-per-task from the
      threads (a GPU per task for GPU ranks). deploy/slurm/submit.sh passes
      them to sbatch.
  plan.py scale PLAN --draft +N|-N [--host HOST]
      prints HOST 0x1f SCRIPT: the `splitspec scale` command line that grows
      the first draft pool by N workers on HOST (default: the pool's host), with
      the pool's drafter, model and threads and the plan's log folder, or that
      drains N draft workers (run on the coordinator's host); it runs under
      `env` with the coordinator's security variables (security-env).

PLAN is a file, or - for stdin. Python 3 standard library only.
"""
import argparse
import json
import os
import posixpath
import re
import shlex
import sys


def load(path):
    stream = sys.stdin if path == "-" else open(path, encoding="utf-8")
    processes = [json.loads(line) for line in stream if line.strip()]
    for p in processes:
        for key in ("name", "role", "host", "log", "env", "env_from", "argv"):
            if key not in p:
                sys.exit(f"plan.py: {path}: process {p.get('name', '?')} has no '{key}'")
    return processes


def select(processes, args):
    if args.name is not None:
        chosen = [p for p in processes if p["name"] == args.name]
        what = f"--name {args.name}"
    elif args.group is not None:
        chosen = [p for p in processes if p.get("group") == args.group and p.get("tp_rank") == args.rank]
        what = f"--group {args.group} --rank {args.rank}"
    else:
        of_role = [p for p in processes if p["role"] == args.role]
        chosen = of_role[args.index:args.index + 1] if 0 <= args.index < len(of_role) else []
        what = f"--role {args.role} --index {args.index} (the plan has {len(of_role)})"
    if len(chosen) != 1:
        sys.exit(f"plan.py: no single process matches {what}")
    return chosen[0]


def with_data_host(argv, host):
    out = list(argv)
    for i in range(len(out) - 1):
        if out[i] == "--data-endpoint":
            out[i + 1] = re.sub(r"^tcp://.*:([0-9]+|\*)$", lambda m: f"tcp://{host}:{m.group(1)}", out[i + 1])
        elif out[i] == "--tp-address":
            out[i + 1] = host
    return out


def cmd_exec(args):
    p = select(load(args.plan), args)
    changed = {}
    for name, value in p["env"].items():
        if not (args.no_device_env and name == "CUDA_VISIBLE_DEVICES"):
            changed[name] = value
    for name, source in p["env_from"].items():
        changed[name] = os.environ.get(source, "")
    argv = p["argv"] if args.data_host is None else with_data_host(p["argv"], args.data_host)
    argv = argv + args.extra
    if args.print:
        print(json.dumps({"argv": argv, "env": changed}))
        return
    env = dict(os.environ)
    env.update(changed)
    sys.stdout.flush()
    os.execve(argv[0], argv, env)


def cmd_count(args):
    print(sum(1 for p in load(args.plan) if p["role"] == args.role))


def cmd_ssh(args):
    for p in load(args.plan):
        run_dir = posixpath.dirname(p["log"])
        pid_file = posixpath.join(run_dir, p["name"] + ".pid")
        reads = "".join(f"IFS= read -r {n} || true; export {n}; " for n in p["env_from"])
        env = " ".join(shlex.quote(f"{k}={v}") for k, v in p["env"].items())
        command = " ".join(shlex.quote(a) for a in p["argv"])
        # setsid: the process leaves the ssh session's process group, so the
        # session closing cannot signal it.
        script = (f"mkdir -p {shlex.quote(run_dir)} && {reads}"
                  f"if command -v setsid >/dev/null; then S=setsid; else S=; fi; "
                  f"$S nohup env {env} {command} >{shlex.quote(p['log'])} 2>&1 </dev/null & "
                  f"echo $! >{shlex.quote(pid_file)}")
        sources = ",".join(p["env_from"].values())
        print("\x1f".join([p["host"], p["name"], p["role"], pid_file, p["log"], sources, script]))


def flag_value(argv, flag):
    return argv[argv.index(flag) + 1] if flag in argv[:-1] else None


def cmd_slurm(args):
    processes = load(args.plan)
    drafts = [p for p in processes if p["role"] == "draft"]
    ranks = [p for p in processes if p["role"] == "target"]
    if not ranks:
        sys.exit("plan.py: the plan has no target rank")
    tps = sorted({p["tp_size"] for p in ranks})
    if len(tps) != 1:
        sys.exit(f"plan.py: target groups of different tp {tps} cannot share one --ntasks-per-node; "
                 "give each tp its own hetjob component (edit the #SBATCH lines) or one tp to every group")

    def threads(p):
        value = flag_value(p["argv"], "--threads")
        return int(value) if value else 1

    c0_cpus = max([threads(p) for p in drafts] + [1])
    c1_cpus = max(threads(p) for p in ranks)
    gpus = " --gpus-per-task=1" if any("CUDA_VISIBLE_DEVICES" in p["env"] for p in ranks) else ""
    d_gpus = " --gpus-per-task=1" if any("CUDA_VISIBLE_DEVICES" in p["env"] for p in drafts) else ""
    print(f"#SBATCH --ntasks={1 + len(drafts)} --nodes=1 --cpus-per-task={c0_cpus}{d_gpus}")
    print("#SBATCH hetjob")
    print(f"#SBATCH --ntasks={len(ranks)} --ntasks-per-node={tps[0]} --cpus-per-task={c1_cpus}{gpus}")


SECURITY_VARIABLES = ("SPLITSPEC_KEYS", "SPLITSPEC_SECURITY")


def security_env(process):
    """The process's security settings ("SPLITSPEC_KEYS=DIR" or "SPLITSPEC_SECURITY=none")."""
    return [f"{k}={v}" for k, v in process["env"].items() if k in SECURITY_VARIABLES]


def cmd_security_env(args):
    coordinator = next(p for p in load(args.plan) if p["role"] == "coordinator")
    print(" ".join(shlex.quote(a) for a in security_env(coordinator)))


def cmd_scale(args):
    processes = load(args.plan)
    drafts = [p for p in processes if p["role"] == "draft"]
    coordinator = next(p for p in processes if p["role"] == "coordinator")
    workers = [p for p in processes if p["role"] != "coordinator"]
    if not workers:
        sys.exit("plan.py: the plan has no worker, so no coordinator endpoint for workers")
    endpoint = flag_value(workers[0]["argv"], "--coordinator")
    binary = posixpath.join(posixpath.dirname(coordinator["argv"][0]), "splitspec")
    delta = args.draft
    if not re.fullmatch(r"[+-][0-9]+", delta) or int(delta) == 0:
        sys.exit(f"plan.py: --draft {delta}: expected +N or -N (N >= 1)")
    # `splitspec scale` talks to the coordinator with the admin key (its keys' directory).
    command = ["env"] + security_env(coordinator) + [binary, "scale", "--coordinator", endpoint,
                                                      "--draft", delta, "--wait-s", "120"]
    if delta.startswith("-"):
        host = args.host or coordinator["host"]
    else:
        if not drafts:
            sys.exit("plan.py: the config has no draft worker to copy the pool's settings from; "
                     "run `splitspec scale` on the host by hand")
        pool = drafts[0]["argv"]
        host = args.host or drafts[0]["host"]
        command += ["--log-dir", posixpath.dirname(drafts[0]["log"]),
                    "--model", flag_value(pool, "--target-model"), "--drafter", flag_value(pool, "--drafter"),
                    "--threads", flag_value(pool, "--threads")]
        if flag_value(pool, "--draft"):
            command += ["--draft-model", flag_value(pool, "--draft")]
    print("\x1f".join([host, " ".join(shlex.quote(a) for a in command)]))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    e = sub.add_parser("exec")
    e.add_argument("plan")
    e.add_argument("--name")
    e.add_argument("--group")
    e.add_argument("--rank", type=int, default=0)
    e.add_argument("--role")
    e.add_argument("--index", type=int, default=0)
    e.add_argument("--data-host")
    e.add_argument("--no-device-env", action="store_true")
    e.add_argument("--print", action="store_true")
    c = sub.add_parser("count")
    c.add_argument("plan")
    c.add_argument("--role", required=True)
    s = sub.add_parser("ssh")
    s.add_argument("plan")
    sl = sub.add_parser("slurm")
    sl.add_argument("plan")
    sc = sub.add_parser("scale")
    sc.add_argument("plan")
    sc.add_argument("--draft", required=True)
    sc.add_argument("--host")
    se = sub.add_parser("security-env")
    se.add_argument("plan")
    # Everything after the first "--" is appended to the process's argv.
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    args = parser.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    args.extra = extra
    if args.command == "exec":
        if (args.name is None) + (args.group is None) + (args.role is None) != 2:
            parser.error("exec needs exactly one of --name, --group (with --rank), --role (with --index)")
        cmd_exec(args)
    elif args.command == "count":
        cmd_count(args)
    elif args.command == "slurm":
        cmd_slurm(args)
    elif args.command == "scale":
        cmd_scale(args)
    elif args.command == "security-env":
        cmd_security_env(args)
    else:
        cmd_ssh(args)


if __name__ == "__main__":
    main()
