// Pinocchio's own C++ for experiments/bench_contacts.py: computeRNEADerivatives,
// computeABADerivatives and constraintDynamics (rigid LOCAL contacts, initConstraintDynamics once,
// ProximalSettings(1e-14, 0, 1) as tests/test_constrained.py sets them) per call over stored states.
// Usage: pin_derivs_contacts <model.bin> <states.bin> <contacts.bin> <refs.bin> <B> <K> <rounds>.
//   model.bin: the model as Pinocchio's Python bindings saved it (Model.saveToBinary);
//   states.bin: B x (q, v, a, tau) in Pinocchio's layout (nq, nv, nv, nv doubles each);
//   contacts.bin: n, then per contact: dim (6 or 3), parent joint id, the contact placement in
//     that joint's frame as R (row-major 3x3) and p (3), all doubles;
//   refs.bin: for the first K states, as Python Pinocchio computed them (row-major matrices):
//     dtau/dq, dtau/dv, M, dqdd/dq, dqdd/dv, M^-1 (nv x nv each), then the constrained qdd (nv)
//     and lambda_c (sum of dims).
// Prints "<name> <min us> <median us>" per state for rnea_derivs, aba_derivs, constraint_dynamics
// (each a loop over the B states, one call per state), and the largest absolute error of each
// against refs.bin ("err_<name> <value>"); Pinocchio's C++ fills only the upper triangle of M and
// M^-1, mirrored here before the comparison (outside the timed loops).
#include <pinocchio/serialization.hpp>
#include <pinocchio/algorithm/rnea-derivatives.hpp>
#include <pinocchio/algorithm/aba-derivatives.hpp>
#include <pinocchio/algorithm/constrained-dynamics.hpp>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

#include "pin_io.hpp"

int main(int argc, char **argv) {
  PeerRun run;
  if (!load_run(argc, argv, run)) return 2;
  const pinocchio::Model &model = run.model;
  pinocchio::Data data(model);
  const int B = run.B, K = run.K, rounds = run.rounds;
  const int nq = model.nq, nv = model.nv, row = nq + 3 * nv;
  const std::vector<double> &states = run.states, &spec = run.spec, &refs = run.refs;
  if (states.size() != static_cast<size_t>(B) * row) return 3;
  std::vector<Eigen::VectorXd> q(B), v(B), a(B), tau(B);
  for (int b = 0; b < B; ++b) {
    const double *p = states.data() + static_cast<size_t>(b) * row;
    q[b] = Eigen::Map<const Eigen::VectorXd>(p, nq);
    v[b] = Eigen::Map<const Eigen::VectorXd>(p + nq, nv);
    a[b] = Eigen::Map<const Eigen::VectorXd>(p + nq + nv, nv);
    tau[b] = Eigen::Map<const Eigen::VectorXd>(p + nq + 2 * nv, nv);
  }
  int m = 0;
  const ContactModels cms = read_contacts(model, spec, m);
  PINOCCHIO_STD_VECTOR_WITH_EIGEN_ALLOCATOR(pinocchio::RigidConstraintData) cds;
  for (const auto &cm : cms) cds.emplace_back(cm);
  pinocchio::initConstraintDynamics(model, data, cms, cds);
  pinocchio::ProximalSettings prox(1e-14, 0.0, 1);
  const size_t per = static_cast<size_t>(6) * nv * nv + nv + m;
  if (refs.size() != per * K || K > B) return 4;

  std::map<std::string, double> err;
  using RowMat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  auto mat = [&](int b, int k) {
    return Eigen::Map<const RowMat>(refs.data() + per * b + static_cast<size_t>(k) * nv * nv, nv, nv);
  };
  auto worst = [&](const std::string &name, double e) { err[name] = std::max(err[name], e); };
  for (int b = 0; b < K; ++b) {
    pinocchio::computeRNEADerivatives(model, data, q[b], v[b], a[b]);
    worst("rnea_derivs", (data.dtau_dq - mat(b, 0)).cwiseAbs().maxCoeff());
    worst("rnea_derivs", (data.dtau_dv - mat(b, 1)).cwiseAbs().maxCoeff());
    worst("rnea_derivs", (symmetric(data.M) - mat(b, 2)).cwiseAbs().maxCoeff());
    pinocchio::computeABADerivatives(model, data, q[b], v[b], tau[b]);
    worst("aba_derivs", (data.ddq_dq - mat(b, 3)).cwiseAbs().maxCoeff());
    worst("aba_derivs", (data.ddq_dv - mat(b, 4)).cwiseAbs().maxCoeff());
    worst("aba_derivs", (symmetric(data.Minv) - mat(b, 5)).cwiseAbs().maxCoeff());
    const double *r = refs.data() + per * b + static_cast<size_t>(6) * nv * nv;
    pinocchio::constraintDynamics(model, data, q[b], v[b], tau[b], cms, cds, prox);
    worst("cd_qdd", (data.ddq - Eigen::Map<const Eigen::VectorXd>(r, nv)).cwiseAbs().maxCoeff());
    worst("cd_lambda",
          (data.lambda_c - Eigen::Map<const Eigen::VectorXd>(r + nv, m)).cwiseAbs().maxCoeff());
  }
  std::map<std::string, std::vector<double>> t;
  double sink = 0.0;
  for (int r = 0; r < rounds; ++r) {
    auto t0 = Clock::now();
    for (int b = 0; b < B; ++b) {
      pinocchio::computeRNEADerivatives(model, data, q[b], v[b], a[b]);
      sink += data.dtau_dq(0, 0);
    }
    auto t1 = Clock::now();
    for (int b = 0; b < B; ++b) {
      pinocchio::computeABADerivatives(model, data, q[b], v[b], tau[b]);
      sink += data.ddq_dq(0, 0);
    }
    auto t2 = Clock::now();
    for (int b = 0; b < B; ++b)
      sink += pinocchio::constraintDynamics(model, data, q[b], v[b], tau[b], cms, cds, prox)[0];
    auto t3 = Clock::now();
    t["rnea_derivs"].push_back(us(t0, t1) / B);
    t["aba_derivs"].push_back(us(t1, t2) / B);
    t["constraint_dynamics"].push_back(us(t2, t3) / B);
  }
  for (auto &kv : t) {
    std::sort(kv.second.begin(), kv.second.end());
    std::printf("%s %.4f %.4f\n", kv.first.c_str(), kv.second[0], kv.second[kv.second.size() / 2]);
  }
  for (auto &kv : err) std::printf("err_%s %.3e\n", kv.first.c_str(), kv.second);
  std::printf("sink %g\n", sink);
  return 0;
}
