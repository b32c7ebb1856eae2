// Pinocchio's own C++ for experiments/bench_delassus.py: computeDelassusMatrix (rigid LOCAL
// contacts, mu = 0, as Python's pin.computeDelassusMatrix calls it) once per state over stored
// configurations.
// Usage: pin_delassus <model.bin> <configs.bin> <contacts.bin> <refs.bin> <B> <K> <rounds>.
//   model.bin: the model as Pinocchio's Python bindings saved it (Model.saveToBinary);
//   configs.bin: at least B configurations q in Pinocchio's layout (nq doubles each);
//   contacts.bin: the contacts as pin_io.hpp's read_contacts reads them;
//   refs.bin: R blocks of K row-major m x m reference matrices, the first K states' (R = its size
//     over K m^2), e.g. sparsedyn's PV-OSIMr answers and the dense J M^-1 J^T; the first
//     min(K, B) states are checked.
// Prints "delassus <min us> <median us>" per state over the rounds (each a loop over the B
// states, one call per state) and the largest absolute error against each reference
// ("err_ref<r> <value>"); Pinocchio's C++ fills the upper triangle only, mirrored here before the
// comparison (outside the timed loops).
#include <pinocchio/serialization.hpp>
#include <pinocchio/algorithm/delassus.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "pin_io.hpp"

int main(int argc, char **argv) {
  PeerRun run;
  if (!load_run(argc, argv, run)) return 2;
  const pinocchio::Model &model = run.model;
  pinocchio::Data data(model);
  const int B = run.B, K = run.K, rounds = run.rounds, nq = model.nq;
  const std::vector<double> &configs = run.states, &spec = run.spec, &refs = run.refs;
  if (configs.size() < static_cast<size_t>(B) * nq) return 3;
  std::vector<Eigen::VectorXd> q(B);
  for (int b = 0; b < B; ++b)
    q[b] = Eigen::Map<const Eigen::VectorXd>(configs.data() + static_cast<size_t>(b) * nq, nq);
  int m = 0;
  const ContactModels cms = read_contacts(model, spec, m);
  PINOCCHIO_STD_VECTOR_WITH_EIGEN_ALLOCATOR(pinocchio::RigidConstraintData) cds;
  for (const auto &cm : cms) cds.emplace_back(cm);
  const size_t mm = static_cast<size_t>(m) * m;
  if (K < 1 || refs.size() % (mm * K) != 0) return 4;
  const size_t R = refs.size() / (mm * K);
  Eigen::MatrixXd D = Eigen::MatrixXd::Zero(m, m);

  using RowMat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  std::vector<double> err(R, 0.0);
  for (int b = 0; b < std::min(K, B); ++b) {
    pinocchio::computeDelassusMatrix(model, data, q[b], cms, cds, D, 0.0);
    const Eigen::MatrixXd full = symmetric(D);
    for (size_t r = 0; r < R; ++r) {
      Eigen::Map<const RowMat> ref(refs.data() + (r * K + b) * mm, m, m);
      err[r] = std::max(err[r], (full - ref).cwiseAbs().maxCoeff());
    }
  }
  std::vector<double> t;
  double sink = 0.0;
  for (int r = 0; r < rounds; ++r) {
    auto t0 = Clock::now();
    for (int b = 0; b < B; ++b) {
      pinocchio::computeDelassusMatrix(model, data, q[b], cms, cds, D, 0.0);
      sink += D(0, 0);
    }
    t.push_back(us(t0, Clock::now()) / B);
  }
  std::sort(t.begin(), t.end());
  std::printf("delassus %.4f %.4f\n", t[0], t[t.size() / 2]);
  for (size_t r = 0; r < R; ++r) std::printf("err_ref%zu %.3e\n", r, err[r]);
  std::printf("sink %g\n", sink);
  return 0;
}
