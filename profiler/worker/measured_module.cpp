// `wavecast_measured`, a Python module embedded in wavecast-worker when CUPTI is
// available: the tracer's cuda mode collects each op's kernels through it.
#include "wavecast/measured/cupti_session.h"

#include <memory>
#include <optional>
#include <pybind11/embed.h>
#include <pybind11/stl.h>

namespace py = pybind11;
using namespace wavecast::measured;

namespace {

py::dict kernelJson(const KernelActivity& kernel) {
  py::dict out;
  out["name"] = kernel.name;
  out["grid"] = std::vector<int64_t>(kernel.grid.begin(), kernel.grid.end());
  out["block"] = std::vector<int64_t>(kernel.block.begin(), kernel.block.end());
  out["registers_per_thread"] = kernel.registersPerThread;
  out["static_shared_bytes"] = kernel.staticSharedBytes;
  out["dynamic_shared_bytes"] = kernel.dynamicSharedBytes;
  out["duration_ms"] = kernel.durationMs();
  if (kernel.kind != ActivityKind::Kernel) {
    out["kind"] = toString(kernel.kind);
    out["bytes"] = kernel.bytes;
  }
  return out;
}

// Owns the CUPTI session; close() finalizes CUPTI deterministically (not at GC).
class PySession {
public:
  PySession() : session_(std::make_unique<CuptiSession>()) {}
  void pushOp(uint64_t opId) { live().pushOp(opId); }
  void popOp() { live().popOp(); }

  // -> {"kernels": {external_id: [kernel]}, "unmatched": n, "unmatched_ms": ms,
  // "dropped": n}; the caller synchronizes the GPU first.
  py::dict collect() {
    const ActivityBatch batch = live().collect();
    const KernelMatch match = matchKernelsToOps(batch);
    py::dict byOp;
    for (const auto& [op, kernels] : match.kernelsByOp) {
      py::list list;
      for (const KernelActivity& kernel : kernels)
        list.append(kernelJson(kernel));
      byOp[py::int_(op)] = list;
    }
    py::dict out;
    out["kernels"] = byOp;
    out["unmatched"] = match.unmatched.size();
    double unmatchedMs = 0;
    for (const KernelActivity& kernel : match.unmatched)
      unmatchedMs += kernel.durationMs();
    out["unmatched_ms"] = unmatchedMs;
    out["dropped"] = batch.droppedRecords;
    return out;
  }

  void close() { session_.reset(); }

private:
  CuptiSession& live() {
    if (!session_)
      throw CuptiError("the CUPTI session is closed", 0);
    return *session_;
  }
  std::unique_ptr<CuptiSession> session_;
};

} // namespace

PYBIND11_EMBEDDED_MODULE(wavecast_measured, m) {
  m.doc() = "CUPTI kernel activity for wavecast's measured (cuda) mode";
  py::register_exception<CuptiError>(m, "CuptiError", PyExc_RuntimeError);
  py::class_<PySession>(m, "Session")
      .def(py::init<>())
      .def("push_op", &PySession::pushOp)
      .def("pop_op", &PySession::popOp)
      .def("collect", &PySession::collect)
      .def("close", &PySession::close);
}
