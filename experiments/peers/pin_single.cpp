// Pinocchio's own C++ per call: rnea and aba over stored states, one state per call, many rounds.
// Usage: pin_single <model.bin> <states.bin> <B> <rounds>. model.bin: the model as Pinocchio's
// Python bindings saved it (Model.saveToBinary, boost serialization: the wheel ships no URDF
// parser headers); states.bin holds B x (q, v, a, tau) in Pinocchio's layout (nq, nv, nv, nv
// doubles each). Prints "rnea <min us> <median us>" and
// "aba <min us> <median us>" (per call, over rounds of B calls) and the largest |tau| error
// against the stored tau (the states' check).
#include <pinocchio/serialization.hpp>
#include <pinocchio/algorithm/rnea.hpp>
#include <pinocchio/algorithm/aba.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <vector>

int main(int argc, char **argv) {
  if (argc < 5) return 2;
  pinocchio::Model model;
  model.loadFromBinary(argv[1]);
  pinocchio::Data data(model);
  const int B = std::atoi(argv[3]), rounds = std::atoi(argv[4]);
  const int nq = model.nq, nv = model.nv, row = nq + 3 * nv;
  std::vector<double> buf(static_cast<size_t>(B) * row);
  std::ifstream in(argv[2], std::ios::binary);
  in.read(reinterpret_cast<char *>(buf.data()), buf.size() * sizeof(double));
  if (!in) return 3;
  std::vector<Eigen::VectorXd> q(B), v(B), a(B), tau(B);
  for (int b = 0; b < B; ++b) {
    const double *p = buf.data() + static_cast<size_t>(b) * row;
    q[b] = Eigen::Map<const Eigen::VectorXd>(p, nq);
    v[b] = Eigen::Map<const Eigen::VectorXd>(p + nq, nv);
    a[b] = Eigen::Map<const Eigen::VectorXd>(p + nq + nv, nv);
    tau[b] = Eigen::Map<const Eigen::VectorXd>(p + nq + 2 * nv, nv);
  }
  double err = 0.0, sink = 0.0;
  for (int b = 0; b < B; ++b)
    err = std::max(err, (pinocchio::rnea(model, data, q[b], v[b], a[b]) - tau[b]).cwiseAbs().maxCoeff());
  std::vector<double> t_rnea, t_aba;
  for (int r = 0; r < rounds; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int b = 0; b < B; ++b) sink += pinocchio::rnea(model, data, q[b], v[b], a[b])[0];
    auto t1 = std::chrono::steady_clock::now();
    for (int b = 0; b < B; ++b) sink += pinocchio::aba(model, data, q[b], v[b], tau[b])[0];
    auto t2 = std::chrono::steady_clock::now();
    t_rnea.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / B);
    t_aba.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count() / B);
  }
  std::sort(t_rnea.begin(), t_rnea.end());
  std::sort(t_aba.begin(), t_aba.end());
  std::printf("rnea %.4f %.4f\naba %.4f %.4f\nerr %.3e\nsink %g\n", t_rnea[0], t_rnea[rounds / 2],
              t_aba[0], t_aba[rounds / 2], err, sink);
  return 0;
}
