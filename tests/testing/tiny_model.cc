#include "tests/testing/tiny_model.h"

#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/quantize_weights.h"
#include "runtime/base/logging.h"

namespace splitspec::model {
namespace {

using kernels::GgmlType;

void AppendUtf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Tensor bytes of `values` (rows of `cols`) in `type`.
std::vector<uint8_t> Encode(const std::vector<float>& values, int64_t cols, GgmlType type) {
  const int64_t rows = static_cast<int64_t>(values.size()) / cols;
  const size_t row_bytes = kernels::RowBytes(type, cols);
  std::vector<uint8_t> out(row_bytes * rows);
  for (int64_t r = 0; r < rows; ++r) {
    kernels::QuantizeRow(type, &values[r * cols], &out[r * row_bytes], cols);
  }
  return out;
}

class Builder {
 public:
  Builder(const TinyModelOptions& o, GgufWriter& w) : o_(o), w_(w), rng_(o.seed) {}

  // rows x cols matrix, uniform in +-1/sqrt(cols).
  void Matrix(const std::string& name, int64_t rows, int64_t cols, GgmlType type) {
    std::vector<float> v(rows * cols);
    const float a = 1.0f / std::sqrt(static_cast<float>(cols));
    std::uniform_real_distribution<float> dist(-a, a);
    for (float& x : v) x = dist(rng_);
    Add(name, {cols, rows}, type, v, cols);
  }
  // n values center +- spread (norm weights near 1, biases near 0).
  void Vector(const std::string& name, int64_t n, float center, float spread) {
    std::vector<float> v(n);
    std::uniform_real_distribution<float> dist(center - spread, center + spread);
    for (float& x : v) x = dist(rng_);
    Add(name, {n}, GgmlType::kF32, v, n);
  }

 private:
  void Add(const std::string& name, std::vector<int64_t> dims, GgmlType type,
           const std::vector<float>& v, int64_t cols) {
    absl::Status s = w_.AddTensor(name, dims, type, Encode(v, cols, type));
    SPLITSPEC_CHECK(s.ok()) << s.message();
  }
  const TinyModelOptions& o_;
  GgufWriter& w_;
  std::mt19937 rng_;
};

// The tiny tokenizer, then unused tokens up to `rows` tokens (when more than its own).
void AddTokenizer(GgufWriter& w, int rows) {
  std::vector<std::string> tokens = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};
  std::vector<int32_t> types = {3, 3, 3};  // control
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(Gpt2ByteToken(static_cast<uint8_t>(b)));
    types.push_back(1);  // normal
  }
  for (const std::string& merge : TinyModelMerges()) {
    const size_t space = merge.find(' ');
    tokens.push_back(merge.substr(0, space) + merge.substr(space + 1));
    types.push_back(1);
  }
  for (int id = static_cast<int>(tokens.size()); id < rows; ++id) {
    tokens.push_back(absl::StrCat("[PAD", id, "]"));
    types.push_back(5);  // unused
  }
  w.SetString("tokenizer.ggml.model", "gpt2");
  w.SetString("tokenizer.ggml.pre", "smollm");
  w.SetStringArray("tokenizer.ggml.tokens", tokens);
  w.SetInt32Array("tokenizer.ggml.token_type", types);
  w.SetStringArray("tokenizer.ggml.merges", TinyModelMerges());
  w.SetUint32("tokenizer.ggml.bos_token_id", 0);
  w.SetUint32("tokenizer.ggml.eos_token_id", 0);
  w.SetBool("tokenizer.ggml.add_bos_token", false);
}

}  // namespace

std::string Gpt2ByteToken(uint8_t byte) {
  // Printable bytes map to themselves; the others to U+0100 + their rank.
  auto printable = [](int b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
  };
  uint32_t cp = byte;
  if (!printable(byte)) {
    int rank = 0;
    for (int b = 0; b < byte; ++b) rank += printable(b) ? 0 : 1;
    cp = 256 + rank;
  }
  std::string out;
  AppendUtf8(cp, out);
  return out;
}

const std::vector<std::string>& TinyModelMerges() {
  static const std::vector<std::string> merges = {"\xc4\xa0 t",
                                                  "h e",
                                                  "\xc4\xa0t he",
                                                  "i n",
                                                  "\xc4\xa0 a",
                                                  "e r",
                                                  "o n",
                                                  "\xc4\xa0 s",
                                                  "r e",
                                                  "a t",
                                                  "\xc4\xa0 w",
                                                  "o r",
                                                  "e n",
                                                  "\xc4\xa0 o",
                                                  "e s",
                                                  "l l",
                                                  "i s",
                                                  "\xc4\xa0 b",
                                                  "a n",
                                                  "\xc4\xa0 c",
                                                  "in g",
                                                  "\xc4\xa0 h",
                                                  "e d",
                                                  "\xc4\xa0 i",
                                                  "o u",
                                                  "\xc4\xa0 f",
                                                  "\xc4\xa0 m",
                                                  "i t",
                                                  "a r",
                                                  "\xc4\xa0 d",
                                                  "\xc4\xa0 p",
                                                  "l e",
                                                  "\xc4\xa0 n",
                                                  "\xc4\xa0o f",
                                                  "a l",
                                                  "\xc4\xa0"
                                                  "a n",
                                                  "\xc4\xa0"
                                                  "an d",
                                                  "\xc4\xa0t o",
                                                  "\xc4\xa0 l",
                                                  "\xc4\xa0 is",
                                                  "\xc4\xa0 g",
                                                  "o m",
                                                  "\xc4\xa0 e",
                                                  "l o",
                                                  "\xc4\xa0w h"};
  return merges;
}

int TinyModelVocabSize() { return 259 + static_cast<int>(TinyModelMerges().size()); }

TinyModelOptions TinyGemma3Options(kernels::GgmlType type, int window) {
  TinyModelOptions o;
  o.architecture = "gemma3";
  o.n_layers = 6;
  o.n_embd = 64;
  o.n_ff = 128;
  o.n_heads = 2;
  o.n_kv_heads = 1;
  o.head_dim = 64;
  o.sliding_window = window;
  o.rope_freq_base = 1e6f;
  o.rms_norm_eps = 1e-6f;
  o.weight_type = type;
  o.embedding_type = type == kernels::GgmlType::kQ5_0 ? kernels::GgmlType::kQ8_0 : type;
  return o;
}

GgufWriter MakeTinyModel(const TinyModelOptions& o) {
  GgufWriter w;
  const std::string& a = o.architecture;
  w.SetString("general.architecture", a);
  w.SetString("general.name", o.name.empty() ? absl::StrCat("tiny-", a) : o.name);
  w.SetUint32(a + ".block_count", o.n_layers);
  w.SetUint32(a + ".context_length", o.context_length);
  w.SetUint32(a + ".embedding_length", o.n_embd);
  w.SetUint32(a + ".feed_forward_length", o.n_ff);
  w.SetUint32(a + ".attention.head_count", o.n_heads);
  w.SetUint32(a + ".attention.head_count_kv", o.n_kv_heads);
  w.SetFloat32(a + ".rope.freq_base", o.rope_freq_base);
  w.SetFloat32(a + ".attention.layer_norm_rms_epsilon", o.rms_norm_eps);
  if (o.rope_linear_factor > 0.f) {
    w.SetString(a + ".rope.scaling.type", "linear");
    w.SetFloat32(a + ".rope.scaling.factor", o.rope_linear_factor);
  }
  SPLITSPEC_CHECK(o.vocab_rows == 0 || o.vocab_rows >= TinyModelVocabSize())
      << "vocab_rows " << o.vocab_rows << " < the tokenizer's " << TinyModelVocabSize();
  const int vocab = o.vocab_rows > 0 ? o.vocab_rows : TinyModelVocabSize();
  AddTokenizer(w, vocab);

  Builder b(o, w);
  const int head_dim = o.head_dim > 0 ? o.head_dim : o.n_embd / o.n_heads;
  const bool gemma3 = a == "gemma3";
  if (gemma3) {
    w.SetUint32(a + ".attention.key_length", head_dim);
    w.SetUint32(a + ".attention.value_length", head_dim);
    w.SetUint32(a + ".attention.sliding_window", o.sliding_window);
  }
  const int q_dim = o.n_heads * head_dim;
  const int kv_dim = o.n_kv_heads * head_dim;
  b.Matrix("token_embd.weight", vocab, o.n_embd, o.embedding_type);
  for (int l = 0; l < o.n_layers; ++l) {
    const std::string p = absl::StrCat("blk.", l, ".");
    b.Vector(p + "attn_norm.weight", o.n_embd, 1.f, 0.2f);
    b.Matrix(p + "attn_q.weight", q_dim, o.n_embd, o.weight_type);
    b.Matrix(p + "attn_k.weight", kv_dim, o.n_embd, o.weight_type);
    b.Matrix(p + "attn_v.weight", kv_dim, o.n_embd, o.attn_v_type.value_or(o.weight_type));
    if (a == "qwen2") {
      b.Vector(p + "attn_q.bias", q_dim, 0.f, 0.3f);
      b.Vector(p + "attn_k.bias", kv_dim, 0.f, 0.3f);
      b.Vector(p + "attn_v.bias", kv_dim, 0.f, 0.3f);
    }
    if (gemma3) {
      b.Vector(p + "attn_q_norm.weight", head_dim, 1.f, 0.2f);
      b.Vector(p + "attn_k_norm.weight", head_dim, 1.f, 0.2f);
    }
    b.Matrix(p + "attn_output.weight", o.n_embd, q_dim, o.weight_type);
    if (gemma3) b.Vector(p + "post_attention_norm.weight", o.n_embd, 1.f, 0.2f);
    b.Vector(p + "ffn_norm.weight", o.n_embd, 1.f, 0.2f);
    b.Matrix(p + "ffn_gate.weight", o.n_ff, o.n_embd, o.weight_type);
    b.Matrix(p + "ffn_up.weight", o.n_ff, o.n_embd, o.weight_type);
    b.Matrix(p + "ffn_down.weight", o.n_embd, o.n_ff, o.weight_type);
    if (gemma3) b.Vector(p + "post_ffw_norm.weight", o.n_embd, 1.f, 0.2f);
  }
  b.Vector("output_norm.weight", o.n_embd, 1.f, 0.2f);
  if (!o.tied_output) b.Matrix("output.weight", vocab, o.n_embd, o.weight_type);
  return w;
}

absl::Status WriteTinyModel(const TinyModelOptions& options, const std::string& path) {
  return MakeTinyModel(options).WriteFile(path);
}

const char kTinyChatMlTemplate[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content']"
    " + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}";

GgufWriter MakeTinyChatModel() {
  TinyModelOptions options;
  options.weight_type = kernels::GgmlType::kQ8_0;
  GgufWriter writer = MakeTinyModel(options);
  writer.SetString("tokenizer.chat_template", kTinyChatMlTemplate);
  return writer;
}

}  // namespace splitspec::model
