// Matrix-vector / small-batch matrix products of ggml-typed weights with float
// activations: the inner loop of every linear layer.
//
//   PackedActivations packed;                        // keep one per thread/layer and reuse
//   PackActivations(GgmlType::kQ4_1, x, tokens, 576, &packed);
//   MatMulRows(GgmlType::kQ4_1, w, 576, packed, 0, 1536, y, 1536);   // y [tokens, 1536]
//
// Algorithm. Float weights (F32, F16, BF16) are dotted with float activations
// (FMA). Quantized weights are dotted with activations quantized to int8 by
// PackActivations: Q4_0 / Q4_1 / Q8_0 pair with 32-element int8 blocks that carry
// a float scale and the block sum; the K-quants pair with 256-element int8 blocks
// with sums per 16 elements. Products are exact integers inside a block and are
// scaled and summed in float across blocks.
//
// Paths (chosen once per process from CpuFeatures(), capped by SPLITSPEC_CPU_ISA):
// AVX-512 with VNNI (vpdpbusd), AVX-512 (vpmaddubsw + vpmaddwd), AVX2, and the scalar
// reference. Each weight row is read once per tile of tokens (up to 9 on AVX-512, 8 on
// AVX2, 4 for AVX2 with 32-element blocks) and every token of the tile is accumulated
// against it, so a verification block of k+1 <= 9 tokens streams the weights from
// memory once (on AVX-512 in a single pass). Q4_1 and Q8_0 read each 16-row group once
// per tile of up to 10 tokens; per token and block, 8 vpdpbusd serve 16 rows
// (matmul_interleaved_avx512.cc). Where the CPU has AMX-INT8 and the OS grants the tiles,
// calls of at least InterleavedAmxMinTokens() tokens (a prompt chunk, a large batch) take
// tiles of up to 16 tokens, one tile multiply per block (matmul_interleaved_amx.cc),
// bitwise the VNNI outputs: measured on a 2-core Xeon with AMX (splitspec_bench_matmul,
// one thread, Q4_1 1536 x 576) 1.15x the VNNI kernel at 16 tokens and 1.3x at 64-128, no
// gain at 8 and a loss below: the 32-element blocks need their scales applied per block,
// so each tile multiply is followed by a tile store and a vector epilogue.
//
// Q4_1 and Q8_0 order. Q4_1 weights (the default model's) and Q8_0 weights (its output
// head) run on rows interleaved 16 at a time
// (InterleaveRows below; MatMulRows interleaves raw rows on the fly), so that one vector
// instruction serves 16 rows of one token and no output needs a horizontal sum. Each
// output is one float chain over the blocks in increasing b, from acc = 0:
//   acc = fma(float(isum_b), half(d_w,b) * d_x,b, acc)
//   acc = fma(half(m_w,b), d_sum_x,b, acc)        (Q4_1 only)
// where isum_b is the exact integer dot of the block's quants with the token's int8
// activations. Every path (scalar included) does exactly this, so for these types all
// paths agree bitwise with each other.
//
// llama.cpp's Q4_1 order. The order above is not llama.cpp's (ggml_vec_dot_q4_1_q8_1 on
// x86: per output 8 float lanes, lane i taking the integer dot of elements 4i..4i+3 of
// each block, lane = fma(d_w * d_x, dot, lane) over the blocks, the lanes added as
// (l4 + l0) + (l6 + l2) + ((l5 + l1) + (l7 + l3)), then a separate fma chain of
// m_b * d_sum_b added). Through the model's 8-bit activation rounding, any last-bit
// difference becomes a whole quantization step that grows over the layers: with the
// order above the default model's next-token distributions differ from llama.cpp's by a
// mean KL of about 3e-3, as they do with exact (double) block sums; llama.cpp's batch
// and token-by-token paths differ from each other by 1.2e-3. Setting
// SPLITSPEC_MATMUL_ORDER=llama.cpp (read once per process) runs Q4_1 in llama.cpp's
// order instead, on a scalar kernel (many times slower), so that the logits can be
// checked against llama.cpp bit for bit (tools/reference/check_vs_llamacpp.py).
//
// Batch invariance. y[t, r] is bitwise identical whatever `tokens`, whatever the
// other tokens in x and whatever [row_begin, row_end) contains row r: each output
// follows one fixed sequence of operations that depends only on `cols` and on the
// instruction-set path, and the path is chosen once per process (CpuFeatures()).
// The scalar reference (MatMulRowsReference) runs the same integer algorithm with
// a different float summation order (except Q4_1 and Q8_0, see above), so it matches the
// fast paths to rounding only.
//
// Interleaved rows (Q4_1, Q8_0). InterleaveRows copies a matrix into groups of 16 rows;
// per group and block b, for Q4_1 320 bytes: four 64-byte chunks, chunk c holding bytes
// 4c..4c+3 of the block's 16 quant bytes for rows 0..15 in turn (low nibbles are elements
// 4c..4c+3, high nibbles 16+4c..16+4c+3), then the 16 rows' d (fp16), then their m
// (fp16); for Q8_0 544 bytes: eight chunks, chunk c holding quants 4c..4c+3 of rows
// 0..15 plus 128 (as unsigned bytes, for vpdpbusd), then the rows' d. A last partial
// group is padded with zero rows. The CPU model makes this copy once at load, 64-byte aligned
// (runtime/model/tp_shard.h), so that its matmuls read it instead of the file rows.
#ifndef SPLITSPEC_KERNELS_CPU_MATMUL_H_
#define SPLITSPEC_KERNELS_CPU_MATMUL_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cpu/dequantize.h"
#include "kernels/cpu/ggml_types.h"

namespace splitspec::kernels {

// Activations prepared once per matmul input for dot products against weights of
// one type (quantized to 8-bit blocks for the quantized types, floats otherwise).
// Reusable across calls: `data` is only grown, never shrunk.
struct PackedActivations {
  GgmlType weight_type = GgmlType::kF32;
  int64_t tokens = 0;
  int64_t cols = 0;
  std::vector<uint8_t> data;  // layout private to the kernels (quantize_activations.h)
};

// x [tokens, cols] row-major floats -> *out, ready for MatMulRows against weights of
// `weight_type`. The packed bytes are the same on every path (fast or scalar).
// REQUIRES: IsSupportedWeightType(weight_type), tokens >= 0, cols % block_size == 0,
// x finite. Thread-safe for distinct `out`.
void PackActivations(GgmlType weight_type, const float* x, int64_t tokens, int64_t cols,
                     PackedActivations* out);

// PackActivations in parts, for callers that pack a large batch on several threads:
// SizeActivations makes *out a packing of `tokens` tokens of `cols` (its bytes not yet
// written), then PackActivationTokens writes tokens [token_begin, token_end) of x,
// the same bytes PackActivations writes for them. Thread-safe for disjoint ranges of
// one `out`. REQUIRES: as PackActivations; 0 <= token_begin <= token_end <= tokens.
void SizeActivations(GgmlType weight_type, int64_t tokens, int64_t cols, PackedActivations* out);
void PackActivationTokens(const float* x, int64_t token_begin, int64_t token_end,
                          PackedActivations* out);

// y[t * y_stride + r] = dot(row r of w, token t of x) for r in [row_begin, row_end) and
// every token t < x.tokens.
// w [rows, cols] in weight_type, rows stored contiguously (RowBytes(weight_type, cols) each),
// e.g. straight from the memory-mapped file; no alignment needed.
// REQUIRES: x was packed for weight_type with x.cols == cols; 0 <= row_begin <= row_end;
// y_stride >= row_end. Violations of type or cols abort (programmer error).
// Thread-safe for disjoint row ranges (the caller splits rows across its threads);
// x is only read.
void MatMulRows(GgmlType weight_type, const void* w, int64_t cols, const PackedActivations& x,
                int64_t row_begin, int64_t row_end, float* y, int64_t y_stride);

// Scalar reference of the same algorithm (same packed activations, same integer
// block products, sequential float sum over blocks; Q4_1 always in the interleaved
// order). Same contract as MatMulRows.
void MatMulRowsReference(GgmlType weight_type, const void* w, int64_t cols,
                         const PackedActivations& x, int64_t row_begin, int64_t row_end, float* y,
                         int64_t y_stride);

// True for the types with an interleaved layout (Q4_1, Q8_0).
bool HasInterleavedLayout(GgmlType weight_type);

// The Q4_1 summation order of this process (see "llama.cpp's Q4_1 order" above).
enum class MatMulOrder { kInterleaved, kLlamaCpp };
MatMulOrder ActiveMatMulOrder();
const char* MatMulOrderName(MatMulOrder order);  // "interleaved" or "llama.cpp"

// Whether MatMulRowsInterleaved is this process's fast path for `weight_type`: its type
// has the layout, and its order is the active one (so not Q4_1 under llama.cpp's order).
bool RunsOnInterleavedRows(GgmlType weight_type);

// Bytes of the interleaved copy of a [rows, cols] matrix. REQUIRES: HasInterleavedLayout.
size_t InterleavedBytes(GgmlType weight_type, int64_t rows, int64_t cols);

// Rows [0, rows) of w (RowBytes apart, as MatMulRows reads them) -> out
// [InterleavedBytes(weight_type, rows, cols)]. REQUIRES: HasInterleavedLayout.
void InterleaveRows(GgmlType weight_type, const void* w, int64_t rows, int64_t cols, uint8_t* out);

// MatMulRows on an interleaved copy `wi` of the matrix: bitwise the same outputs.
// REQUIRES: HasInterleavedLayout(weight_type), row_begin % 16 == 0, row_end <= the rows
// interleaved; otherwise as MatMulRows.
void MatMulRowsInterleaved(GgmlType weight_type, const uint8_t* wi, int64_t cols,
                           const PackedActivations& x, int64_t row_begin, int64_t row_end, float* y,
                           int64_t y_stride);

// The path MatMulRows uses on this machine: "avx512-vnni", "avx512", "avx2" or "scalar".
const char* MatMulPathName();

// Whether MatMulRowsInterleaved runs calls of at least InterleavedAmxMinTokens() tokens
// on AMX tiles in this process (CpuFeatures().amx_int8), and that threshold (16;
// SPLITSPEC_AMX_MIN_TOKENS overrides it, for benchmarks).
bool InterleavedRunsOnAmx();
int InterleavedAmxMinTokens();
// For benchmark headers: " + amx tiles for calls of >= N tokens" where AMX runs, else "".
const char* InterleavedAmxNote();

namespace internal {
// Q4_1 in llama.cpp's order, scalar: what MatMulRows runs for Q4_1 under
// SPLITSPEC_MATMUL_ORDER=llama.cpp. Same contract as MatMulRows.
void MatMulRowsQ4_1LlamaCppOrder(const void* w, int64_t cols, const PackedActivations& x,
                                 int64_t row_begin, int64_t row_end, float* y, int64_t y_stride);

// Per-ISA entry points (same contract as MatMulRows). REQUIRES: the CPU supports the ISA.
// Tests and benchmarks call them directly to compare paths on one machine.
void MatMulRowsAvx2(GgmlType weight_type, const void* w, int64_t cols, const PackedActivations& x,
                    int64_t row_begin, int64_t row_end, float* y, int64_t y_stride);
// AVX-512 F/BW/VL/DQ without VNNI, and with VNNI (vpdpbusd for the 32-element blocks).
void MatMulRowsAvx512(GgmlType weight_type, const void* w, int64_t cols, const PackedActivations& x,
                      int64_t row_begin, int64_t row_end, float* y, int64_t y_stride);
void MatMulRowsAvx512Vnni(GgmlType weight_type, const void* w, int64_t cols,
                          const PackedActivations& x, int64_t row_begin, int64_t row_end, float* y,
                          int64_t y_stride);
}  // namespace internal

}  // namespace splitspec::kernels

#endif  // SPLITSPEC_KERNELS_CPU_MATMUL_H_
