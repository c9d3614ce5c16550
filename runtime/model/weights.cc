#include "runtime/model/weights.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/dequantize.h"
#include "runtime/base/status_macros.h"

namespace splitspec::model {
namespace {

using kernels::GgmlType;

absl::StatusOr<const GgufTensorInfo*> FindShaped(const GgufFile& file, const std::string& name,
                                                 const std::vector<int64_t>& dims,
                                                 bool widens_q5_0 = false) {
  ASSIGN_OR_RETURN(const GgufTensorInfo* t, file.GetTensor(name));
  if (t->dims != dims) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' has dims [",
                                                   absl::StrJoin(t->dims, ", "), "], expected [",
                                                   absl::StrJoin(dims, ", "), "]"));
  }
  if (!kernels::IsSupportedWeightType(t->type) && !(widens_q5_0 && t->type == GgmlType::kQ5_0)) {
    return absl::UnimplementedError(absl::StrCat("tensor '", name, "' has type ",
                                                 kernels::GetGgmlTypeTraits(t->type).name,
                                                 ", which the matmul kernels do not support"));
  }
  return t;
}

// A matrix of `rows` x `cols` (GGUF dims [cols, rows]).
absl::StatusOr<WeightMatrix> LoadMatrix(const GgufFile& file, const std::string& name, int64_t rows,
                                        int64_t cols) {
  ASSIGN_OR_RETURN(const GgufTensorInfo* t,
                   FindShaped(file, name, {cols, rows}, /*widens_q5_0=*/true));
  if (t->type != GgmlType::kQ5_0) return WeightMatrix{t->type, t->data, rows, cols, nullptr, nullptr};
  const int64_t blocks = rows * cols / 32;
  std::shared_ptr<uint8_t[]> q8_0(new uint8_t[kernels::RowBytes(GgmlType::kQ8_0, cols) * rows]);
  kernels::WidenQ5_0ToQ8_0(t->data, q8_0.get(), blocks);
  return WeightMatrix{GgmlType::kQ8_0, q8_0.get(), rows, cols, nullptr,
                      std::shared_ptr<const uint8_t>(q8_0, q8_0.get())};
}

// A vector of `n` elements, dequantized to floats.
absl::StatusOr<std::vector<float>> LoadVector(const GgufFile& file, const std::string& name,
                                              int64_t n) {
  ASSIGN_OR_RETURN(const GgufTensorInfo* t, FindShaped(file, name, {n}));
  std::vector<float> out(n);
  kernels::DequantizeRow(t->type, t->data, out.data(), n);
  return out;
}

absl::StatusOr<LayerWeights> LoadLayer(const GgufFile& file, const ModelConfig& c, int layer) {
  const std::string p = absl::StrCat("blk.", layer, ".");
  LayerWeights l;
  ASSIGN_OR_RETURN(l.attn_norm, LoadVector(file, p + "attn_norm.weight", c.n_embd));
  ASSIGN_OR_RETURN(l.wq, LoadMatrix(file, p + "attn_q.weight", c.q_dim(), c.n_embd));
  ASSIGN_OR_RETURN(l.wk, LoadMatrix(file, p + "attn_k.weight", c.kv_dim(), c.n_embd));
  ASSIGN_OR_RETURN(l.wv, LoadMatrix(file, p + "attn_v.weight", c.kv_dim(), c.n_embd));
  if (c.qkv_bias) {
    ASSIGN_OR_RETURN(l.bq, LoadVector(file, p + "attn_q.bias", c.q_dim()));
    ASSIGN_OR_RETURN(l.bk, LoadVector(file, p + "attn_k.bias", c.kv_dim()));
    ASSIGN_OR_RETURN(l.bv, LoadVector(file, p + "attn_v.bias", c.kv_dim()));
  }
  ASSIGN_OR_RETURN(l.wo, LoadMatrix(file, p + "attn_output.weight", c.n_embd, c.q_dim()));
  ASSIGN_OR_RETURN(l.ffn_norm, LoadVector(file, p + "ffn_norm.weight", c.n_embd));
  ASSIGN_OR_RETURN(l.gate, LoadMatrix(file, p + "ffn_gate.weight", c.n_ff, c.n_embd));
  ASSIGN_OR_RETURN(l.up, LoadMatrix(file, p + "ffn_up.weight", c.n_ff, c.n_embd));
  ASSIGN_OR_RETURN(l.down, LoadMatrix(file, p + "ffn_down.weight", c.n_embd, c.n_ff));
  if (c.qk_norm) {
    ASSIGN_OR_RETURN(l.q_norm, LoadVector(file, p + "attn_q_norm.weight", c.head_dim));
    ASSIGN_OR_RETURN(l.k_norm, LoadVector(file, p + "attn_k_norm.weight", c.head_dim));
  }
  if (c.post_norms) {
    ASSIGN_OR_RETURN(l.attn_post_norm, LoadVector(file, p + "post_attention_norm.weight", c.n_embd));
    ASSIGN_OR_RETURN(l.ffn_post_norm, LoadVector(file, p + "post_ffw_norm.weight", c.n_embd));
  }
  return l;
}

uint64_t MatrixBytes(const WeightMatrix& m) {
  return static_cast<uint64_t>(m.rows) * kernels::RowBytes(m.type, m.cols);
}

}  // namespace

const uint8_t* WeightMatrix::row(int64_t r) const {
  return data + static_cast<size_t>(r) * kernels::RowBytes(type, cols);
}

uint64_t ModelWeights::DecodeBytesPerToken() const {
  uint64_t bytes = kernels::RowBytes(token_embd.type, token_embd.cols) + MatrixBytes(output);
  for (const LayerWeights& l : layers) {
    for (const WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.gate, &l.up, &l.down}) {
      bytes += MatrixBytes(*m);
    }
  }
  return bytes;
}

absl::StatusOr<ModelWeights> LoadModelWeights(const GgufFile& file, const ModelConfig& c) {
  ModelWeights w;
  ASSIGN_OR_RETURN(w.token_embd, LoadMatrix(file, "token_embd.weight", c.vocab_size, c.n_embd));
  w.layers.reserve(c.n_layers);
  for (int i = 0; i < c.n_layers; ++i) {
    ASSIGN_OR_RETURN(LayerWeights layer, LoadLayer(file, c, i));
    w.layers.push_back(std::move(layer));
  }
  ASSIGN_OR_RETURN(w.output_norm, LoadVector(file, "output_norm.weight", c.n_embd));
  w.tied_output = file.FindTensor("output.weight") == nullptr;
  if (w.tied_output) {
    w.output = w.token_embd;
  } else {
    ASSIGN_OR_RETURN(w.output, LoadMatrix(file, "output.weight", c.vocab_size, c.n_embd));
  }
  if (file.FindTensor("rope_freqs.weight") != nullptr) {
    ASSIGN_OR_RETURN(w.rope_freq_factors, LoadVector(file, "rope_freqs.weight", c.rope_dim / 2));
  }
  return w;
}

}  // namespace splitspec::model
