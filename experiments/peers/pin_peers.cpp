// Pinocchio's own C++ for experiments/bench_peers.py: rnea, aba, crba per call over stored states,
// and rneaInParallel / abaInParallel (ModelPool, OpenMP) over the whole batch on 1..T threads.
// Usage: pin_peers <model.bin> <states.bin> <B> <rounds> [threads ...]. model.bin: the model as
// Pinocchio's Python bindings saved it (Model.saveToBinary); states.bin holds B x (q, v, a, tau)
// in Pinocchio's layout (nq, nv, nv, nv doubles each). Prints "<name> <min us> <median us>" per
// state for rnea, aba, crba and rnea_par<T>, aba_par<T> (one call on the B states, divided by
// B), and the largest errors of each against the stored tau / a ("err_<name> <value>").
// Built with -DSD_NO_PARALLEL (no OpenMP or no parallel headers) it prints
// "parallel unavailable <reason>" instead of the parallel timings.
#include <pinocchio/serialization.hpp>
#include <pinocchio/algorithm/rnea.hpp>
#include <pinocchio/algorithm/aba.hpp>
#include <pinocchio/algorithm/crba.hpp>
#ifndef SD_NO_PARALLEL
#include <pinocchio/multibody/pool.hpp>
#include <pinocchio/algorithm/parallel/rnea.hpp>
#include <pinocchio/algorithm/parallel/aba.hpp>
#endif
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

using Clock = std::chrono::steady_clock;
static double us(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

int main(int argc, char **argv) {
  if (argc < 5) return 2;
  pinocchio::Model model;
  model.loadFromBinary(argv[1]);
  pinocchio::Data data(model);
  const int B = std::atoi(argv[3]), rounds = std::atoi(argv[4]);
  std::vector<int> threads;
  for (int i = 5; i < argc; ++i) threads.push_back(std::atoi(argv[i]));
  const int nq = model.nq, nv = model.nv, row = nq + 3 * nv;
  std::vector<double> buf(static_cast<size_t>(B) * row);
  std::ifstream in(argv[2], std::ios::binary);
  in.read(reinterpret_cast<char *>(buf.data()), buf.size() * sizeof(double));
  if (!in) return 3;
  Eigen::MatrixXd Q(nq, B), V(nv, B), A(nv, B), T(nv, B);
  std::vector<Eigen::VectorXd> q(B), v(B), a(B), tau(B);
  for (int b = 0; b < B; ++b) {
    const double *p = buf.data() + static_cast<size_t>(b) * row;
    q[b] = Eigen::Map<const Eigen::VectorXd>(p, nq);
    v[b] = Eigen::Map<const Eigen::VectorXd>(p + nq, nv);
    a[b] = Eigen::Map<const Eigen::VectorXd>(p + nq + nv, nv);
    tau[b] = Eigen::Map<const Eigen::VectorXd>(p + nq + 2 * nv, nv);
    Q.col(b) = q[b]; V.col(b) = v[b]; A.col(b) = a[b]; T.col(b) = tau[b];
  }
  std::map<std::string, double> err;
  double sink = 0.0;
  for (int b = 0; b < B; ++b) {
    err["rnea"] = std::max(err["rnea"], (pinocchio::rnea(model, data, q[b], v[b], a[b]) - tau[b]).cwiseAbs().maxCoeff());
    err["aba"] = std::max(err["aba"], (pinocchio::aba(model, data, q[b], v[b], tau[b]) - a[b]).cwiseAbs().maxCoeff());
  }
  std::map<std::string, std::vector<double>> t;
#ifndef SD_NO_PARALLEL
  int tmax = 1;
  for (int n : threads) tmax = std::max(tmax, n);
  pinocchio::ModelPool pool(model, static_cast<size_t>(tmax));
  Eigen::MatrixXd OUT(nv, B);
  for (int n : threads) {
    std::string s = std::to_string(n);
    pinocchio::rneaInParallel(static_cast<size_t>(n), pool, Q, V, A, OUT);
    err["rnea_par" + s] = (OUT - T).cwiseAbs().maxCoeff();
    pinocchio::abaInParallel(static_cast<size_t>(n), pool, Q, V, T, OUT);
    err["aba_par" + s] = (OUT - A).cwiseAbs().maxCoeff();
  }
#endif
  for (int r = 0; r < rounds; ++r) {
    auto t0 = Clock::now();
    for (int b = 0; b < B; ++b) sink += pinocchio::rnea(model, data, q[b], v[b], a[b])[0];
    auto t1 = Clock::now();
    for (int b = 0; b < B; ++b) sink += pinocchio::aba(model, data, q[b], v[b], tau[b])[0];
    auto t2 = Clock::now();
    for (int b = 0; b < B; ++b) sink += pinocchio::crba(model, data, q[b])(0, 0);
    auto t3 = Clock::now();
    t["rnea"].push_back(us(t0, t1) / B);
    t["aba"].push_back(us(t1, t2) / B);
    t["crba"].push_back(us(t2, t3) / B);
#ifndef SD_NO_PARALLEL
    for (int n : threads) {
      std::string s = std::to_string(n);
      auto p0 = Clock::now();
      pinocchio::rneaInParallel(static_cast<size_t>(n), pool, Q, V, A, OUT);
      auto p1 = Clock::now();
      sink += OUT(0, 0);
      pinocchio::abaInParallel(static_cast<size_t>(n), pool, Q, V, T, OUT);
      auto p2 = Clock::now();
      sink += OUT(0, 0);
      t["rnea_par" + s].push_back(us(p0, p1) / B);
      t["aba_par" + s].push_back(us(p1, p2) / B);
    }
#endif
  }
  for (auto &kv : t) {
    std::sort(kv.second.begin(), kv.second.end());
    std::printf("%s %.4f %.4f\n", kv.first.c_str(), kv.second[0], kv.second[kv.second.size() / 2]);
  }
  for (auto &kv : err) std::printf("err_%s %.3e\n", kv.first.c_str(), kv.second);
#ifdef SD_NO_PARALLEL
  std::printf("parallel unavailable %s\n", SD_NO_PARALLEL_REASON);
#endif
  std::printf("sink %g\n", sink);
  return 0;
}
