// The pieces the Pinocchio C++ peers with contacts share (pin_derivs_contacts.cpp,
// pin_delassus.cpp): a clock in microseconds, a file of doubles, the upper triangle Pinocchio's
// C++ fills mirrored to both, and the contacts as the experiments hand them over.
#pragma once
#include <pinocchio/multibody.hpp>
#include <pinocchio/constraints.hpp>
#include <pinocchio/serialization.hpp>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <vector>

using Clock = std::chrono::steady_clock;
static double us(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

static std::vector<double> read_all(const char *path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  std::vector<double> buf(static_cast<size_t>(in.tellg()) / sizeof(double));
  in.seekg(0);
  in.read(reinterpret_cast<char *>(buf.data()), buf.size() * sizeof(double));
  return buf;
}

static Eigen::MatrixXd symmetric(const Eigen::MatrixXd &upper) {
  Eigen::MatrixXd out = upper;
  out.triangularView<Eigen::StrictlyLower>() = upper.transpose();
  return out;
}

typedef PINOCCHIO_STD_VECTOR_WITH_EIGEN_ALLOCATOR(pinocchio::RigidConstraintModel) ContactModels;

// spec: n, then per contact: dim (6 or 3), parent joint id, the contact placement in that joint's
// frame as R (row-major 3x3) and p (3). LOCAL rigid contacts; m gets the sum of the dims.
static ContactModels read_contacts(const pinocchio::Model &model, const std::vector<double> &spec,
                                   int &m) {
  ContactModels cms;
  const int n = static_cast<int>(spec[0]);
  m = 0;
  for (int c = 0; c < n; ++c) {
    const double *s = spec.data() + 1 + 14 * c;
    Eigen::Matrix3d R;
    R << s[2], s[3], s[4], s[5], s[6], s[7], s[8], s[9], s[10];
    const pinocchio::SE3 placement(R, Eigen::Vector3d(s[11], s[12], s[13]));
    cms.emplace_back(s[0] == 6 ? pinocchio::CONTACT_6D : pinocchio::CONTACT_3D, model,
                     static_cast<pinocchio::JointIndex>(s[1]), placement, pinocchio::LOCAL);
    m += static_cast<int>(s[0]);
  }
  return cms;
}

// The peers' common command line: <model.bin> <states.bin> <contacts.bin> <refs.bin> <B> <K>
// <rounds>, each file read whole (the model as Pinocchio's Python bindings saved it).
struct PeerRun {
  pinocchio::Model model;
  std::vector<double> states, spec, refs;
  int B = 0, K = 0, rounds = 0;
};

static bool load_run(int argc, char **argv, PeerRun &run) {
  if (argc < 8) return false;
  run.model.loadFromBinary(argv[1]);
  run.states = read_all(argv[2]);
  run.spec = read_all(argv[3]);
  run.refs = read_all(argv[4]);
  run.B = std::atoi(argv[5]);
  run.K = std::atoi(argv[6]);
  run.rounds = std::atoi(argv[7]);
  return !run.spec.empty() && run.rounds >= 1;
}
