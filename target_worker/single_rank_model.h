// LoadSingleRankModel: the model of a one-rank target (a target worker with
// --tp-size 1, and `splitspec generate`'s target).
//
//   ASSIGN_OR_RETURN(SingleRankModel target, LoadSingleRankModel(path, options));
//   ... target.model.get() ...
//
// On a CUDA device, in a build with NCCL, the model joins a one-rank NCCL group
// (its unique id passes through a fresh private directory, removed once the group
// is formed): the device path of a multi-GPU group, with nothing to reduce, so
// the forward never calls NCCL and its logits are bitwise those of no group
// (tests/gpu/cuda_tp_test.cc). Without NCCL in the build, or on the CPU, the
// model has no group. A tensor-parallel group of several ranks forms elsewhere
// (tp_group_runner.h): over NCCL when its ranks have a GPU each, else over Gloo
// staged through the host on CUDA devices (NCCL refuses two ranks on one GPU). Written without a GPU: the NCCL path has
// not run yet (tests/gpu/single_rank_model_test.cc will).
#ifndef SPLITSPEC_TARGET_WORKER_SINGLE_RANK_MODEL_H_
#define SPLITSPEC_TARGET_WORKER_SINGLE_RANK_MODEL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/dist/communicator.h"
#include "runtime/model/transformer.h"

namespace splitspec::target {

struct SingleRankModel {
  std::unique_ptr<net::Communicator> group;  // null: no group; outlives `model` (declared first)
  std::unique_ptr<model::Transformer> model;
};

// Errors: Transformer::Load's; for the NCCL group, NcclCommunicator::Create's
// (named), or Internal if its rendezvous directory cannot be made.
absl::StatusOr<SingleRankModel> LoadSingleRankModel(const std::string& path,
                                                    const model::TransformerOptions& options);

}  // namespace splitspec::target

#endif  // SPLITSPEC_TARGET_WORKER_SINGLE_RANK_MODEL_H_
