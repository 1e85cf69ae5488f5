// CudaBackend's graph steps (see cuda_backend.h): recording launches between
// BeginGraphStep and EndGraphStep, capturing or replaying the graph of a step's key.
#include "common/runtime/cuda_backend.h"

#include <cuda_runtime_api.h>

#include "common/cuda/cuda_status.h"

namespace tandem::runtime {

unsigned char* CudaBackend::AppendRecord(const char* op, const void* key, size_t key_bytes, size_t closure_bytes,
                                         Status (*run)(const unsigned char*, cudaStream_t)) {
  key_.append(op);
  key_.push_back('\0');
  key_.append(static_cast<const char*>(key), key_bytes);
  const size_t offset = (closures_.size() + kClosureAlign - 1) / kClosureAlign * kClosureAlign;
  closures_.resize(offset + closure_bytes);
  recorded_.push_back({run, offset});
  return closures_.data() + offset;
}

Status CudaBackend::BeginGraphStep() {
  if (recording_) return FailedPreconditionError("BeginGraphStep: a graph step is already open");
  // The previous graph may still be reading the staging area we are about to overwrite.
  TANDEM_RETURN_IF_CUDA_ERROR(cudaEventSynchronize(graph_done_));
  recording_ = true;
  key_.clear();
  recorded_.clear();
  closures_.clear();
  staging_used_ = 0;
  return Status::Ok();
}

void CudaBackend::CancelGraphStep() {
  recording_ = false;
  key_.clear();
  recorded_.clear();
}

Status CudaBackend::EndGraphStep() {
  if (!recording_) return FailedPreconditionError("EndGraphStep without BeginGraphStep");
  recording_ = false;
  cudaGraphExec_t exec = nullptr;
  if (last_key_ != nullptr && *last_key_ == key_) {  // the last step's shape again: no hashing
    exec = last_graph_;
    ++graph_replays_;
  } else if (auto it = graphs_.find(key_); it != graphs_.end()) {
    exec = it->second;
    last_key_ = &it->first;
    ++graph_replays_;
  } else {
    TANDEM_RETURN_IF_CUDA_ERROR(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed));
    Status launched = Status::Ok();
    for (const Recorded& r : recorded_) {
      launched = r.run(closures_.data() + r.offset, stream_);
      if (!launched.ok()) break;
    }
    cudaGraph_t graph = nullptr;
    const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
    if (!launched.ok() || end != cudaSuccess) {
      if (graph != nullptr) cudaGraphDestroy(graph);
      recorded_.clear();
      if (!launched.ok()) return launched.WithContext("capturing a graph step");
      return cuda::CudaStatus(end, "cudaStreamEndCapture");
    }
    const cudaError_t inst = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    TANDEM_RETURN_IF_ERROR(cuda::CudaStatus(inst, "cudaGraphInstantiate"));
    if (static_cast<int>(graphs_.size()) >= options_.max_graphs) {
      auto oldest = graphs_.find(graph_order_.front());
      cudaGraphExecDestroy(oldest->second);
      graphs_.erase(oldest);
      graph_order_.pop_front();
    }
    last_key_ = &graphs_.emplace(key_, exec).first->first;
    graph_order_.push_back(key_);
    ++graphs_captured_;
  }
  recorded_.clear();
  last_graph_ = exec;
  return RelaunchLastGraphStep();
}

Status CudaBackend::RelaunchLastGraphStep() {
  if (last_graph_ == nullptr) return FailedPreconditionError("RelaunchLastGraphStep: no graph step yet");
  if (recording_) return FailedPreconditionError("RelaunchLastGraphStep inside a graph step");
  TANDEM_RETURN_IF_CUDA_ERROR(cudaGraphLaunch(last_graph_, stream_));
  TANDEM_RETURN_IF_CUDA_ERROR(cudaEventRecord(graph_done_, stream_));
  return Status::Ok();
}

Status CudaBackend::BeginStep(bool decode_only) { return decode_only ? BeginGraphStep() : Status::Ok(); }

Status CudaBackend::EndStep() { return recording_ ? EndGraphStep() : Status::Ok(); }

}  // namespace tandem::runtime
