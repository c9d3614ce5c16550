// The launchers in deploy/ cannot be run for real here (no second host, no
// Slurm, no Kubernetes), so these tests check what can be checked on one
// machine: every shell script parses (bash -n), every Kubernetes manifest is
// YAML with apiVersion/kind/metadata.name, the manifests agree with their
// cluster config, and the ssh and per-pod launch planning produce the right
// command lines from `splitspec serve --dry-run`.
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kSource = SPLITSPEC_SOURCE_DIR;
const std::string kBin = SPLITSPEC_BIN_DIR;

struct Result {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

Result RunShell(const std::string& command) {
  Result r;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return r;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof(buffer), pipe)) r.output.append(buffer, n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string Quote(const std::string& s) { return "'" + s + "'"; }

std::vector<std::string> FilesUnder(const std::string& dir,
                                    const std::vector<std::string>& extensions) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    for (const std::string& ext : extensions) {
      if (entry.is_regular_file() && entry.path().extension() == ext)
        files.push_back(entry.path().string());
    }
  }
  return files;
}

TEST(DeploySyntaxTest, EveryShellScriptParses) {
  const std::vector<std::string> scripts = FilesUnder(kSource + "/deploy", {".sh", ".sbatch"});
  EXPECT_GE(scripts.size(), 4u);  // setup, local_cluster, ssh_cluster, slurm
  for (const std::string& script : scripts) {
    const Result r = RunShell("bash -n " + Quote(script));
    EXPECT_EQ(r.exit_code, 0) << script << ":\n" << r.output;
  }
  const Result py = RunShell("python3 -m py_compile " + Quote(kSource + "/deploy/plan.py"));
  EXPECT_EQ(py.exit_code, 0) << py.output;
}

TEST(DeploySyntaxTest, EveryKubernetesManifestIsYamlWithKindAndName) {
  const std::vector<std::string> manifests = FilesUnder(kSource + "/deploy/k8s", {".yaml", ".yml"});
  ASSERT_GE(manifests.size(), 4u);
  for (const std::string& manifest : manifests) {
    const Result r = RunShell(
        "python3 -c 'import sys, yaml\n"
        "docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d is not None]\n"
        "assert docs, \"no documents\"\n"
        "for d in docs:\n"
        "    assert d.get(\"apiVersion\") and d.get(\"kind\") and d.get(\"metadata\", "
        "{}).get(\"name\"), d\n"
        "print(len(docs))' " +
        Quote(manifest));
    EXPECT_EQ(r.exit_code, 0) << manifest << ":\n" << r.output;
  }
}

// Replica counts in the manifests follow deploy/k8s/cluster.toml (read with
// Python's tomllib: also a check that the file is standard TOML), GPU pods
// request nvidia.com/gpu, and the Services expose the control and HTTP ports.
TEST(DeploySyntaxTest, KubernetesManifestsMatchTheirClusterConfig) {
  const Result r = RunShell(
      "python3 -c 'import sys, tomllib, yaml, glob\n"
      "k8s = sys.argv[1]\n"
      "config = tomllib.load(open(k8s + \"/cluster.toml\", \"rb\"))\n"
      "docs = [d for f in sorted(glob.glob(k8s + \"/*.yaml\")) for d in "
      "yaml.safe_load_all(open(f)) if d]\n"
      "by = {(d[\"kind\"], d[\"metadata\"][\"name\"]): d for d in docs}\n"
      "for g in config[\"target_group\"]:\n"
      "    s = by[(\"StatefulSet\", \"splitspec-target-\" + g[\"name\"])]\n"
      "    assert s[\"spec\"][\"replicas\"] == g[\"tp\"], (g, s[\"spec\"][\"replicas\"])\n"
      "    c = s[\"spec\"][\"template\"][\"spec\"][\"containers\"][0]\n"
      "    if g[\"devices\"][0].startswith(\"cuda:\"):\n"
      "        assert c[\"resources\"][\"limits\"][\"nvidia.com/gpu\"] == 1\n"
      "    assert \"--rank\" in c[\"args\"][0] and \"--group \" + g[\"name\"] in c[\"args\"][0]\n"
      "pool = config[\"draft_pool\"][0]\n"
      "assert by[(\"Deployment\", \"splitspec-draft\")][\"spec\"][\"replicas\"] == "
      "pool[\"count\"]\n"
      "ports = {p[\"port\"] for p in by[(\"Service\", "
      "\"splitspec-coordinator\")][\"spec\"][\"ports\"]}\n"
      "assert ports == {5555, 8000}, ports\n"
      "assert config[\"coordinator\"][\"advertise\"] == \"tcp://splitspec-coordinator:5555\"\n"
      "keys = config[\"security\"][\"keys_dir\"]\n"
      "roles = {\"splitspec-coordinator\": \"coordinator\", \"splitspec-draft\": \"draft\"}\n"
      "for (kind, name), d in by.items():\n"
      "    if kind not in (\"Deployment\", \"StatefulSet\"): continue\n"
      "    role = roles.get(name, \"target\")\n"
      "    pod = d[\"spec\"][\"template\"][\"spec\"]\n"
      "    c = pod[\"containers\"][0]\n"
      "    mounts = {m[\"name\"]: m[\"mountPath\"] for m in c[\"volumeMounts\"]}\n"
      "    vol = [v for v in pod[\"volumes\"] if v.get(\"secret\", {}).get(\"secretName\") == "
      "\"splitspec-keys\"]\n"
      "    assert len(vol) == 1 and mounts[vol[0][\"name\"]] == keys, (name, mounts)\n"
      "    files = {i[\"path\"] for i in vol[0][\"secret\"][\"items\"]}\n"
      "    assert role + \".key\" in files and \"coordinator.pub\" in files, (name, files)\n"
      "    assert not any(f.endswith(\".key\") and f != role + \".key\" for f in files), files\n"
      "    assert vol[0][\"secret\"][\"defaultMode\"] == 0o400\n"
      "kust = by[(\"Kustomization\", \"splitspec\")]\n"
      "assert kust[\"configMapGenerator\"][0][\"files\"] == [\"cluster.toml\"]\n"
      "print(\"ok\")' " +
      Quote(kSource + "/deploy/k8s"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(DeploySyntaxTest, ShippedConfigsAreStandardToml) {
  for (const std::string& file : FilesUnder(kSource + "/deploy", {".toml"})) {
    const Result r = RunShell(
        "python3 -c 'import sys, tomllib; tomllib.load(open(sys.argv[1], \"rb\"))' " + Quote(file));
    EXPECT_EQ(r.exit_code, 0) << file << ":\n" << r.output;
  }
}

// deploy/ssh_cluster.sh with DRY_RUN=1 prints the ssh command of every process
// of the multi-host example: each rank on its group's host with its rank flags
// and its GPU, and the API key kept off every command line.
TEST(DeploySyntaxTest, SshLauncherPlansEveryProcessOnItsHost) {
  const Result r =
      RunShell("cd " + Quote(kSource) +
               " && SPLITSPEC_API_KEY=do-not-print-me SPLITSPEC_BIN=" + Quote(kBin) +
               " DRY_RUN=1 deploy/ssh_cluster.sh deploy/examples/multi_host_gpu.toml start");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, Not(HasSubstr("do-not-print-me")));
  std::vector<std::string> ssh_lines;
  for (size_t start = 0, end; start < r.output.size(); start = end + 1) {
    end = r.output.find('\n', start);
    if (end == std::string::npos) end = r.output.size();
    const std::string line = r.output.substr(start, end - start);
    if (line.rfind("ssh ", 0) == 0) ssh_lines.push_back(line);
  }
  ASSERT_EQ(ssh_lines.size(), 7u) << r.output;  // coordinator, 2 groups x 2 ranks, 2 drafts
  EXPECT_THAT(ssh_lines[0], HasSubstr("ssh -o BatchMode=yes node1 "));
  EXPECT_THAT(ssh_lines[0], HasSubstr("read\\ -r\\ SPLITSPEC_API_KEY"));  // the key comes on stdin
  EXPECT_THAT(ssh_lines[2], HasSubstr(" node2 "));
  EXPECT_THAT(ssh_lines[2], HasSubstr("CUDA_VISIBLE_DEVICES=1"));
  EXPECT_THAT(ssh_lines[2], HasSubstr("--tp-group\\ g0\\ --tp-rank\\ 1\\ --tp-size\\ 2"));
  EXPECT_THAT(ssh_lines[2], HasSubstr("--coordinator\\ tcp://10.0.0.1:5555"));
  EXPECT_THAT(ssh_lines[3], HasSubstr(" node3 "));
  EXPECT_THAT(ssh_lines[3], HasSubstr("--data-endpoint\\ tcp://10.0.0.3:6000"));
  EXPECT_THAT(ssh_lines[6], HasSubstr("--name\\ draft-1"));
  EXPECT_THAT(ssh_lines[6], HasSubstr("/tmp/splitspec-run/draft-1.log"));
  for (const std::string& line : ssh_lines)  // every process loads its CURVE key from the files
    EXPECT_THAT(line, HasSubstr("SPLITSPEC_KEYS=/etc/splitspec/keys"));

  const Result stop =
      RunShell("cd " + Quote(kSource) + " && SPLITSPEC_BIN=" + Quote(kBin) +
               " DRY_RUN=1 deploy/ssh_cluster.sh deploy/examples/multi_host_gpu.toml stop");
  ASSERT_EQ(stop.exit_code, 0) << stop.output;
  // Workers first, the coordinator last.
  EXPECT_LT(stop.output.find("draft-1.pid"), stop.output.find("coordinator.pid")) << stop.output;
}

// A CURVE config without key files cannot be started on several hosts (the
// launcher cannot make keys there): refused, naming the fix.
TEST(DeploySyntaxTest, SshLauncherRefusesACurveConfigWithoutKeyFiles) {
  const Result r = RunShell("cd " + Quote(kSource) + " && SPLITSPEC_BIN=" + Quote(kBin) +
                            " DRY_RUN=1 deploy/ssh_cluster.sh deploy/cluster.toml start");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("security.keys_dir is empty"));
  EXPECT_THAT(r.output, HasSubstr("splitspec keygen --out DIR --name all"));
  EXPECT_THAT(r.output, Not(HasSubstr("ssh ")));
}

// What a Kubernetes target pod (and a Slurm target task) runs: its line of the
// plan, selected by group and rank, with the pod's address in --data-endpoint
// and without the per-rank CUDA_VISIBLE_DEVICES (the scheduler assigns GPUs).
TEST(DeploySyntaxTest, PodLaunchSelectsItsRankFromThePlan) {
  const std::string plan = std::filesystem::temp_directory_path().string() +
                           "/splitspec_k8s_plan_" + std::to_string(getpid()) + ".jsonl";
  Result r = RunShell(Quote(kBin + "/splitspec") + " serve --config " +
                      Quote(kSource + "/deploy/k8s/cluster.toml") + " --dry-run > " + Quote(plan));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string tool = "python3 " + Quote(kSource + "/deploy/plan.py");
  r = RunShell(tool + " exec " + Quote(plan) +
               " --group g0 --rank 1 --data-host 10.9.8.7 --no-device-env --print");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output,
              HasSubstr("\"--tp-group\", \"g0\", \"--tp-rank\", \"1\", \"--tp-size\", \"2\""));
  EXPECT_THAT(r.output, HasSubstr("\"--coordinator\", \"tcp://splitspec-coordinator:5555\""));
  // Ranks in pods of their own meet on the pod's address, not on loopback.
  EXPECT_THAT(r.output, HasSubstr("\"--tp-address\", \"10.9.8.7\""));
  // --no-device-env drops CUDA_VISIBLE_DEVICES; the Secret's keys stay.
  EXPECT_THAT(r.output, HasSubstr("\"env\": {\"SPLITSPEC_KEYS\": \"/etc/splitspec-keys\"}"));
  r = RunShell(tool + " exec " + Quote(plan) + " --group g0 --rank 0 --data-host 10.9.8.7 --print");
  EXPECT_THAT(r.output, HasSubstr("\"--data-endpoint\", \"tcp://10.9.8.7:6000\""));
  EXPECT_THAT(r.output, HasSubstr("\"CUDA_VISIBLE_DEVICES\": \"0\""));
  r = RunShell(tool + " exec " + Quote(plan) + " --role draft --index 0 --print -- --name pod-abc");
  EXPECT_THAT(r.output, HasSubstr("\"--name\", \"pod-abc\"]"));
  r = RunShell(tool + " exec " + Quote(plan) + " --group g0 --rank 2 --print");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_THAT(r.output, HasSubstr("no single process matches --group g0 --rank 2"));
  r = RunShell(tool + " count " + Quote(plan) + " --role target");
  EXPECT_EQ(r.output, "2\n");
  std::filesystem::remove(plan);
}

}  // namespace
