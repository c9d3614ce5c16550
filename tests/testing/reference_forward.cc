#include "tests/testing/reference_forward.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/dequantize.h"
#include "kernels/cpu/quant_blocks.h"
#include "runtime/base/status_macros.h"
#include "runtime/model/cpu_backend.h"
#include "runtime/model/model_config.h"

namespace splitspec::model {
namespace {

using Matrix = std::vector<std::vector<double>>;  // [rows][cols]

absl::StatusOr<Matrix> Load(const GgufFile& file, const std::string& name) {
  ASSIGN_OR_RETURN(const GgufTensorInfo* t, file.GetTensor(name));
  const int64_t cols = t->dims[0];
  const int64_t rows = t->num_elements / cols;
  const size_t row_bytes = kernels::RowBytes(t->type, cols);
  Matrix m(rows, std::vector<double>(cols));
  std::vector<float> row(cols);
  for (int64_t r = 0; r < rows; ++r) {
    kernels::DequantizeRow(t->type, t->data + r * row_bytes, row.data(), cols);
    for (int64_t c = 0; c < cols; ++c) m[r][c] = row[c];
  }
  return m;
}

std::vector<double> MatVec(const Matrix& m, const std::vector<double>& x) {
  std::vector<double> y(m.size(), 0.0);
  for (size_t r = 0; r < m.size(); ++r) {
    for (size_t c = 0; c < x.size(); ++c) y[r] += m[r][c] * x[c];
  }
  return y;
}

std::vector<double> RmsNorm(const std::vector<double>& x, const std::vector<double>& w,
                            double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double scale = 1.0 / std::sqrt(ss / x.size() + eps);
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * scale * w[i];
  return y;
}

// The nearest half-precision value: llama.cpp (and the transformer) keep Q, K, V
// and the attention probabilities at half precision.
double Half(double x) { return kernels::RoundToHalf(static_cast<float>(x)); }

void Rope(const ModelConfig& c, int pos, double* head) {
  const int half = c.rope_dim / 2;
  for (int i = 0; i < half; ++i) {
    const double freq = std::pow(static_cast<double>(c.rope_freq_base), -2.0 * i / c.rope_dim);
    const double angle = pos * static_cast<double>(c.rope_freq_scale) * freq;
    // llama (GGUF): rotate neighbours; qwen2: rotate element i with i + half.
    const int a = c.architecture == "qwen2" ? i : 2 * i;
    const int b = c.architecture == "qwen2" ? i + half : 2 * i + 1;
    const double x0 = head[a], x1 = head[b];
    head[a] = x0 * std::cos(angle) - x1 * std::sin(angle);
    head[b] = x0 * std::sin(angle) + x1 * std::cos(angle);
  }
}

}  // namespace

absl::StatusOr<std::vector<std::vector<float>>> ReferenceForward(
    const GgufFile& file, const std::vector<int32_t>& tokens) {
  ASSIGN_OR_RETURN(ModelConfig c, ReadModelConfig(file));
  ASSIGN_OR_RETURN(Matrix embd, Load(file, "token_embd.weight"));
  const int n = static_cast<int>(tokens.size());
  const int hd = c.head_dim;
  std::vector<std::vector<double>> x(n);
  for (int t = 0; t < n; ++t) x[t] = embd[tokens[t]];
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = absl::StrCat("blk.", l, ".");
    ASSIGN_OR_RETURN(Matrix attn_norm, Load(file, p + "attn_norm.weight"));
    ASSIGN_OR_RETURN(Matrix wq, Load(file, p + "attn_q.weight"));
    ASSIGN_OR_RETURN(Matrix wk, Load(file, p + "attn_k.weight"));
    ASSIGN_OR_RETURN(Matrix wv, Load(file, p + "attn_v.weight"));
    ASSIGN_OR_RETURN(Matrix wo, Load(file, p + "attn_output.weight"));
    ASSIGN_OR_RETURN(Matrix ffn_norm, Load(file, p + "ffn_norm.weight"));
    ASSIGN_OR_RETURN(Matrix gate, Load(file, p + "ffn_gate.weight"));
    ASSIGN_OR_RETURN(Matrix up, Load(file, p + "ffn_up.weight"));
    ASSIGN_OR_RETURN(Matrix down, Load(file, p + "ffn_down.weight"));
    Matrix bq(1, std::vector<double>(wq.size(), 0.0)), bk(1, std::vector<double>(wk.size(), 0.0)),
        bv(1, std::vector<double>(wv.size(), 0.0));
    if (c.qkv_bias) {
      ASSIGN_OR_RETURN(bq, Load(file, p + "attn_q.bias"));
      ASSIGN_OR_RETURN(bk, Load(file, p + "attn_k.bias"));
      ASSIGN_OR_RETURN(bv, Load(file, p + "attn_v.bias"));
    }
    std::vector<std::vector<double>> q(n), k(n), v(n);
    for (int t = 0; t < n; ++t) {
      const std::vector<double> h = RmsNorm(x[t], attn_norm[0], c.rms_norm_eps);
      q[t] = MatVec(wq, h);
      k[t] = MatVec(wk, h);
      v[t] = MatVec(wv, h);
      for (size_t i = 0; i < q[t].size(); ++i) q[t][i] += bq[0][i];
      for (size_t i = 0; i < k[t].size(); ++i) k[t][i] += bk[0][i], v[t][i] += bv[0][i];
      for (int h2 = 0; h2 < c.n_heads; ++h2) Rope(c, t, &q[t][h2 * hd]);
      for (int h2 = 0; h2 < c.n_kv_heads; ++h2) Rope(c, t, &k[t][h2 * hd]);
      for (double& e : q[t]) e = Half(e);
      for (double& e : k[t]) e = Half(e);
      for (double& e : v[t]) e = Half(e);
    }
    // llama.cpp's order multiplies F16 V by F16 probabilities; the block order keeps them
    // in float (runtime/model/cpu_backend.h).
    const bool half_probabilities = ActiveCpuAttentionOrder() == CpuAttentionOrder::kLlamaCpp;
    for (int t = 0; t < n; ++t) {
      std::vector<double> attn(c.q_dim(), 0.0);
      for (int h = 0; h < c.n_heads; ++h) {
        const int kvh = h / (c.n_heads / c.n_kv_heads);
        std::vector<double> w(t + 1);
        double max = -1e300, sum = 0;
        for (int j = 0; j <= t; ++j) {
          double s = 0;
          for (int d = 0; d < hd; ++d) s += q[t][h * hd + d] * k[j][kvh * hd + d];
          w[j] = s / std::sqrt(static_cast<double>(hd));
          max = std::max(max, w[j]);
        }
        for (int j = 0; j <= t; ++j) sum += (w[j] = std::exp(w[j] - max));
        for (int j = 0; j <= t; ++j) {
          const double p = half_probabilities ? Half(w[j] / sum) : w[j] / sum;
          for (int d = 0; d < hd; ++d) attn[h * hd + d] += p * v[j][kvh * hd + d];
        }
      }
      const std::vector<double> o = MatVec(wo, attn);
      for (size_t i = 0; i < o.size(); ++i) x[t][i] += o[i];
      const std::vector<double> h = RmsNorm(x[t], ffn_norm[0], c.rms_norm_eps);
      std::vector<double> g = MatVec(gate, h);
      const std::vector<double> u = MatVec(up, h);
      for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
      const std::vector<double> dn = MatVec(down, g);
      for (size_t i = 0; i < dn.size(); ++i) x[t][i] += dn[i];
    }
  }
  ASSIGN_OR_RETURN(Matrix out_norm, Load(file, "output_norm.weight"));
  const bool tied = file.FindTensor("output.weight") == nullptr;
  ASSIGN_OR_RETURN(Matrix head, Load(file, tied ? "token_embd.weight" : "output.weight"));
  std::vector<std::vector<float>> logits(n);
  for (int t = 0; t < n; ++t) {
    const std::vector<double> y = MatVec(head, RmsNorm(x[t], out_norm[0], c.rms_norm_eps));
    logits[t].assign(y.begin(), y.end());
  }
  return logits;
}

}  // namespace splitspec::model
