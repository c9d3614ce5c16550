#include "tests/testing/reference_forward.h"

#include <algorithm>
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

// Gemma 3 (llama.cpp's llama-model.cpp): every 6th layer attends globally, the others
// through the sliding window, rotated with base 10000 and scale 1.
bool Gemma3Sliding(const ModelConfig& c, int layer) {
  return c.architecture == "gemma3" && layer % 6 != 5;
}

void Rope(const ModelConfig& c, int layer, int pos, double* head) {
  const int half = c.rope_dim / 2;
  const bool sliding = Gemma3Sliding(c, layer);
  const double base = sliding ? 10000.0 : c.rope_freq_base;
  const double scale = sliding ? 1.0 : c.rope_freq_scale;
  for (int i = 0; i < half; ++i) {
    const double freq = std::pow(base, -2.0 * i / c.rope_dim);
    const double angle = pos * scale * freq;
    // llama (GGUF): rotate neighbours; qwen2, gemma3 ("NeoX"): element i with i + half.
    const bool neox = c.architecture != "llama";
    const int a = neox ? i : 2 * i;
    const int b = neox ? i + half : 2 * i + 1;
    const double x0 = head[a], x1 = head[b];
    head[a] = x0 * std::cos(angle) - x1 * std::sin(angle);
    head[b] = x0 * std::sin(angle) + x1 * std::cos(angle);
  }
}

// RMS norm of each of the `heads` vectors of w.size() elements at x, in place.
void NormHeads(double* x, int heads, const std::vector<double>& w, double eps) {
  const int n = static_cast<int>(w.size());
  for (int h = 0; h < heads; ++h) {
    const std::vector<double> y = RmsNorm(std::vector<double>(x + h * n, x + (h + 1) * n), w, eps);
    std::copy(y.begin(), y.end(), x + h * n);
  }
}

// gelu with the tanh approximation (Gemma's GeGLU).
double GeluTanh(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

}  // namespace

absl::StatusOr<std::vector<std::vector<float>>> ReferenceForward(
    const GgufFile& file, const std::vector<int32_t>& tokens) {
  ASSIGN_OR_RETURN(ModelConfig c, ReadModelConfig(file));
  ASSIGN_OR_RETURN(Matrix embd, Load(file, "token_embd.weight"));
  const int n = static_cast<int>(tokens.size());
  const int hd = c.head_dim;
  const bool gemma3 = c.architecture == "gemma3";
  std::vector<std::vector<double>> x(n);
  for (int t = 0; t < n; ++t) {
    x[t] = embd[tokens[t]];
    if (gemma3) {
      for (double& e : x[t]) e *= std::sqrt(static_cast<double>(c.n_embd));
    }
  }
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
    Matrix q_norm, k_norm, post_attention_norm, post_ffw_norm;
    if (gemma3) {
      ASSIGN_OR_RETURN(q_norm, Load(file, p + "attn_q_norm.weight"));
      ASSIGN_OR_RETURN(k_norm, Load(file, p + "attn_k_norm.weight"));
      ASSIGN_OR_RETURN(post_attention_norm, Load(file, p + "post_attention_norm.weight"));
      ASSIGN_OR_RETURN(post_ffw_norm, Load(file, p + "post_ffw_norm.weight"));
    }
    std::vector<std::vector<double>> q(n), k(n), v(n);
    for (int t = 0; t < n; ++t) {
      const std::vector<double> h = RmsNorm(x[t], attn_norm[0], c.rms_norm_eps);
      q[t] = MatVec(wq, h);
      k[t] = MatVec(wk, h);
      v[t] = MatVec(wv, h);
      for (size_t i = 0; i < q[t].size(); ++i) q[t][i] += bq[0][i];
      for (size_t i = 0; i < k[t].size(); ++i) k[t][i] += bk[0][i], v[t][i] += bv[0][i];
      if (gemma3) {
        NormHeads(q[t].data(), c.n_heads, q_norm[0], c.rms_norm_eps);
        NormHeads(k[t].data(), c.n_kv_heads, k_norm[0], c.rms_norm_eps);
      }
      for (int h2 = 0; h2 < c.n_heads; ++h2) Rope(c, l, t, &q[t][h2 * hd]);
      for (int h2 = 0; h2 < c.n_kv_heads; ++h2) Rope(c, l, t, &k[t][h2 * hd]);
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
        // A sliding layer sees positions t - window + 1 .. t.
        const int first =
            Gemma3Sliding(c, l) ? std::max(0, t - c.sliding_window + 1) : 0;
        for (int j = 0; j < first; ++j) w[j] = 0;  // masked: no weight
        for (int j = first; j <= t; ++j) {
          double s = 0;
          for (int d = 0; d < hd; ++d) s += q[t][h * hd + d] * k[j][kvh * hd + d];
          w[j] = s / std::sqrt(static_cast<double>(hd));
          max = std::max(max, w[j]);
        }
        for (int j = first; j <= t; ++j) sum += (w[j] = std::exp(w[j] - max));
        for (int j = first; j <= t; ++j) {
          const double p = half_probabilities ? Half(w[j] / sum) : w[j] / sum;
          for (int d = 0; d < hd; ++d) attn[h * hd + d] += p * v[j][kvh * hd + d];
        }
      }
      std::vector<double> o = MatVec(wo, attn);
      if (gemma3) o = RmsNorm(o, post_attention_norm[0], c.rms_norm_eps);
      for (size_t i = 0; i < o.size(); ++i) x[t][i] += o[i];
      const std::vector<double> h = RmsNorm(x[t], ffn_norm[0], c.rms_norm_eps);
      std::vector<double> g = MatVec(gate, h);
      const std::vector<double> u = MatVec(up, h);
      for (size_t i = 0; i < g.size(); ++i) {
        g[i] = (gemma3 ? GeluTanh(g[i]) : g[i] / (1.0 + std::exp(-g[i]))) * u[i];
      }
      std::vector<double> dn = MatVec(down, g);
      if (gemma3) dn = RmsNorm(dn, post_ffw_norm[0], c.rms_norm_eps);
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
