// Pearson's chi-square goodness-of-fit test for the distribution tests of
// runtime/spec (test-only helper).
//
//   ChiSquareResult r = ChiSquareTest(counts, expected_probs);
//   PrintChiSquare("rejection/random p,q #1", r);
//   EXPECT_GT(r.p_value, 1e-3);
//
// Cells whose expected count is below 5 are pooled into one cell (and that
// pooled cell is dropped if its expected count is still below 5), the classic
// validity rule. An observation in a cell of expected probability 0 gives an
// infinite statistic and p-value 0.
#ifndef SPLITSPEC_TESTS_TESTING_CHI_SQUARE_H_
#define SPLITSPEC_TESTS_TESTING_CHI_SQUARE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace splitspec::spec::testing {

struct ChiSquareResult {
  double statistic = 0.0;
  int dof = 0;           // cells used - 1
  double p_value = 1.0;  // P(chi2_dof >= statistic)
};

// Upper tail of the chi-square distribution: Q(dof / 2, x / 2). REQUIRES dof >= 1, x >= 0.
double ChiSquareUpperTail(double x, int dof);

// counts [cells] observed, expected [cells] probabilities summing to 1.
ChiSquareResult ChiSquareTest(const std::vector<int64_t>& counts,
                              const std::vector<double>& expected);

// Observed token sequences against an exact law over them (sequence -> probability):
// ChiSquareTest of the law's cells in the law's order, plus, when any observed sequence
// lies outside the law's support, one cell of probability 0 holding them all (so a
// single such observation gives p-value 0).
ChiSquareResult ChiSquareTestAgainstLaw(const std::map<std::vector<int32_t>, double>& law,
                                        const std::map<std::vector<int32_t>, int64_t>& seen);

// Prints "chi2[name]: statistic=.. dof=.. p=.." to stdout for the report.
void PrintChiSquare(const std::string& name, const ChiSquareResult& result);

// A two-stage decision for distribution checks whose sample no seed can fix (through a
// live pipeline, timing decides whether a token is committed by verification or by the
// target alone). `draw(n)` draws independent sample n (n = 0, then 1) and returns
// whether every check on it passed; its checks together reject a correct law with
// probability <= alpha. The decision fails only if both draws fail: false alarm <=
// alpha^2 (1e-6 for alpha 1e-3), while a wrong law that one draw rejects with probability
// `power` still fails with probability power^2. The second draw runs only after a failed
// first one, and both are printed.
bool PassesOneOfTwoDraws(const std::function<bool(int draw)>& draw);

}  // namespace splitspec::spec::testing

#endif  // SPLITSPEC_TESTS_TESTING_CHI_SQUARE_H_
