// A tiny-model cluster with the HTTP front door, for client tests written in
// other languages (openai_client_test.py): prints "port <N>" on stdout once
// serving, and serves until its stdin closes.
//
//   http_front_door_fixture MODEL_DIR
#include <cstdio>
#include <iostream>
#include <string>

#include "coordinator/http/front_door.h"
#include "runtime/model/transformer.h"
#include "runtime/spec/ngram_drafter.h"
#include "target_worker/request_setup.h"
#include "tests/testing/tiny_model.h"
#include "tools/cluster/in_process_cluster.h"

namespace {

int Fail(const std::string& what, const absl::Status& status) {
  std::fprintf(stderr, "http_front_door_fixture: %s: %s\n", what.c_str(),
               std::string(status.message()).c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace splitspec;
  if (argc != 2) {
    std::fprintf(stderr, "usage: http_front_door_fixture MODEL_DIR\n");
    return 2;
  }
  model::GgufWriter writer = model::MakeTinyChatModel();
  const std::string path = std::string(argv[1]) + "/openai-client-tiny.gguf";
  if (absl::Status written = writer.WriteFile(path); !written.ok())
    return Fail("writing " + path, written);
  auto target = model::Transformer::Load(path, {.threads = 1});
  if (!target.ok()) return Fail("loading " + path, target.status());
  spec::NgramDrafter ngram(spec::NgramDrafterConfig{});
  tools::InProcessClusterOptions cluster_options;
  cluster_options.target = target->get();
  cluster_options.drafter = &ngram;
  // Structured outputs, as the target worker binary sets them up.
  auto grammar_compiler = target::GrammarCompilerForModel(path, (*target)->config().vocab_size);
  if (!grammar_compiler.ok()) return Fail("the grammar compiler", grammar_compiler.status());
  cluster_options.target_engine.grammar_compiler = *std::move(grammar_compiler);
  auto cluster = tools::InProcessCluster::Start(cluster_options);
  if (!cluster.ok()) return Fail("starting the cluster", cluster.status());
  coordinator::http::FrontDoorOptions front_options;
  front_options.http.port = 0;
  front_options.coordinator_endpoint = (*cluster)->coordinator_endpoint();
  front_options.model_path = path;
  front_options.model_name = "tiny";
  auto front_door = coordinator::http::FrontDoor::Start(front_options);
  if (!front_door.ok()) return Fail("starting the front door", front_door.status());
  std::printf("port %d\n", (*front_door)->port());
  std::fflush(stdout);
  std::string line;
  while (std::getline(std::cin, line)) {
  }
  return 0;
}
